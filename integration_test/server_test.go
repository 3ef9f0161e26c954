package integration

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SPEC "Server commands" and AUTH.

func TestPingEchoSelect(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()
	chain(t, c,
		cmd("PONG", "PING"),
		cmd("hello world", "PING", "hello world"),
		cmd("", "PING", ""),
		cmd("x\r\ny", "ECHO", "x\r\ny"),
		cmd(errIs("ERR wrong number of arguments for 'echo' command"), "ECHO"),
		cmd(errIs("ERR wrong number of arguments for 'ping' command"), "PING", "a", "b"),
		cmd("OK", "SELECT", "0"),
		cmd(errPrefix("ERR"), "SELECT", "1"),
		cmd(errPrefix("ERR"), "SELECT", "abc"),
		cmd("PONG", "ping"),
	)
}

func TestUnknownCommand(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()
	// Redis: "unknown command '%.128s', with args beginning with: " then
	// each argument as '%s' followed by a space; the name as the client sent it.
	chain(t, c,
		cmd(errIs("ERR unknown command 'FOO', with args beginning with: 'a' 'b' "), "FOO", "a", "b"),
		cmd(errIs("ERR unknown command 'foo', with args beginning with: 'a' 'b' "), "foo", "a", "b"),
		cmd(errIs("ERR unknown command 'foo', with args beginning with: "), "foo"),
		cmd(errIs("ERR unknown command 'Delay.Nope', with args beginning with: 'q' "), "Delay.Nope", "q"),
		cmd("PONG", "PING"),
	)
}

func TestHello(t *testing.T) {
	t.Parallel()
	s := startServer(t)

	// HELLO 3: a map with server, version, proto
	c3 := s.Client3()
	v := do(t, c3, "HELLO", "3")
	m, ok := v.(map[any]any)
	if !ok {
		t.Fatalf("HELLO 3: want a map, got %T %s", v, showValue(v))
	}
	for _, f := range []string{"server", "version"} {
		if sv, _ := m[f].(string); sv == "" {
			t.Errorf("HELLO 3: %s = %v, want a non-empty string", f, m[f])
		}
	}
	if m["proto"] != int64(3) {
		t.Errorf("HELLO 3: proto = %v (%T), want 3", m["proto"], m["proto"])
	}
	// the go-redis RESP3 client works on
	id := add(t, c3, "q", 0, "resp3")
	expect(t, c3, []any{"q", id, "resp3"}, "DELAY.POP", "q", "0.5")
	expect(t, c3, nil, "DELAY.POP", "q", "0.05")

	// HELLO 2: the same as a flat array
	c2 := s.Client()
	f := fields(t, "HELLO 2", do(t, c2, "HELLO", "2"))
	if f["proto"] != int64(2) {
		t.Errorf("HELLO 2: proto = %v, want 2", f["proto"])
	}
	if sv, _ := f["server"].(string); sv == "" {
		t.Errorf("HELLO 2: server = %v, want a name", f["server"])
	}
	expect(t, c2, errPrefix("NOPROTO"), "HELLO", "4")
	expect(t, c2, errPrefix("NOPROTO"), "HELLO", "1")

	// on the wire: HELLO 3 SETNAME answers a RESP3 map, and the connection
	// speaks RESP3 afterwards (a null is "_")
	rc := s.dialRaw(t)
	rc.send("HELLO", "3", "SETNAME", "wire")
	if r := rc.read(); r.kind != '%' {
		t.Fatalf("HELLO 3 SETNAME wire: want a RESP3 map ('%%'), got %s", r)
	} else if p := r.mapOf()["proto"]; p.kind != ':' || p.n != 3 {
		t.Errorf("HELLO 3: proto = %s, want :3", p)
	}
	rc.send("CLIENT", "GETNAME")
	if r := rc.read(); r.str != "wire" {
		t.Errorf("CLIENT GETNAME after HELLO 3 SETNAME wire: got %s", r)
	}
	rc.send("DELAY.GET", "q", "none")
	if r := rc.read(); r.kind != '_' {
		t.Errorf("DELAY.GET of no job in RESP3: got %s, want the RESP3 null '_'", r)
	}
	rc.send("HELLO", "2")
	if r := rc.read(); r.kind != '*' {
		t.Errorf("HELLO 2: want a RESP2 array, got %s", r)
	}
	rc.send("DELAY.GET", "q", "none")
	if r := rc.read(); r.kind != '$' && r.kind != '*' || !r.null {
		t.Errorf("DELAY.GET of no job after HELLO 2: got %s, want a RESP2 null", r)
	}
}

func TestClientCommands(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()
	other := s.Client()

	chain(t, c,
		cmd(nil, "CLIENT", "GETNAME"),
		cmd("OK", "CLIENT", "SETNAME", "worker-1"),
		cmd("worker-1", "CLIENT", "GETNAME"),
		cmd("OK", "CLIENT", "SETINFO", "LIB-NAME", "mylib"),
		cmd("OK", "CLIENT", "SETINFO", "LIB-VER", "1.2.3"),
		cmd(errPrefix("ERR"), "CLIENT", "SETNAME", "has space"),
	)
	expect(t, other, nil, "CLIENT", "GETNAME") // names are per connection

	id, ok := do(t, c, "CLIENT", "ID").(int64)
	if !ok || id <= 0 {
		t.Fatalf("CLIENT ID: want a positive integer, got %v", id)
	}
	otherID, _ := do(t, other, "CLIENT", "ID").(int64)
	if otherID == id {
		t.Errorf("two connections have the same CLIENT ID %d", id)
	}
	info, ok := do(t, c, "CLIENT", "INFO").(string)
	if !ok {
		t.Fatalf("CLIENT INFO: want a bulk string")
	}
	for _, want := range []string{"id=" + strconv.FormatInt(id, 10), "name=worker-1"} {
		if !strings.Contains(info, want) {
			t.Errorf("CLIENT INFO = %q, want it to contain %q", info, want)
		}
	}
}

func TestCommandCommand(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()

	count, ok := do(t, c, "COMMAND", "COUNT").(int64)
	if !ok || count <= 0 {
		t.Fatalf("COMMAND COUNT: want a positive integer, got %v", count)
	}
	all, ok := do(t, c, "COMMAND").([]any)
	if !ok || int64(len(all)) != count {
		t.Errorf("COMMAND: %d entries, COMMAND COUNT says %d", len(all), count)
	}

	info, ok := do(t, c, "COMMAND", "INFO", "delay.add").([]any)
	if !ok || len(info) != 1 {
		t.Fatalf("COMMAND INFO delay.add: want one entry, got %s", showValue(info))
	}
	entry, ok := info[0].([]any)
	if !ok || len(entry) < 2 {
		t.Fatalf("COMMAND INFO delay.add: entry %s", showValue(info[0]))
	}
	if entry[0] != "delay.add" {
		t.Errorf("COMMAND INFO delay.add: name %s, want \"delay.add\"", showValue(entry[0]))
	}
	if entry[1] != int64(-4) {
		t.Errorf("COMMAND INFO delay.add: arity %v, want -4 (DELAY.ADD key delay-ms payload [options])", entry[1])
	}
	// case-insensitive, and unknown names give a null entry
	expect(t, c, []any{check(func(v any) string {
		if e, ok := v.([]any); !ok || len(e) == 0 || e[0] != "delay.pop" {
			return "want the entry of delay.pop"
		}
		return ""
	}), nil}, "COMMAND", "INFO", "DELAY.POP", "no-such-command")

	expect(t, c, anyReply{}, "COMMAND", "DOCS")
	expect(t, c, anyReply{}, "COMMAND", "DOCS", "delay.add")
	// go-redis's own COMMAND parser accepts the reply (it backs cluster and hints)
	if _, err := c.Command(ctxT(t, opTimeout)).Result(); err != nil {
		t.Errorf("go-redis Command(): %v", err)
	}
}

func TestInfo(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()

	text, ok := do(t, c, "INFO").(string)
	if !ok {
		t.Fatalf("INFO: want a bulk string")
	}
	lower := strings.ToLower(text)
	for _, sec := range []string{"server", "clients", "memory", "persistence", "stats", "queues"} {
		if !strings.Contains(lower, "# "+sec) {
			t.Errorf("INFO: no section header %q", "# "+sec)
		}
		part, _ := do(t, c, "INFO", sec).(string)
		if !strings.Contains(strings.ToLower(part), "# "+sec) {
			t.Errorf("INFO %s: no header %q in %q", sec, "# "+sec, part)
		}
	}
	server, _ := do(t, c, "INFO", "server").(string)
	if !strings.Contains(server, "redis_version") && !strings.Contains(server, "delayd_version") {
		t.Errorf("INFO server has neither redis_version nor delayd_version: %q", server)
	}
	if strings.Contains(server, "# Clients") {
		t.Errorf("INFO server also printed other sections")
	}
	if v, ok := infoValue(do(t, c, "INFO", "clients").(string), "connected_clients"); !ok {
		t.Errorf("INFO clients has no connected_clients")
	} else if n, err := strconv.Atoi(v); err != nil || n < 1 {
		t.Errorf("INFO clients connected_clients = %q", v)
	}

	// blocked_clients counts clients, as in Redis: one client blocked on
	// three keys is one blocked client
	blockedNow := func() string {
		v, _ := infoValue(do(t, c, "INFO", "clients").(string), "blocked_clients")
		return v
	}
	if v := blockedNow(); v != "0" {
		t.Fatalf("INFO clients blocked_clients = %q with no client blocked, want 0", v)
	}
	w := popAsync(s.Client(), 10*time.Second, "k1", "k2", "k3", "0")
	var v string
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if v = blockedNow(); v != "0" {
			break
		}
	}
	if v != "1" {
		t.Errorf("INFO clients blocked_clients = %q with one client blocked in DELAY.POP k1 k2 k3 0, want 1", v)
	}
	id := add(t, c, "k3", 0, "x")
	popTriple(t, waitPop(t, w, 5*time.Second), "k3", id, "x")
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if v = blockedNow(); v == "0" {
			break
		}
	}
	if v != "0" {
		t.Errorf("INFO clients blocked_clients = %q after the blocked client was served, want 0", v)
	}
}

func TestDBSizeTimeConfig(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()

	expect(t, c, 0, "DBSIZE")
	add(t, c, "q1", 60000, "delayed")
	add(t, c, "q2", 0, "ready")
	add(t, c, "q2", 0, "ready2")
	expect(t, c, 2, "DBSIZE")
	expect(t, c, anyReply{}, "DELAY.POP", "q2", "0.1")
	expect(t, c, anyReply{}, "DELAY.POP", "q2", "0.1")
	expect(t, c, 1, "DBSIZE") // an empty queue leaves nothing behind

	tm, ok := do(t, c, "TIME").([]any)
	if !ok || len(tm) != 2 {
		t.Fatalf("TIME: want [seconds, microseconds], got %s", showValue(tm))
	}
	sec, err1 := strconv.ParseInt(fmt.Sprint(tm[0]), 10, 64)
	usec, err2 := strconv.ParseInt(fmt.Sprint(tm[1]), 10, 64)
	if err1 != nil || err2 != nil || usec < 0 || usec > 999999 {
		t.Errorf("TIME: %s is not two integers", showValue(tm))
	}
	if d := time.Now().Unix() - sec; d < -2 || d > 2 {
		t.Errorf("TIME: %d s, local clock %d s", sec, time.Now().Unix())
	}

	chain(t, c,
		cmd([]any{"port", strconv.Itoa(s.Port())}, "CONFIG", "GET", "port"),
		cmd(errPrefix("ERR"), "CONFIG", "SET", "port", "1"),
		cmd(errPrefix("ERR"), "CONFIG", "SET", "max-jobs", "1"),
	)
	all := fields(t, "CONFIG GET *", do(t, c, "CONFIG", "GET", "*"))
	for _, k := range []string{"port", "bind", "max-payload-bytes", "max-jobs"} {
		if _, ok := all[k]; !ok {
			t.Errorf("CONFIG GET *: no %q (got %v)", k, sortedKeys(all))
		}
	}
	if fmt.Sprint(all["port"]) != strconv.Itoa(s.Port()) {
		t.Errorf("CONFIG GET *: port = %v", all["port"])
	}
	if v, ok := all["requirepass"]; ok && v != "" {
		t.Errorf("CONFIG GET * shows requirepass %q on a server without one", v)
	}
}

func TestQuit(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	rc := s.dialRaw(t)
	rc.send("QUIT")
	if line := rc.readLine(); line != "+OK" {
		t.Errorf("QUIT: got %q, want +OK", line)
	}
	rc.expectClosed(2 * time.Second)
	expect(t, s.Client(), "PONG", "PING")
}

func TestAuth(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--requirepass", "secret")
	const (
		noauth    = "NOAUTH Authentication required."
		wrongpass = "WRONGPASS invalid username-password pair or user is disabled."
	)

	c := s.Client()
	chain(t, c,
		cmd(errIs(noauth), "PING"),
		cmd(errIs(noauth), "DELAY.ADD", "q", 0, "x"),
		cmd(errIs(noauth), "DELAY.POP", "q", "0"), // answered, not blocked
		cmd(errIs(noauth), "DELAY.GET", "q", "x"),
		cmd(errIs(noauth), "INFO"),
		cmd(errIs(noauth), "DBSIZE"),
		cmd(errIs(noauth), "CONFIG", "GET", "port"),
		cmd(errIs(noauth), "CLIENT", "ID"),
		cmd(errIs(wrongpass), "AUTH", "wrong"),
		cmd(errIs(wrongpass), "AUTH", "default", "wrong"),
		cmd(errIs(wrongpass), "AUTH", "nobody", "secret"),
		cmd(errIs(noauth), "PING"),
		cmd("OK", "AUTH", "secret"),
		cmd("PONG", "PING"),
		cmd(check(func(v any) string {
			if id, ok := v.(string); !ok || id == "" {
				return "want an id"
			}
			return ""
		}), "DELAY.ADD", "q", 0, "x"),
	)
	expect(t, c, 1, "DBSIZE")

	chain(t, s.Client(),
		cmd("OK", "AUTH", "default", "secret"),
		cmd("PONG", "PING"),
	)

	// HELLO 3 AUTH default secret authenticates and switches to RESP3
	rc := s.dialRaw(t)
	rc.send("HELLO", "3", "AUTH", "default", "wrong")
	if r := rc.read(); r.kind != '-' || r.str != wrongpass {
		t.Errorf("HELLO 3 AUTH default wrong: got %s, want -%s", r, wrongpass)
	}
	rc.send("HELLO", "3", "AUTH", "default", "secret")
	if r := rc.read(); r.kind != '%' {
		t.Errorf("HELLO 3 AUTH default secret: want a map, got %s", r)
	}
	rc.send("PING")
	if r := rc.read(); r.kind != '+' || r.str != "PONG" {
		t.Errorf("PING after HELLO AUTH: got %s", r)
	}

	// QUIT works before auth
	q := s.dialRaw(t)
	q.send("QUIT")
	if line := q.readLine(); line != "+OK" {
		t.Errorf("QUIT before auth: got %q", line)
	}

	// go-redis with Password, RESP2 and RESP3
	for _, proto := range []int{2, 3} {
		pc := s.Client(func(o *redis.Options) { o.Password = "secret"; o.Protocol = proto })
		expect(t, pc, "PONG", "PING")
		expect(t, pc, 1, "DBSIZE")
	}
	bad := s.Client(func(o *redis.Options) { o.Password = "nope" })
	if err := bad.Ping(ctxT(t, opTimeout)).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Errorf("go-redis with a wrong password: PING got %v, want WRONGPASS", err)
	}
}
