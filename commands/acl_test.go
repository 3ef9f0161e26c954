package commands

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delayd/delayd/acl"
	"github.com/delayd/delayd/engine"
)

// aclDispatcher is a dispatcher with opts on a fresh engine, which closes
// with the test (the ACL tests', and others').
func aclDispatcher(t *testing.T, opts Options) *Dispatcher {
	t.Helper()
	eng, err := engine.New(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	opts.Engine = eng
	if opts.Config == nil {
		opts.Config = map[string]string{}
	}
	return New(opts)
}

func must(t *testing.T, d *Dispatcher, c *Client, want string, a ...string) {
	t.Helper()
	if got := exec(d, c, args(a...)); got != want {
		t.Fatalf("%v: %q, want %q", a, got, want)
	}
}

const (
	nopermCmd = "-NOPERM User %s has no permissions to run the '%s' command\n"
	// Redis 7.2's key refusal names neither the user nor the key.
	nopermKeys = "-NOPERM No permissions to access a key\n"
)

func noperm(user, cmd string) string { return fmt.Sprintf(nopermCmd, user, cmd) }
func nopermKey(string) string        { return nopermKeys }

func workerSetup(t *testing.T, d *Dispatcher) (admin, worker *Client) {
	admin = d.NewClient(&textWriter{proto: 2}, "admin")
	must(t, d, admin, "+OK\n", "ACL", "SETUSER", "worker", "on", ">wpass", "~jobs:*",
		"+delay.pop", "+delay.ack", "+delay.nack", "+delay.touch")
	must(t, d, admin, "+OK\n", "ACL", "SETUSER", "producer", "on", ">ppass", "~jobs:*",
		"+delay.add", "+delay.addat", "+delay.cancel")
	worker = d.NewClient(&textWriter{proto: 2}, "worker")
	must(t, d, worker, "+OK\n", "AUTH", "worker", "wpass")
	return admin, worker
}

func TestACLDenials(t *testing.T) {
	d := aclDispatcher(t, Options{})
	admin, worker := workerSetup(t, d)
	producer := d.NewClient(&textWriter{proto: 2}, "producer")
	must(t, d, producer, "+OK\n", "AUTH", "producer", "ppass")
	must(t, d, producer, "$j1\n", "DELAY.ADD", "jobs:email", "0", "payload", "ID", "j1")
	must(t, d, producer, noperm("producer", "delay.pop"), "DELAY.POP", "jobs:email", "0")
	must(t, d, producer, nopermKey("producer"), "DELAY.ADD", "other", "0", "x")
	// DEADLETTER names a key too, and it must be inside the patterns.
	must(t, d, producer, nopermKey("producer"), "DELAY.ADD", "jobs:email", "0", "x", "DEADLETTER", "dlq")

	if got := exec(d, worker, args("DELAY.POP", "jobs:email", "0")); !strings.Contains(got, "payload") {
		t.Fatalf("worker pop: %q", got)
	}
	must(t, d, worker, ":int\n", "DELAY.ACK", "jobs:email", "j1")
	must(t, d, worker, noperm("worker", "delay.add"), "DELAY.ADD", "jobs:email", "0", "x")
	must(t, d, worker, nopermKey("worker"), "DELAY.POP", "mail", "0")
	must(t, d, worker, noperm("worker", "flushall"), "FLUSHALL")
	must(t, d, worker, noperm("worker", "config|get"), "CONFIG", "GET", "*")
	must(t, d, worker, noperm("worker", "acl|whoami"), "ACL", "WHOAMI")
	// Arity first, then the permission, as Redis.
	must(t, d, worker, "-ERR wrong number of arguments for 'delay.add' command\n", "DELAY.ADD", "jobs:a")
	// AUTH, HELLO and QUIT are never refused.
	must(t, d, worker, "-WRONGPASS invalid username-password pair or user is disabled.\n", "AUTH", "worker", "bad")

	log := exec(d, admin, args("ACL", "LOG"))
	for _, want := range []string{"$flushall\n", "$config|get\n", "$key\n", "$mail\n", "$worker\n", "$toplevel\n", "$auth\n", "user=worker"} {
		if !strings.Contains(log, want) {
			t.Errorf("ACL LOG lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "bad") || strings.Contains(log, "wpass") {
		t.Errorf("ACL LOG shows a password:\n%s", log)
	}
	must(t, d, admin, "+OK\n", "ACL", "LOG", "RESET")
	must(t, d, admin, "*\n", "ACL", "LOG")
	if line := d.clientLine(worker); !strings.Contains(line, " user=worker ") {
		t.Fatalf("CLIENT LIST: %s", line)
	}
}

func TestACLMulti(t *testing.T) {
	d := aclDispatcher(t, Options{})
	admin, worker := workerSetup(t, d)
	must(t, d, admin, "+OK\n", "ACL", "SETUSER", "worker", "+multi", "+exec")
	// Refused at queue time: the EXEC aborts.
	must(t, d, worker, "+OK\n", "MULTI")
	must(t, d, worker, noperm("worker", "delay.add"), "DELAY.ADD", "jobs:a", "0", "x")
	must(t, d, worker, "+QUEUED\n", "DELAY.TOUCH", "jobs:a", "nope")
	must(t, d, worker, "-EXECABORT Transaction discarded because of previous errors.\n", "EXEC")
	// Allowed when queued, refused when run: the user changed in between.
	must(t, d, worker, "+OK\n", "MULTI")
	must(t, d, worker, "+QUEUED\n", "DELAY.TOUCH", "jobs:a", "nope")
	must(t, d, admin, "+OK\n", "ACL", "SETUSER", "worker", "-delay.touch")
	must(t, d, worker, "*\n"+noperm("worker", "delay.touch"), "EXEC")
	if log := exec(d, admin, args("ACL", "LOG")); !strings.Contains(log, "$multi\n") {
		t.Fatalf("no multi context in ACL LOG:\n%s", log)
	}
}

func TestACLRequirePassAndAuth(t *testing.T) {
	d := aclDispatcher(t, Options{RequirePass: "secret"})
	c := d.NewClient(&textWriter{proto: 2}, "a")
	must(t, d, c, "-NOAUTH Authentication required.\n", "PING")
	must(t, d, c, "-WRONGPASS invalid username-password pair or user is disabled.\n", "AUTH", "nope")
	must(t, d, c, "+OK\n", "AUTH", "secret")
	must(t, d, c, "$default\n", "ACL", "WHOAMI")
	must(t, d, c, "+OK\n", "ACL", "SETUSER", "p", "on", ">pp", "allkeys", "+@delay", "-@dangerous")
	c2 := d.NewClient(&textWriter{proto: 2}, "b")
	if got := exec(d, c2, args("HELLO", "3", "AUTH", "p", "pp")); !strings.HasPrefix(got, "%\n") {
		t.Fatalf("HELLO AUTH: %q", got)
	}
	must(t, d, c2, noperm("p", "ping"), "PING")
	must(t, d, c2, "$j\n", "DELAY.ADD", "any", "0", "x", "ID", "j")
	// Deleting a user closes its connections; DELUSER default is refused.
	must(t, d, c, ":int\n", "ACL", "DELUSER", "p", "nobody")
	must(t, d, c, "-ERR The 'default' user cannot be removed\n", "ACL", "DELUSER", "default")
	must(t, d, c, "-ERR Error in ACL SETUSER modifier 'bogus': Syntax error\n", "ACL", "SETUSER", "x", "bogus")
	must(t, d, c, "-ERR Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL\n", "ACL", "SETUSER", "x", "+nosuch")
	must(t, d, c, "null\n", "ACL", "GETUSER", "x")
	must(t, d, c, "*\n$default\n", "ACL", "USERS")
}

func TestACLNoPassDefault(t *testing.T) {
	d := aclDispatcher(t, Options{})
	c := d.NewClient(&textWriter{proto: 2}, "a")
	must(t, d, c, "-"+errNoAuthConfig+"\n", "AUTH", "x")
	must(t, d, c, "+OK\n", "AUTH", "default", "anything")
	must(t, d, c, "-ERR Unknown category 'nope'\n", "ACL", "CAT", "nope")
	cat := exec(d, c, args("ACL", "CAT", "dangerous"))
	for _, name := range []string{"flushall", "shutdown", "config|set", "config|get", "acl|setuser", "client|kill"} {
		if !strings.Contains(cat, "$"+name+"\n") {
			t.Errorf("ACL CAT dangerous lacks %s", name)
		}
	}
	// As Redis 7: containers are listed by their subcommands, and those
	// have their own categories.
	for _, name := range []string{"delay.add", "config", "acl", "client", "client|id", "acl|whoami"} {
		if strings.Contains(cat, "$"+name+"\n") {
			t.Errorf("ACL CAT dangerous lists %s", name)
		}
	}
	conn := exec(d, c, args("ACL", "CAT", "connection"))
	for _, name := range []string{"command|docs", "client|id", "client|kill", "ping"} {
		if !strings.Contains(conn, "$"+name+"\n") {
			t.Errorf("ACL CAT connection lacks %s:\n%s", name, conn)
		}
	}
	must(t, d, c, "-"+errNoACLFile+"\n", "ACL", "SAVE")
	must(t, d, c, "-"+errNoACLFile+"\n", "ACL", "LOAD")
}

func TestACLSaveLoad(t *testing.T) {
	file := filepath.Join(t.TempDir(), "users.acl")
	d := aclDispatcher(t, Options{ACLFile: file})
	admin, _ := workerSetup(t, d)
	must(t, d, admin, "-ERR Usernames can't contain spaces or null characters\n", "ACL", "SETUSER", "a b", "on", "nopass", "+@all")
	must(t, d, admin, "+OK\n", "ACL", "SETUSER", "", "on", "nopass", "~a:*")
	must(t, d, admin, "+OK\n", "ACL", "SAVE")
	b, err := os.ReadFile(file)
	if err != nil || !strings.Contains(string(b), "user worker on #") || strings.Contains(string(b), "wpass") {
		t.Fatalf("saved %q, %v", b, err)
	}
	d2 := aclDispatcher(t, Options{ACLFile: file})
	if err := d2.LoadACLFile(); err != nil {
		t.Fatal(err)
	}
	w := d2.NewClient(&textWriter{proto: 2}, "w")
	must(t, d2, w, "+OK\n", "AUTH", "worker", "wpass")
	must(t, d2, w, noperm("worker", "delay.add"), "DELAY.ADD", "jobs:a", "0", "x")
	// LOAD drops users the file lacks, and a bad file changes nothing.
	must(t, d, admin, "+OK\n", "ACL", "SETUSER", "extra", "on")
	must(t, d, admin, "+OK\n", "ACL", "LOAD")
	must(t, d, admin, "null\n", "ACL", "GETUSER", "extra")
	os.WriteFile(file, []byte("user x on +nosuch\n"), 0o600)
	if got := exec(d, admin, args("ACL", "LOAD")); !strings.HasPrefix(got, "-ERR "+file+":1: Unknown command") {
		t.Fatalf("bad file: %q", got)
	}
	if got := exec(d, admin, args("ACL", "GETUSER", "worker")); !strings.Contains(got, "$-@all +delay.pop +delay.ack +delay.nack +delay.touch\n$keys\n$~jobs:*\n") {
		t.Fatalf("GETUSER: %q", got)
	}
}

// Every command has categories, and the categories say what its flags say.
func TestACLCategories(t *testing.T) {
	for _, cmd := range table {
		has := func(c string) bool {
			for _, x := range cmd.cats {
				if x == c {
					return true
				}
			}
			return false
		}
		if has("fast") == has("slow") {
			t.Errorf("%s: fast %v slow %v", cmd.Name, has("fast"), has("slow"))
		}
		if cmd.Flags&Write != 0 && !has("write") || cmd.Flags&ReadOnly != 0 && !has("read") {
			t.Errorf("%s: %v", cmd.Name, cmd.cats)
		}
		if cmd.Group == "delay" && !has("delay") || cmd.Flags&Blocking != 0 && !has("blocking") {
			t.Errorf("%s: %v", cmd.Name, cmd.cats)
		}
	}
}

func TestACLSetUserRedacted(t *testing.T) {
	got := shown(table[0], nil)
	for _, cmd := range table {
		if cmd.Name == "acl" {
			got = shown(cmd, args("ACL", "SETUSER", "w", "on", ">secret"))
		}
	}
	if strings.Join(got, " ") != "ACL SETUSER w (redacted) (redacted)" {
		t.Fatalf("shown: %q", got)
	}
}

// Protected mode asks whether the default user needs a password: it does
// with requirepass, or once ACL SETUSER gives it one, or when it is off.
func TestACLDefaultNeedsPassword(t *testing.T) {
	d := aclDispatcher(t, Options{})
	if d.DefaultNeedsPassword() {
		t.Fatal("a fresh server's default user needs no password")
	}
	c := d.NewClient(&textWriter{proto: 2}, "a")
	must(t, d, c, "+OK\n", "ACL", "SETUSER", "default", ">s3cret")
	if !d.DefaultNeedsPassword() {
		t.Fatal("after ACL SETUSER default >s3cret it needs one")
	}
	must(t, d, c, "+OK\n", "ACL", "SETUSER", "default", "nopass", "off")
	if !d.DefaultNeedsPassword() {
		t.Fatal("a default user that is off lets nobody in without AUTH")
	}
	if !aclDispatcher(t, Options{RequirePass: "x"}).DefaultNeedsPassword() {
		t.Fatal("requirepass gives the default user a password")
	}
}

// Rules for single subcommands, as Redis 7's tests/unit/acl.tcl drives
// them: NOPERM and ACL LOG name the subcommand, GETUSER, LIST and the
// aclfile keep the rules as given.
func TestACLSubcommandRules(t *testing.T) {
	file := filepath.Join(t.TempDir(), "users.acl")
	d := aclDispatcher(t, Options{ACLFile: file})
	admin := d.NewClient(&textWriter{proto: 2}, "admin")
	u := d.NewClient(&textWriter{proto: 2}, "u")
	as := func(rules ...string) {
		t.Helper()
		must(t, d, admin, "+OK\n", append([]string{"ACL", "SETUSER", "newuser", "reset", "on", "nopass", "~*"}, rules...)...)
		must(t, d, u, "+OK\n", "AUTH", "newuser", "x")
	}
	commands := func() string {
		got := exec(d, admin, args("ACL", "GETUSER", "newuser"))
		_, after, _ := strings.Cut(got, "$commands\n$")
		line, _, _ := strings.Cut(after, "\n")
		return line
	}

	// include single subcommands
	as("+@all", "-client", "+client|id", "+client|setname")
	if got := commands(); got != "+@all -client +client|id +client|setname" {
		t.Fatalf("GETUSER commands: %q", got)
	}
	must(t, d, u, ":int\n", "CLIENT", "ID")
	must(t, d, u, "+OK\n", "CLIENT", "SETNAME", "foo")
	must(t, d, u, noperm("newuser", "client|kill"), "CLIENT", "KILL", "TYPE", "master")
	must(t, d, u, noperm("newuser", "client|list"), "CLIENT", "LIST")

	// exclude single subcommands
	as("+@all", "-client|kill")
	must(t, d, u, ":int\n", "CLIENT", "ID")
	must(t, d, u, noperm("newuser", "client|kill"), "CLIENT", "KILL", "TYPE", "master")
	as("-@all", "+acl", "+config", "-config|set")
	if got := commands(); got != "-@all +acl +config -config|set" {
		t.Fatalf("GETUSER commands: %q", got)
	}
	if got := exec(d, u, args("CONFIG", "GET", "maxclients")); !strings.HasPrefix(got, "%") {
		t.Fatalf("CONFIG GET: %q", got)
	}
	must(t, d, u, noperm("newuser", "config|set"), "CONFIG", "SET", "maxclients", "1")

	// a subcommand has its own categories: CLIENT ID is not dangerous
	as("+@all", "-@dangerous")
	must(t, d, u, ":int\n", "CLIENT", "ID")
	must(t, d, u, noperm("newuser", "client|kill"), "CLIENT", "KILL", "TYPE", "master")
	must(t, d, u, noperm("newuser", "config|get"), "CONFIG", "GET", "*")
	as("-@all", "+@connection")
	must(t, d, u, ":int\n", "CLIENT", "ID")
	must(t, d, u, noperm("newuser", "config|get"), "CONFIG", "GET", "*")

	// Redis's errors for names that are not subcommands, and for selectors
	for rule, want := range map[string]string{
		"+config|get|appendonly": "Allowing first-arg of a subcommand is not supported",
		"+config|asdf":           "Unknown command or category name in ACL",
		"-config|asdf":           "Unknown command or category name in ACL",
		"+get|key1|key2":         "Unknown command or category name in ACL",
		"+delay.add|x":           acl.ErrFirstArg.Error(),
	} {
		must(t, d, admin, "-ERR Error in ACL SETUSER modifier '"+rule+"': "+want+"\n", "ACL", "SETUSER", "newuser", rule)
	}
	must(t, d, admin, "-ERR Error in ACL SETUSER modifier '(~jobs:* +delay.pop)': "+acl.ErrSelectors.Error()+"\n",
		"ACL", "SETUSER", "newuser", "(~jobs:*", "+delay.pop)")
	must(t, d, admin, "-ERR Unmatched parenthesis in acl selector starting at '(~jobs:*'.\n",
		"ACL", "SETUSER", "newuser", "(~jobs:*", "+delay.pop")

	// ACL LOG names the subcommand
	if log := exec(d, admin, args("ACL", "LOG")); !strings.Contains(log, "$object\n$config|get\n") || !strings.Contains(log, "$object\n$client|kill\n") {
		t.Fatalf("ACL LOG:\n%s", log)
	}

	// ACL LIST, SAVE and LOAD keep the rules
	as("+@all", "-client|kill", "-config|set", "+config|get")
	if got := exec(d, admin, args("ACL", "LIST")); !strings.Contains(got, "$user newuser on nopass ~* resetchannels +@all -client|kill -config|set +config|get\n") {
		t.Fatalf("ACL LIST: %q", got)
	}
	must(t, d, admin, "+OK\n", "ACL", "SAVE")
	d2 := aclDispatcher(t, Options{ACLFile: file})
	if err := d2.LoadACLFile(); err != nil {
		t.Fatal(err)
	}
	u2 := d2.NewClient(&textWriter{proto: 2}, "u2")
	must(t, d2, u2, "+OK\n", "AUTH", "newuser", "x")
	must(t, d2, u2, noperm("newuser", "client|kill"), "CLIENT", "KILL", "TYPE", "master")
	must(t, d2, u2, ":int\n", "CLIENT", "ID")
	if a, b := exec(d, admin, args("ACL", "LIST")), exec(d2, d2.NewClient(&textWriter{proto: 2}, "a2"), args("ACL", "LIST")); a != b {
		t.Fatalf("ACL LIST after SAVE and LOAD:\n%s\nwant\n%s", b, a)
	}
}

// Every subcommand ACL rules may name is one its container answers (not
// "unknown subcommand" for any number of arguments), and CLUSTER's are
// exactly its table's.
func TestACLSubcommandsAreDispatched(t *testing.T) {
	d := aclDispatcher(t, Options{})
	c := d.NewClient(&textWriter{proto: 2}, "a")
	for cont, spec := range subcommandSpecs {
		for _, l := range [][]string{spec.plain, spec.admin, spec.read} {
			for _, sub := range l {
				if cont == "cluster" {
					if _, ok := clusterSubs[sub]; !ok {
						t.Errorf("cluster|%s is not in clusterSubs", sub)
					}
					continue
				}
				answered := false
				for n := 0; n < 4 && !answered; n++ {
					a := []string{cont, sub}
					for range n {
						a = append(a, "x")
					}
					got := exec(d, c, args(a...))
					answered = !strings.Contains(strings.ToLower(got), "unknown subcommand")
				}
				if !answered {
					t.Errorf("%s|%s: the container does not answer it", cont, sub)
				}
				if d.ruleName(cont+"|"+sub) != acl.Subcommand {
					t.Errorf("%s|%s: not a subcommand to ACL", cont, sub)
				}
			}
		}
		if d.ruleName(cont) != acl.Container || d.ruleName(cont+"|nosuch") != acl.Unknown {
			t.Errorf("%s: not a container to ACL", cont)
		}
	}
	n := 0
	for _, l := range [][]string{subcommandSpecs["cluster"].plain, subcommandSpecs["cluster"].admin} {
		n += len(l)
	}
	if n != len(clusterSubs) {
		t.Errorf("ACL knows %d CLUSTER subcommands, the table has %d", n, len(clusterSubs))
	}
}

// An aclfile written for Redis loads: rules may name every Redis category
// and Redis commands delayd lacks; they grant nothing here (issue 30).
func TestACLRedisFileLoads(t *testing.T) {
	file := filepath.Join(t.TempDir(), "users.acl")
	os.WriteFile(file, []byte("user bob on -@all +@set ~set* >bob +@transaction -@string -@hash +hgetall -client|pause +@scripting\n"), 0o600)
	d := aclDispatcher(t, Options{ACLFile: file})
	if err := d.LoadACLFile(); err != nil {
		t.Fatal(err)
	}
	bob := d.NewClient(&textWriter{proto: 2}, "bob")
	must(t, d, bob, "+OK\n", "AUTH", "bob", "bob")
	must(t, d, bob, "+OK\n", "MULTI")
	must(t, d, bob, "*\n", "EXEC")
	must(t, d, bob, noperm("bob", "llen"), "LLEN", "set1")
	admin := d.NewClient(&textWriter{proto: 2}, "admin")
	if got := exec(d, admin, args("ACL", "GETUSER", "bob")); !strings.Contains(got, "$-@all +@set +@transaction -@string -@hash +hgetall -client|pause +@scripting\n") {
		t.Fatalf("GETUSER: %q", got)
	}
	must(t, d, admin, "*\n$multi\n$exec\n$discard\n$watch\n$unwatch\n", "ACL", "CAT", "transaction")
	must(t, d, admin, "*\n", "ACL", "CAT", "hash")
	if got := exec(d, admin, args("ACL", "CAT")); !strings.HasPrefix(got, "*\n$keyspace\n$read\n$write\n$set\n") || !strings.HasSuffix(got, "$transaction\n$scripting\n$delay\n") {
		t.Fatalf("ACL CAT: %q", got)
	}
	must(t, d, admin, "-ERR Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL\n", "ACL", "SETUSER", "x", "+nosuch")
}

// A client blocked in a pop whose user loses its keys meanwhile gets
// NOPERM when a job comes, and the job stays, as Redis 7.2 checks a
// blocked command's permissions again when it runs it (tests/unit/acl.tcl,
// "blocked command gets rejected when reprocessed after permission change").
func TestACLBlockedRecheck(t *testing.T) {
	for _, pop := range [][]string{
		{"BLPOP", "list1", "0"},
		{"BRPOP", "list0", "list1", "0"},
		{"DELAY.POP", "list1", "0"},
		{"DELAY.MPOP", "0", "1", "list1", "COUNT", "2"},
		{"BLMOVE", "list1", "dst", "LEFT", "RIGHT", "0"},
	} {
		d := aclDispatcher(t, Options{})
		admin := d.NewClient(&textWriter{proto: 2}, "admin")
		u := d.NewClient(&textWriter{proto: 2}, "u")
		must(t, d, admin, "+OK\n", "ACL", "SETUSER", "psuser", "reset", "on", "nopass", "+@all", "allkeys")
		must(t, d, u, "+OK\n", "AUTH", "psuser", "x")
		must(t, d, u, "", pop...)
		blk := u.Block
		u.Block = nil
		if blk == nil {
			t.Fatalf("%v did not block", pop)
		}
		must(t, d, admin, "+OK\n", "ACL", "SETUSER", "psuser", "resetkeys")
		must(t, d, admin, ":int\n", "RPUSH", "list1", "foo")
		select {
		case <-blk.Ready():
		default:
			t.Fatalf("%v: not resolved by the push", pop)
		}
		u.W.(*textWriter).sb.Reset()
		blk.Served(u)
		if got := u.W.(*textWriter).sb.String(); got != "-NOPERM No permissions to access a key\n" {
			t.Fatalf("%v: %q", pop, got)
		}
		if n := d.eng.Load().Len([]byte("list1")); n != 1 {
			t.Fatalf("%v: list1 has %d jobs, want the pushed one left", pop, n)
		}
		if got := exec(d, admin, args("ACL", "LOG", "1")); !strings.Contains(got, "$reason\n$key\n") || !strings.Contains(got, "$object\n$list") {
			t.Fatalf("%v: ACL LOG %q", pop, got)
		}
		// As Redis's test: the refused call is a rejected one, not a call.
		name := strings.ToLower(pop[0])
		if got := infoField(exec(d, admin, args("INFO", "commandstats")), "cmdstat_"+name); got != "calls=0,usec=0,usec_per_call=0.00,rejected_calls=1,failed_calls=0" {
			t.Fatalf("%v: cmdstat_%s:%s", pop, name, got)
		}
	}
}

// HELLO with several AUTH pairs tries the last, as Redis 7.2 does.
func TestHelloLastAuthWins(t *testing.T) {
	d := aclDispatcher(t, Options{})
	admin := d.NewClient(&textWriter{proto: 2}, "admin")
	must(t, d, admin, "+OK\n", "ACL", "SETUSER", "a", "on", ">x", "+@all")
	must(t, d, admin, "+OK\n", "ACL", "SETUSER", "b", "on", ">y", "+@all")
	c := d.NewClient(&textWriter{proto: 2}, "c")
	must(t, d, c, "-"+errWrongPass+"\n", "HELLO", "2", "AUTH", "a", "x", "AUTH", "b", "wrong")
	if got := exec(d, c, args("HELLO", "2", "AUTH", "a", "wrong", "AUTH", "b", "y")); !strings.HasPrefix(got, "%\n") {
		t.Fatalf("HELLO ... AUTH b y: %q", got)
	}
	must(t, d, c, "$b\n", "ACL", "WHOAMI")
	// A bad SETNAME is refused before any AUTH is tried.
	must(t, d, c, "-"+errClientName+"\n", "HELLO", "2", "AUTH", "a", "x", "SETNAME", "a b")
	must(t, d, c, "$b\n", "ACL", "WHOAMI")
}

// ACL LOG entries carry Redis 7.2's entry-id and timestamps; a repeat
// within a minute updates its entry, and RESET does not reuse ids.
func TestACLLogFields(t *testing.T) {
	d := aclDispatcher(t, Options{})
	w := &lineWriter{proto: 3}
	c := d.NewClient(w, "c")
	log := func() map[string]string {
		w.lines = nil
		d.Exec(c, args("ACL", "LOG", "1"))
		m := map[string]string{}
		for i := 2; i+1 < len(w.lines); i += 2 {
			m[strings.TrimPrefix(w.lines[i], "$")] = w.lines[i+1][1:]
		}
		if len(w.lines) != 2+20 || w.lines[1] != "%10" {
			t.Fatalf("ACL LOG: %q", w.lines)
		}
		return m
	}
	before := time.Now().UnixMilli()
	d.Exec(c, args("AUTH", "nobody", "x"))
	d.Exec(c, args("AUTH", "nobody", "x"))
	e := log()
	created, _ := strconv.ParseInt(e["timestamp-created"], 10, 64)
	if e["count"] != "2" || e["entry-id"] != "0" || created < before || created > time.Now().UnixMilli() ||
		e["timestamp-last-updated"] < e["timestamp-created"] || e["reason"] != "auth" {
		t.Fatalf("entry: %v", e)
	}
	d.Exec(c, args("AUTH", "other", "x"))
	if e := log(); e["entry-id"] != "1" || e["count"] != "1" {
		t.Fatalf("second entry: %v", e)
	}
	d.Exec(c, args("ACL", "LOG", "RESET"))
	d.Exec(c, args("AUTH", "nobody", "x"))
	if e := log(); e["entry-id"] != "2" {
		t.Fatalf("after RESET: %v", e)
	}
}

// Redis 7.2's wording for a subcommand's arguments (issue 30), checked
// against redis-server: a known subcommand with the wrong count by its
// arity, one whose handler counts by addReplySubcommandSyntaxError's form,
// an unknown one by processCommand's.
func TestSubcommandWording(t *testing.T) {
	d := aclDispatcher(t, Options{})
	c := d.NewClient(&textWriter{proto: 2}, "c")
	for cmd, want := range map[string]string{
		"CLIENT FOO":                 "ERR unknown subcommand 'FOO'. Try CLIENT HELP.",
		"CLIENT KILL":                "ERR wrong number of arguments for 'client|kill' command",
		"CLIENT ID x":                "ERR wrong number of arguments for 'client|id' command",
		"CLIENT UNBLOCK 1 TIMEOUT x": "ERR unknown subcommand or wrong number of arguments for 'UNBLOCK'. Try CLIENT HELP.",
		"ACL CAT a b":                "ERR unknown subcommand or wrong number of arguments for 'CAT'. Try ACL HELP.",
		"ACL LOG 1 2":                "ERR unknown subcommand or wrong number of arguments for 'LOG'. Try ACL HELP.",
		"ACL NOSUCH":                 "ERR unknown subcommand 'NOSUCH'. Try ACL HELP.",
		"ACL LOG x":                  errNotInteger,
		"ACL GENPASS 0":              "ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096",
		"SLOWLOG GET 1 2":            "ERR unknown subcommand or wrong number of arguments for 'GET'. Try SLOWLOG HELP.",
		"SLOWLOG LEN x":              "ERR wrong number of arguments for 'slowlog|len' command",
		"CONFIG GET":                 "ERR wrong number of arguments for 'config|get' command",
		"LPOP k 1 1":                 "ERR wrong number of arguments for 'lpop' command",
		"RPOP k 1 1":                 "ERR wrong number of arguments for 'rpop' command",
	} {
		must(t, d, c, "-"+want+"\n", strings.Fields(cmd)...)
	}
	must(t, d, c, "*\n", "ACL", "LOG", "-1") // as Redis 7.2: nothing
	if got := exec(d, c, args("ACL", "HELP")); !strings.HasPrefix(got, "*\n+ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\n+CAT [<category>]\n") {
		t.Fatalf("ACL HELP: %q", got)
	}
	for bits, n := range map[string]int{"": 64, "1": 1, "5": 2, "4096": 1024} {
		a := []string{"ACL", "GENPASS"}
		if bits != "" {
			a = append(a, bits)
		}
		if got := exec(d, c, args(a...)); len(got) != n+2 || got[0] != '$' {
			t.Errorf("ACL GENPASS %s: %q", bits, got)
		}
	}
}

// ACL DRYRUN answers, in Redis 7.2's verbose words, what the user's check
// would say, and runs nothing.
func TestACLDryRun(t *testing.T) {
	d := aclDispatcher(t, Options{})
	c := d.NewClient(&textWriter{proto: 2}, "c")
	must(t, d, c, "+OK\n", "ACL", "SETUSER", "u2", "on", ">p", "-@all", "+@list", "~a*", "+client|id")
	for cmd, want := range map[string]string{
		"ACL DRYRUN u2 LPUSH k v":       "$User u2 has no permissions to access the 'k' key\n",
		"ACL DRYRUN u2 LPUSH a1 v":      "+OK\n",
		"ACL DRYRUN u2 DELAY.ADD a 0 x": "$User u2 has no permissions to run the 'delay.add' command\n",
		"ACL DRYRUN u2 CLIENT ID":       "+OK\n",
		"ACL DRYRUN u2 CLIENT KILL x":   "$User u2 has no permissions to run the 'client|kill' command\n",
		"ACL DRYRUN u2 LPUSH a1":        "-ERR wrong number of arguments for 'lpush' command\n",
		"ACL DRYRUN u2 NOSUCH":          "-ERR Command 'NOSUCH' not found\n",
		"ACL DRYRUN u2 CLIENT NOSUCH":   "-ERR Command 'CLIENT' not found\n",
		"ACL DRYRUN nobody PING":        "-ERR User 'nobody' not found\n",
		"ACL DRYRUN default FLUSHALL":   "+OK\n",
	} {
		must(t, d, c, want, strings.Fields(cmd)...)
	}
	must(t, d, c, ":int\n", "LLEN", "a1") // nothing ran
}
