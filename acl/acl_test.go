package acl

import (
	"errors"
	"strings"
	"testing"
)

func known(c string) Kind {
	switch c {
	case "delay.pop", "delay.ack", "delay.nack", "delay.touch", "delay.add", "get", "flushall":
		return Command
	case "config", "client", "memory":
		return Container
	case "config|get", "config|set", "client|id", "client|setname", "client|kill", "client|list",
		"memory|doctor", "memory|stats":
		return Subcommand
	}
	return Unknown
}

func set(t *testing.T, s *Store, name, rules string) *User {
	t.Helper()
	if err := s.SetUser(name, strings.Fields(rules)); err != nil {
		t.Fatal(err)
	}
	return s.Get(name).User()
}

func TestWorkerExample(t *testing.T) {
	s := NewStore(known, "")
	u := set(t, s, "worker", "on >wpass ~jobs:* +delay.pop +delay.ack +delay.nack +delay.touch")
	rw := []Key{{[]byte("jobs:email"), Read | Write}}
	if r, _ := u.Check("delay.pop", []string{"delay", "write"}, rw); r != OK {
		t.Fatalf("pop on jobs:email: %v", r)
	}
	if r, obj := u.Check("delay.add", []string{"delay", "write"}, rw); r != DenyCmd || obj != "delay.add" {
		t.Fatalf("add: %v %q", r, obj)
	}
	if r, obj := u.Check("delay.ack", nil, []Key{{[]byte("other"), Write}}); r != DenyKey || obj != "other" {
		t.Fatalf("ack on other: %v %q", r, obj)
	}
	if !u.CheckPassword("wpass") || u.CheckPassword("wrong") || u.CheckPassword("") {
		t.Fatal("password check")
	}
	if got := u.Describe(); got != "user worker on #"+Hash("wpass")+" ~jobs:* resetchannels -@all +delay.pop +delay.ack +delay.nack +delay.touch" {
		t.Fatalf("describe: %s", got)
	}
}

func TestRulesOrderAndCategories(t *testing.T) {
	s := NewStore(known, "")
	u := set(t, s, "u", "on nopass allkeys +@delay -delay.add")
	if !u.CommandAllowed("delay.pop", []string{"delay"}) || u.CommandAllowed("delay.add", []string{"delay"}) {
		t.Fatal("+@delay -delay.add")
	}
	u = set(t, s, "u", "+delay.add")
	if !u.CommandAllowed("delay.add", []string{"delay"}) || u.Commands() != "-@all +@delay +delay.add" {
		t.Fatalf("re-adding: %s", u.Commands())
	}
	u = set(t, s, "u", "-@delay")
	if u.CommandAllowed("delay.pop", []string{"delay"}) || u.CommandAllowed("delay.add", []string{"delay"}) {
		t.Fatalf("last rule wins: %s", u.Commands())
	}
	u = set(t, s, "u", "allcommands -@dangerous")
	if u.CommandAllowed("flushall", []string{"dangerous", "write"}) || !u.CommandAllowed("get", []string{"read"}) {
		t.Fatal("allcommands -@dangerous")
	}
	u = set(t, s, "u", "reset")
	if u.On || u.NoPass || len(u.Keys) != 0 || u.AllCmds || len(u.Rules) != 0 {
		t.Fatalf("reset: %+v", u)
	}
}

func TestKeyPerms(t *testing.T) {
	s := NewStore(known, "")
	u := set(t, s, "u", "on allcommands %R~r:* %W~w:* ~rw:*")
	for _, c := range []struct {
		key  string
		perm Perm
		ok   bool
	}{
		{"r:1", Read, true}, {"r:1", Write, false}, {"r:1", Read | Write, false},
		{"w:1", Write, true}, {"w:1", Read, false},
		{"rw:1", Read | Write, true}, {"x", Read, false},
	} {
		if got := u.KeyAllowed(Key{[]byte(c.key), c.perm}); got != c.ok {
			t.Errorf("%s perm %d: %v", c.key, c.perm, got)
		}
	}
	u = set(t, s, "u", "%RW~r:*")
	if !u.KeyAllowed(Key{[]byte("r:1"), Read | Write}) || u.Keys[0].String() != "~r:*" {
		t.Fatalf("merged: %v", u.Keys)
	}
}

func TestRuleErrors(t *testing.T) {
	s := NewStore(known, "")
	for rule, want := range map[string]error{
		"foo": ErrSyntax, "+nosuch": ErrUnknownName, "+@nope": ErrUnknownName, "%X~a": ErrSyntax,
		"%~a": ErrSyntax, "#abc": ErrBadHash, "<nopw": ErrNoSuchPass, "+": ErrSyntax,
		"~a b": ErrSyntax, "%R~a\x00": ErrSyntax,
	} {
		err := s.SetUser("e", []string{"on", rule})
		if !errors.Is(err, want) {
			t.Errorf("%q: %v", rule, err)
		}
	}
	if err := s.SetUser("e", []string{"foo"}); err.Error() != "Error in ACL SETUSER modifier 'foo': Syntax error" {
		t.Fatal(err)
	}
	if s.Get("e") != nil {
		t.Fatal("a refused SETUSER created the user")
	}
}

// Redis refuses user names an aclfile line could not hold (a space or a
// NUL); what it accepts, ACL SAVE writes and the file loads back.
func TestUserNames(t *testing.T) {
	s := NewStore(known, "")
	for _, name := range []string{"a b", "a\x00b", "a\tb", "a\nb", " "} {
		if err := s.SetUser(name, []string{"on", "nopass"}); err != ErrBadName || s.Get(name) != nil {
			t.Errorf("%q: %v", name, err)
		}
	}
	if ErrBadName.Error() != "Usernames can't contain spaces or null characters" {
		t.Fatal(ErrBadName)
	}
	for _, name := range []string{"", "-x", `a"b`, "#c", "on", "user", "é"} {
		set(t, s, name, "on nopass ~k:* +get")
	}
	if err := s.SetUser("e", []string{"on", "", "nopass"}); err != nil {
		t.Fatalf("an empty rule, a no-op in Redis: %v", err)
	}
	s2 := NewStore(known, "")
	if _, err := s2.Load(s.Save(), "f"); err != nil || s2.Save() != s.Save() {
		t.Fatalf("round trip: %v\n%s\n%s", err, s.Save(), s2.Save())
	}
	if _, err := s2.Load("user a\vb on\n", "f"); err == nil || err.Error() != "f:1: username 'a\vb' contains invalid characters" {
		t.Fatalf("load: %v", err)
	}
}

func TestPasswords(t *testing.T) {
	s := NewStore(known, "secret")
	if _, ok := s.Authenticate("default", "secret"); !ok {
		t.Fatal("requirepass")
	}
	if _, ok := s.Authenticate("default", "x"); ok {
		t.Fatal("wrong password")
	}
	if _, ok := s.Authenticate("nobody", "secret"); ok {
		t.Fatal("missing user")
	}
	set(t, s, "p", "on >a >b")
	if _, ok := s.Authenticate("p", "b"); !ok {
		t.Fatal("second password")
	}
	set(t, s, "p", "<a #"+Hash("c"))
	if _, ok := s.Authenticate("p", "a"); ok {
		t.Fatal("removed password")
	}
	if _, ok := s.Authenticate("p", "c"); !ok {
		t.Fatal("#hash")
	}
	set(t, s, "p", "off")
	if _, ok := s.Authenticate("p", "c"); ok {
		t.Fatal("off user")
	}
	if !s.NeedsPassword() || NewStore(known, "").NeedsPassword() {
		t.Fatal("NeedsPassword")
	}
}

func TestSaveLoad(t *testing.T) {
	s := NewStore(known, "")
	set(t, s, "worker", "on >w ~jobs:* +delay.pop")
	set(t, s, "gone", "on >g")
	text := s.Save()
	h := s.Get("gone")
	s2 := NewStore(known, "")
	set(t, s2, "gone", "on")
	if _, err := s2.Load(strings.Replace(text, "user gone on #"+Hash("g")+" resetchannels -@all\n", "", 1), "f"); err != nil {
		t.Fatal(err)
	}
	if s2.Get("gone") != nil || s2.Save() != strings.Replace(text, "user gone on #"+Hash("g")+" resetchannels -@all\n", "", 1) {
		t.Fatalf("round trip:\n%s", s2.Save())
	}
	if _, err := s2.Load("user x on\nuser y +nosuch\n", "/etc/users.acl"); err == nil || err.Error() != "/etc/users.acl:2: Unknown command or category name in ACL. " {
		t.Fatalf("load error: %v", err)
	}
	if s2.Get("worker") == nil || s2.Get("x") != nil {
		t.Fatal("a failed load changed the users")
	}
	if gone, err := s.DelUser([]string{"gone", "nobody"}); err != nil || len(gone) != 1 || !h.Gone() {
		t.Fatal("DelUser")
	}
	if _, err := s.DelUser([]string{"default"}); err != ErrDefault {
		t.Fatal(err)
	}
}

func FuzzRules(f *testing.F) {
	for _, r := range []string{"on >p ~jobs:* +delay.pop", "%R~a* %W~b -@all +@delay", "reset nopass allkeys allcommands -get", "#" + Hash("x") + " !" + Hash("x"),
		"+@all -client|kill", "-@all +config -config|set +config|get"} {
		f.Add(r)
	}
	f.Fuzz(func(t *testing.T, rules string) {
		s := NewStore(known, "")
		if err := s.SetUser("f", strings.Fields(rules)); err != nil {
			if !strings.HasPrefix(err.Error(), "Error in ACL SETUSER modifier '") && !strings.HasPrefix(err.Error(), "Unmatched parenthesis in acl selector starting at '") {
				t.Fatalf("wording: %v", err)
			}
			return
		}
		u := s.Get("f").User()
		// What is saved loads back to the same user.
		s2 := NewStore(known, "")
		if _, err := s2.Load(u.Describe(), "f"); err != nil {
			t.Fatalf("%q saved as %q: %v", rules, u.Describe(), err)
		}
		if got := s2.Get("f").User().Describe(); got != u.Describe() {
			t.Fatalf("%q: %q reloaded as %q", rules, u.Describe(), got)
		}
		u.Check("delay.pop", []string{"delay"}, []Key{{[]byte("jobs:1"), Read | Write}})
		u.Check("config|get", []string{"admin"}, nil)
	})
}

// Whatever name and key pattern SETUSER takes, ACL SAVE's line loads back
// to the same user (issue 30: "a b" made the saved file unloadable).
func FuzzUserName(f *testing.F) {
	for _, n := range []string{"a b", "", "-x", "a\x00b", "#c"} {
		f.Add(n, "k:*")
	}
	f.Fuzz(func(t *testing.T, name, pattern string) {
		s := NewStore(known, "")
		if err := s.SetUser(name, []string{"on", "nopass", "~" + pattern, "+get"}); err != nil {
			if err != ErrBadName && !errors.Is(err, ErrSyntax) {
				t.Fatalf("%q ~%q: %v", name, pattern, err)
			}
			return
		}
		s2 := NewStore(known, "")
		if _, err := s2.Load(s.Save(), "f"); err != nil || s2.Save() != s.Save() {
			t.Fatalf("%q: saved as %q, loaded as %q: %v", name, s.Save(), s2.Save(), err)
		}
	})
}

// The subcommand rules of Redis 7 (tests/unit/acl.tcl, "ACLs can include
// single subcommands" and the ones after it).
func TestSubcommandRules(t *testing.T) {
	s := NewStore(known, "")
	admin := []string{"admin", "dangerous", "slow"}
	allowed := func(u *User, cmds ...string) string {
		var out []string
		for _, c := range cmds {
			if u.CommandAllowed(c, admin) {
				out = append(out, c)
			}
		}
		return strings.Join(out, " ")
	}
	all := []string{"client|id", "client|setname", "client|kill", "config|get", "config|set", "memory|doctor", "memory|stats", "get"}
	for _, c := range []struct{ rules, commands, allowed string }{
		// include single subcommands
		{"reset +@all -client +client|id +client|setname", "+@all -client +client|id +client|setname",
			"client|id client|setname config|get config|set memory|doctor memory|stats get"},
		// exclude single subcommands, case 1
		{"reset +@all -client|kill", "+@all -client|kill",
			"client|id client|setname config|get config|set memory|doctor memory|stats get"},
		// exclude single subcommands, case 2
		{"reset -@all +config -config|set", "-@all +config -config|set", "config|get"},
		// a rule for the whole command engulfs its subcommands' rules
		{"reset +memory|doctor", "-@all +memory|doctor", "memory|doctor"},
		{"reset +memory|doctor +memory", "-@all +memory", "memory|doctor memory|stats"},
		{"reset +@all -memory|doctor -memory", "+@all -memory",
			"client|id client|setname client|kill config|get config|set get"},
		{"reset -@all +client|list +client|list +config|get +config", "-@all +client|list +config", "config|get config|set"},
		{"reset -@all +config +config|get -config|set +config", "-@all +config", "config|get config|set"},
		// kept though it changes nothing, so the rules read back as given
		{"reset +@all +client|id", "+@all +client|id",
			"client|id client|setname client|kill config|get config|set memory|doctor memory|stats get"},
		// and a category after a subcommand rule still decides
		{"reset -@all +config|get -@admin", "-@all +config|get -@admin", ""},
		{"reset -@all +CONFIG|GET", "-@all +config|get", "config|get"},
	} {
		u := set(t, s, "u", c.rules)
		if got := u.Commands(); got != c.commands {
			t.Errorf("%s: commands %q, want %q", c.rules, got, c.commands)
		}
		if got := allowed(u, all...); got != c.allowed {
			t.Errorf("%s: allows %q, want %q", c.rules, got, c.allowed)
		}
		if r, _ := u.Check("client|kill", admin, nil); strings.Contains(c.allowed, "client|kill") != (r == OK) {
			t.Errorf("%s: Check of client|kill disagrees with CommandAllowed", c.rules)
		}
	}
	if r, obj := set(t, s, "u", "reset -@all +client|id").Check("client|kill", admin, nil); r != DenyCmd || obj != "client|kill" {
		t.Errorf("denied subcommand: %v %q, want the subcommand named", r, obj)
	}

	for rule, want := range map[string]error{
		"+config|get|appendonly": ErrFirstArgSub,
		"-config|get|appendonly": ErrUnknownName,
		"+config|asdf":           ErrUnknownName,
		"-config|asdf":           ErrUnknownName,
		"+get|key1|key2":         ErrUnknownName,
		"-get|key1|key2":         ErrUnknownName,
		"+get|key1":              ErrFirstArg,
		"-get|key1":              ErrUnknownName,
		"+config|":               ErrSyntax,
		"-config|":               ErrUnknownName,
		"+|get":                  ErrUnknownName,
		"+nosuch|get":            ErrUnknownName,
		"(~a +get)":              ErrSelectors,
		"()":                     ErrSelectors,
	} {
		if err := s.SetUser("e", []string{"on", rule}); !errors.Is(err, want) {
			t.Errorf("%q: %v, want %v", rule, err, want)
		}
	}
	if err := s.SetUser("e", []string{"on", "+config|get|appendonly"}); err == nil ||
		err.Error() != "Error in ACL SETUSER modifier '+config|get|appendonly': Allowing first-arg of a subcommand is not supported" {
		t.Errorf("first-arg of a subcommand: %v", err)
	}
	if s.Get("e") != nil {
		t.Fatal("a refused SETUSER created the user")
	}
}

// Selectors are refused whole, with the selector named as Redis joins it,
// in SETUSER and in aclfiles.
func TestSelectorsRefused(t *testing.T) {
	s := NewStore(known, "")
	err := s.SetUser("e", []string{"on", "(~jobs:*", "+get)", ">p"})
	if err == nil || err.Error() != "Error in ACL SETUSER modifier '(~jobs:* +get)': "+ErrSelectors.Error() {
		t.Errorf("split selector: %v", err)
	}
	err = s.SetUser("e", []string{"on", "(~jobs:*", "+get"})
	if err == nil || err.Error() != "Unmatched parenthesis in acl selector starting at '(~jobs:*'." {
		t.Errorf("unclosed selector: %v", err)
	}
	if err := s.SetUser("e", []string{"on", "clearselectors"}); err != nil {
		t.Errorf("clearselectors: %v", err)
	}
	if _, err := Parse("user x on (~a +get)\n", "f", known); err == nil || err.Error() != "f:1: "+ErrSelectors.Error()+". " {
		t.Errorf("aclfile selector: %v", err)
	}
	if _, err := Parse("user x on (~a +get\n", "f", known); err == nil || err.Error() != "f:1: Unmatched parenthesis in selector definition." {
		t.Errorf("aclfile unclosed selector: %v", err)
	}
}

// Subcommand rules are saved and loaded back as they were.
func TestSubcommandRulesSaveLoad(t *testing.T) {
	s := NewStore(known, "")
	set(t, s, "ops", "on >o ~* +@all -client|kill -config|set")
	set(t, s, "viewer", "on >v -@all +config|get +client|id +client|setname")
	text := s.Save()
	if !strings.Contains(text, "user ops on #"+Hash("o")+" ~* resetchannels +@all -client|kill -config|set\n") ||
		!strings.Contains(text, " resetchannels -@all +config|get +client|id +client|setname\n") {
		t.Fatalf("saved:\n%s", text)
	}
	s2 := NewStore(known, "")
	if _, err := s2.Load(text, "f"); err != nil {
		t.Fatal(err)
	}
	if s2.Save() != text {
		t.Fatalf("reloaded:\n%s\nwant\n%s", s2.Save(), text)
	}
	v := s2.Get("viewer").User()
	if !v.CommandAllowed("config|get", nil) || v.CommandAllowed("config|set", nil) {
		t.Fatal("reloaded rules do not check as saved")
	}
}

// Redis's commands and categories that delayd lacks may be named, as a
// Redis aclfile names them; they match no command delayd runs.
func TestRedisNames(t *testing.T) {
	s := NewStore(known, "")
	u := set(t, s, "r", "on -@all +@set +@transaction -@hash +hgetall -client|pause +config|resetstat +get")
	if u.CommandAllowed("delay.pop", []string{"delay", "write"}) || !u.CommandAllowed("get", []string{"read"}) {
		t.Fatal(u.Commands())
	}
	for rule, want := range map[string]error{"+hgetall|x": ErrFirstArg, "+client|nosuch": ErrUnknownName,
		"+nosuch": ErrUnknownName, "+@nosuch": ErrUnknownName} {
		if err := s.SetUser("r", []string{rule}); !errors.Is(err, want) {
			t.Errorf("%s: %v", rule, err)
		}
	}
}
