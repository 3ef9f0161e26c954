package integration

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// What client libraries read from the handshake and from INFO, CLIENT and
// the tracking pushes (SPEC "Transactions and the keyspace", identity).

// hello3 switches a raw connection to RESP3 and returns HELLO's map.
func hello3(t *testing.T, rc *rawConn) map[string]resp {
	t.Helper()
	rc.send("HELLO", "3")
	r := rc.read()
	if r.kind != '%' {
		t.Fatalf("HELLO 3: want a map, got %s", r)
	}
	return r.mapOf()
}

func TestHelloAndInfoSayRedis74(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	rc := s.dialRaw(t)
	m := hello3(t, rc)
	for k, want := range map[string]string{"server": "redis", "version": "7.4.0", "mode": "standalone", "role": "master"} {
		if m[k].str != want {
			t.Errorf("HELLO 3 %s = %s, want %q", k, m[k], want)
		}
	}
	if m["proto"].n != 3 || m["id"].n <= 0 || m["modules"].kind != '*' || len(m["modules"].elems) != 0 {
		t.Errorf("HELLO 3: proto %s, id %s, modules %s; want 3, a positive id, []", m["proto"], m["id"], m["modules"])
	}

	// Under RESP3, INFO and CLIENT INFO/LIST are verbatim strings of format txt.
	for _, args := range [][]string{{"INFO", "server"}, {"CLIENT", "INFO"}, {"CLIENT", "LIST"}} {
		rc.send(args...)
		if r := rc.read(); r.kind != '=' || !strings.HasPrefix(r.str, "txt:") {
			t.Errorf("%s under RESP3: got %s, want a verbatim string =...txt:", args, r)
		}
	}
	rc2 := s.dialRaw(t)
	rc2.send("CLIENT", "INFO")
	if r := rc2.read(); r.kind != '$' || !strings.HasPrefix(r.str, "id=") {
		t.Errorf("CLIENT INFO under RESP2: got %s, want a bulk string id=...", r)
	}

	c := s.Client()
	text := do(t, c, "INFO", "server").(string)
	for field, want := range map[string]string{
		"redis_version": "7.4.0", "redis_mode": "standalone", "tcp_port": strconv.Itoa(s.Port()),
		"arch_bits": strconv.Itoa(strconv.IntSize),
	} {
		if v, ok := infoValue(text, field); !ok || v != want {
			t.Errorf("INFO server %s = %q, want %q", field, v, want)
		}
	}
	for _, field := range []string{"delayd_version", "os", "process_id", "uptime_in_seconds", "run_id", "executable"} {
		if v, ok := infoValue(text, field); !ok || v == "" {
			t.Errorf("INFO server: no %s in %q", field, text)
		}
	}
	repl := do(t, c, "INFO", "replication").(string)
	for field, want := range map[string]string{
		"role": "master", "connected_slaves": "0", "master_failover_state": "no-failover",
		"master_repl_offset": "0", "second_repl_offset": "-1",
	} {
		if v, ok := infoValue(repl, field); !ok || v != want {
			t.Errorf("INFO replication %s = %q, want %q", field, v, want)
		}
	}
	if v, _ := infoValue(repl, "master_replid"); !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(v) {
		t.Errorf("INFO replication master_replid = %q, want 40 hex digits", v)
	}
}

// clientFields are Redis 7.4's CLIENT LIST fields, in its order.
var clientFields = strings.Fields(`id addr laddr fd name age idle flags db sub psub ssub multi watch qbuf
	qbuf-free argv-mem multi-mem rbs rbp obl oll omem tot-mem events cmd user redir resp lib-name lib-ver`)

// parseClientLine splits a CLIENT LIST line, checking the field order.
func parseClientLine(t *testing.T, line string) map[string]string {
	t.Helper()
	m := map[string]string{}
	parts := strings.Split(strings.TrimSpace(line), " ")
	if len(parts) != len(clientFields) {
		t.Fatalf("CLIENT line has %d fields, want %d: %q", len(parts), len(clientFields), line)
	}
	for i, p := range parts {
		k, v, _ := strings.Cut(p, "=")
		if k != clientFields[i] {
			t.Fatalf("CLIENT line field %d is %q, want %q: %q", i, k, clientFields[i], line)
		}
		m[k] = v
	}
	return m
}

func clientLines(t *testing.T, text string) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if line == "" {
			continue
		}
		m := parseClientLine(t, line)
		out[m["id"]] = m
	}
	return out
}

func TestClientInfoAndListFields(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()
	chain(t, c,
		cmd("OK", "CLIENT", "SETNAME", "worker-1"),
		cmd("OK", "CLIENT", "SETINFO", "LIB-NAME", "mylib"),
		cmd("OK", "CLIENT", "NO-EVICT", "on"),
		cmd("OK", "CLIENT", "NO-TOUCH", "on"),
		cmd(errIs("ERR syntax error"), "CLIENT", "NO-EVICT", "maybe"),
	)
	id := do(t, c, "CLIENT", "ID").(int64)
	me := parseClientLine(t, do(t, c, "CLIENT", "INFO").(string))
	for k, want := range map[string]string{
		"id": strconv.FormatInt(id, 10), "name": "worker-1", "flags": "eT", "db": "0", "multi": "-1",
		"user": "default", "redir": "-1", "resp": "2", "lib-name": "mylib", "cmd": "client|info",
		"laddr": s.Addr(),
	} {
		if me[k] != want {
			t.Errorf("CLIENT INFO %s=%q, want %q", k, me[k], want)
		}
	}
	if fd, err := strconv.Atoi(me["fd"]); err != nil || fd < 0 {
		t.Errorf("CLIENT INFO fd=%q, want a descriptor", me["fd"])
	}

	// A client blocked in a pop shows flag b; a plain one N.
	blocked := s.Client()
	bid := do(t, blocked, "CLIENT", "ID").(int64)
	ch := popAsync(blocked, 10*time.Second, "nothing-here", "0")
	s.waitBlocked(t, 1)
	plain := s.Client()
	pid := do(t, plain, "CLIENT", "ID").(int64)
	all := clientLines(t, do(t, c, "CLIENT", "LIST").(string))
	if f := all[strconv.FormatInt(bid, 10)]["flags"]; f != "b" {
		t.Errorf("CLIENT LIST: a client in BLPOP has flags=%q, want b", f)
	}
	if f := all[strconv.FormatInt(pid, 10)]["flags"]; f != "N" {
		t.Errorf("CLIENT LIST: an idle client has flags=%q, want N", f)
	}
	if all[strconv.FormatInt(bid, 10)]["cmd"] != "delay.pop" {
		t.Errorf("CLIENT LIST: cmd of the blocked client %q, want delay.pop", all[strconv.FormatInt(bid, 10)]["cmd"])
	}

	// LIST ID picks clients; LIST TYPE normal is everyone, other types none.
	some := clientLines(t, do(t, c, "CLIENT", "LIST", "ID", strconv.FormatInt(pid, 10), "999999").(string))
	if len(some) != 1 || some[strconv.FormatInt(pid, 10)] == nil {
		t.Errorf("CLIENT LIST ID %d 999999: got %v", pid, some)
	}
	if n := len(clientLines(t, do(t, c, "CLIENT", "LIST", "TYPE", "normal").(string))); n < 3 {
		t.Errorf("CLIENT LIST TYPE normal: %d clients, want at least 3", n)
	}
	chain(t, c,
		cmd("", "CLIENT", "LIST", "TYPE", "pubsub"),
		cmd(errIs("ERR Unknown client type 'bogus'"), "CLIENT", "LIST", "TYPE", "bogus"),
		cmd(errIs("ERR Invalid client ID"), "CLIENT", "LIST", "ID", "x"),
		cmd(errIs("ERR syntax error"), "CLIENT", "LIST", "BOGUS"),
	)

	// UNBLOCK: as a timeout (null), then not blocked any more (0).
	expect(t, c, int64(1), "CLIENT", "UNBLOCK", bid)
	if r := waitPop(t, ch, 5*time.Second); r.err == nil || r.err.Error() != "redis: nil" {
		t.Errorf("BLPOP after CLIENT UNBLOCK: got %v %v, want a null reply", r.reply, r.err)
	}
	expect(t, c, int64(0), "CLIENT", "UNBLOCK", bid)
	expect(t, c, errIs("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"), "CLIENT", "UNBLOCK", bid, "maybe")

	// UNBLOCK ERROR: the pop gets -UNBLOCKED; the queue keeps its jobs.
	ch = popAsync(blocked, 10*time.Second, "q", "0")
	s.waitBlocked(t, 1)
	expect(t, c, int64(1), "CLIENT", "UNBLOCK", bid, "ERROR")
	if r := waitPop(t, ch, 5*time.Second); r.err == nil || r.err.Error() != "UNBLOCKED client unblocked via CLIENT UNBLOCK" {
		t.Errorf("DELAY.POP after CLIENT UNBLOCK ERROR: got %v %v", r.reply, r.err)
	}
	expect(t, blocked, "PONG", "PING") // the connection goes on
}

func TestClientKill(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()
	victim := s.dialRaw(t)
	victim.send("CLIENT", "INFO")
	vm := parseClientLine(t, victim.read().str)

	expect(t, c, errIs("ERR No such client"), "CLIENT", "KILL", "10.0.0.1:1")
	expect(t, c, "OK", "CLIENT", "KILL", vm["addr"])
	victim.expectClosed(3 * time.Second)

	// A client blocked in a pop is killed too, and its pop takes no job.
	blocked := s.dialRaw(t)
	blocked.send("CLIENT", "ID")
	bid := blocked.read().n
	blocked.send("BLPOP", "kq", "0")
	s.waitBlocked(t, 1)
	chain(t, c,
		cmd(int64(0), "CLIENT", "KILL", "ID", "999999"),
		cmd(errIs("ERR client-id should be greater than 0"), "CLIENT", "KILL", "ID", "0"),
		cmd(errIs("ERR maxage should be greater than 0"), "CLIENT", "KILL", "MAXAGE", "0"),
		cmd(errIs("ERR No such user 'bob'"), "CLIENT", "KILL", "USER", "bob"),
		cmd(errIs("ERR No such client"), "CLIENT", "KILL", "ID"), // three arguments: the old form
		cmd(errIs("ERR syntax error"), "CLIENT", "KILL", "ID", "1", "SKIPME"),
		cmd(int64(0), "CLIENT", "KILL", "TYPE", "master"),
		cmd(int64(1), "CLIENT", "KILL", "ID", bid),
	)
	blocked.expectClosed(3 * time.Second)
	s.waitBlocked(t, 0)
	expect(t, c, int64(1), "RPUSH", "kq", "job")
	expect(t, c, int64(1), "LLEN", "kq")

	// SKIPME yes (the default) spares the caller; the count says how many.
	other := s.Client()
	expect(t, other, "PONG", "PING")
	n := do(t, c, "CLIENT", "KILL", "USER", "default").(int64)
	if n < 2 {
		t.Errorf("CLIENT KILL USER default: killed %d, want at least 2 (other, and the harness's)", n)
	}
	expect(t, c, "PONG", "PING")
	expect(t, c, int64(1), "CLIENT", "KILL", "ID", do(t, c, "CLIENT", "ID"), "SKIPME", "no")
}

// ---- client tracking ----

// expectPush reads the next reply and checks it is `>2 invalidate [keys]`.
func expectInvalidate(t *testing.T, rc *rawConn, keys ...string) {
	t.Helper()
	r := rc.read()
	if r.kind != '>' || len(r.elems) != 2 || r.elems[0].str != "invalidate" {
		t.Fatalf("want an invalidate push, got %s", r)
	}
	var got []string
	for _, e := range r.elems[1].elems {
		got = append(got, e.str)
	}
	if strings.Join(got, ",") != strings.Join(keys, ",") {
		t.Fatalf("invalidate %v, want %v", got, keys)
	}
}

// expectNoPush checks nothing arrives for a while (then PING answers PONG).
func expectNoPush(t *testing.T, rc *rawConn) {
	t.Helper()
	rc.send("PING")
	r := rc.read()
	if r.kind != '+' || r.str != "PONG" {
		t.Fatalf("want PONG and no push, got %s", r)
	}
	_ = rc.c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if line, err := rc.r.ReadString('\n'); err == nil {
		t.Fatalf("want no push, got %q", line)
	}
}

// strs joins the strings of an array reply with commas.
func strs(r resp) string {
	var out []string
	for _, e := range r.elems {
		out = append(out, e.str)
	}
	return strings.Join(out, ",")
}

func send(t *testing.T, rc *rawConn, want string, args ...string) resp {
	t.Helper()
	rc.send(args...)
	r := rc.read()
	if want != "" && r.String() != want {
		t.Fatalf("%v: got %s, want %s", args, r, want)
	}
	return r
}

func TestTrackingDefaultMode(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	w := s.Client()
	rc := s.dialRaw(t)
	hello3(t, rc)
	send(t, rc, `+"OK"`, "CLIENT", "TRACKING", "ON")
	send(t, rc, "0", "LLEN", "tq")

	// A write by another client: the push arrives while the tracker is idle.
	expect(t, w, int64(1), "RPUSH", "tq", "a")
	expectInvalidate(t, rc, "tq")
	// Once sent, a key is forgotten until read again.
	expect(t, w, int64(2), "RPUSH", "tq", "b")
	expectNoPush(t, rc)

	// A change no command makes: a delayed job fires.
	expect(t, w, anyReply{}, "DELAY.ADD", "fq", "300", "x")
	send(t, rc, "0", "LLEN", "fq")
	expectInvalidate(t, rc, "fq")
	send(t, rc, "1", "LLEN", "fq")

	// A push reaches a client parked in a blocking pop.
	send(t, rc, "2", "LLEN", "tq")
	rc.send("BLPOP", "wake", "0")
	s.waitBlocked(t, 1)
	expect(t, w, int64(3), "RPUSH", "tq", "c")
	expectInvalidate(t, rc, "tq")
	expect(t, w, anyReply{}, "RPUSH", "wake", "up")
	if r := rc.read(); strs(r) != "wake,up" {
		t.Fatalf("BLPOP: got %s", r)
	}

	// Its own write invalidates too, after the write's reply; with NOLOOP not.
	send(t, rc, "3", "LLEN", "tq")
	send(t, rc, "4", "RPUSH", "tq", "d")
	expectInvalidate(t, rc, "tq")
	send(t, rc, `+"OK"`, "CLIENT", "TRACKING", "ON", "NOLOOP")
	send(t, rc, "4", "LLEN", "tq")
	send(t, rc, "5", "RPUSH", "tq", "e")
	expectNoPush(t, rc)
	// As in Redis, the own write used up the key's tracking: read it again.
	send(t, rc, "5", "LLEN", "tq")
	expect(t, w, int64(6), "RPUSH", "tq", "f")
	expectInvalidate(t, rc, "tq")

	info := rc
	info.send("CLIENT", "TRACKINGINFO")
	m := info.read().mapOf()
	if strs(m["flags"]) != "on,noloop" || m["redirect"].n != 0 {
		t.Errorf("CLIENT TRACKINGINFO: %v", m)
	}
	send(t, rc, "0", "CLIENT", "GETREDIR")
	rc.send("CLIENT", "INFO")
	if f := parseClientLine(t, strings.TrimPrefix(rc.read().str, "txt:"))["flags"]; f != "t" {
		t.Errorf("CLIENT INFO flags=%q with tracking on, want t", f)
	}

	// Off: nothing more.
	send(t, rc, `+"OK"`, "CLIENT", "TRACKING", "OFF")
	send(t, rc, "-1", "CLIENT", "GETREDIR")
	send(t, rc, "6", "LLEN", "tq")
	expect(t, w, int64(7), "RPUSH", "tq", "g")
	expectNoPush(t, rc)
}

func TestTrackingOptinOptoutBcastRedirect(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	w := s.Client()

	in := s.dialRaw(t)
	hello3(t, in)
	send(t, in, `-"ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled"`, "CLIENT", "CACHING", "yes")
	send(t, in, `+"OK"`, "CLIENT", "TRACKING", "ON", "OPTIN")
	send(t, in, `-"ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode."`, "CLIENT", "CACHING", "no")
	send(t, in, "0", "LLEN", "a") // not cached: no CACHING yes
	send(t, in, `+"OK"`, "CLIENT", "CACHING", "yes")
	send(t, in, "0", "LLEN", "b") // cached
	send(t, in, "0", "LLEN", "c") // CACHING yes held for one command only
	expect(t, w, int64(1), "RPUSH", "a", "1")
	expect(t, w, int64(1), "RPUSH", "c", "1")
	expect(t, w, int64(1), "RPUSH", "b", "1")
	expectInvalidate(t, in, "b")
	expectNoPush(t, in)

	out := s.dialRaw(t)
	hello3(t, out)
	send(t, out, `+"OK"`, "CLIENT", "TRACKING", "ON", "OPTOUT")
	send(t, out, `-"ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode."`, "CLIENT", "TRACKING", "ON", "OPTIN")
	send(t, out, `+"OK"`, "CLIENT", "CACHING", "no")
	send(t, out, "1", "LLEN", "a") // skipped
	send(t, out, "1", "LLEN", "c") // tracked
	expect(t, w, int64(2), "RPUSH", "a", "2")
	expect(t, w, int64(2), "RPUSH", "c", "2")
	expectInvalidate(t, out, "c")

	// BCAST: every change under a prefix, read or not.
	bc := s.dialRaw(t)
	hello3(t, bc)
	send(t, bc, `-"ERR PREFIX option requires BCAST mode to be enabled"`, "CLIENT", "TRACKING", "ON", "PREFIX", "job:")
	send(t, bc, `-"ERR OPTIN and OPTOUT are not compatible with BCAST"`, "CLIENT", "TRACKING", "ON", "BCAST", "OPTIN")
	send(t, bc, `-"ERR Prefix 'job:1' overlaps with another provided prefix 'job:'. Prefixes for a single client must not overlap."`,
		"CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "job:1", "PREFIX", "job:")
	send(t, bc, `+"OK"`, "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "job:", "PREFIX", "mail:")
	expect(t, w, int64(1), "RPUSH", "job:1", "x")
	expectInvalidate(t, bc, "job:1")
	expect(t, w, int64(1), "RPUSH", "other", "x")
	expect(t, w, anyReply{}, "DELAY.ADD", "mail:7", "100", "x")
	expectInvalidate(t, bc, "mail:7") // the add
	expectInvalidate(t, bc, "mail:7") // the firing, 100 ms later
	bc.send("CLIENT", "TRACKINGINFO")
	if m := bc.read().mapOf(); strs(m["flags"]) != "on,bcast" || strs(m["prefixes"]) != "job:,mail:" {
		t.Errorf("CLIENT TRACKINGINFO in BCAST: %v", m)
	}
	bc.send("CLIENT", "INFO")
	if f := parseClientLine(t, strings.TrimPrefix(bc.read().str, "txt:"))["flags"]; f != "tB" {
		t.Errorf("CLIENT INFO flags=%q in BCAST, want tB", f)
	}

	// REDIRECT: the invalidations of one connection's reads go to another
	// (RESP3) connection; a RESP2 one: TestTrackingRedirectToRESP2.
	target := s.dialRaw(t)
	hello3(t, target)
	tid := send(t, target, "", "CLIENT", "ID").n
	reader := s.Client()
	expect(t, reader, errIs("ERR The client ID you want redirect to does not exist"), "CLIENT", "TRACKING", "ON", "REDIRECT", "999999")
	expect(t, reader, "OK", "CLIENT", "TRACKING", "ON", "REDIRECT", tid)
	expect(t, reader, tid, "CLIENT", "GETREDIR")
	expect(t, reader, int64(1), "LLEN", "job:1")
	expect(t, w, int64(2), "RPUSH", "job:1", "y")
	expectInvalidate(t, target, "job:1")
}

// REDIRECT to a RESP2 connection, as Redis: once it subscribed to
// __redis__:invalidate (the only channel delayd has) it gets the
// invalidations as Pub/Sub messages, and in that state only the Pub/Sub
// commands, PING and QUIT. Not subscribed, it gets nothing, as in Redis.
// Each reply was checked against redis-server.
func TestTrackingRedirectToRESP2(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	w := s.Client()
	sub := s.dialRaw(t)
	sid := strconv.FormatInt(send(t, sub, "", "CLIENT", "ID").n, 10)
	if r := send(t, sub, "", "SUBSCRIBE", "news"); r.kind != '-' || !strings.HasPrefix(r.str, "ERR delayd has no Pub/Sub") {
		t.Fatalf("SUBSCRIBE news: %s", r)
	}
	send(t, sub, `*[$"subscribe" $"__redis__:invalidate" 1]`, "SUBSCRIBE", "__redis__:invalidate")
	send(t, sub, `-"ERR Can't execute 'llen': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"`, "LLEN", "k")
	send(t, sub, `*[$"pong" $""]`, "PING")

	reader := s.dialRaw(t) // RESP2 too
	send(t, reader, `+"OK"`, "CLIENT", "TRACKING", "ON", "REDIRECT", sid)
	send(t, reader, "0", "LLEN", "k")
	if l := parseClientLine(t, send(t, reader, "", "CLIENT", "LIST", "ID", sid).str); l["flags"] != "P" || l["sub"] != "1" {
		t.Errorf("CLIENT LIST of the subscriber: %v", l)
	}
	expect(t, w, int64(1), "RPUSH", "k", "x")
	if r := sub.read(); r.String() != `*[$"message" $"__redis__:invalidate" *[$"k"]]` {
		t.Fatalf("want the invalidation as a message, got %s", r)
	}
	send(t, sub, `*[$"unsubscribe" $"__redis__:invalidate" 0]`, "UNSUBSCRIBE")
	send(t, sub, `*[$"unsubscribe" (null) 0]`, "UNSUBSCRIBE")
	send(t, reader, "1", "LLEN", "k")
	expect(t, w, int64(2), "RPUSH", "k", "y")
	expectNoPush(t, sub)
}

// A reply computed before a change must reach the client before that
// change's invalidation, or the client keeps a stale value forever. The
// tracker behaves as a caching client: it reads a counter (LLEN) only when
// its cached value was invalidated, while a writer pushes to it as fast as
// it can, so each read races with the next change. Whenever the writer
// stops, a cached value must be the true one.
func TestTrackingNeverLeavesAStaleValue(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	w := s.Client()
	rc := s.dialRaw(t)
	hello3(t, rc)
	send(t, rc, `+"OK"`, "CLIENT", "TRACKING", "ON")

	cached, valid := int64(0), false
	handle := func(r resp) {
		switch r.kind {
		case '>':
			valid = false
		case ':':
			cached, valid = r.n, true
		}
	}
	// next reads one frame, or reports false after wait with none.
	next := func(wait time.Duration) (resp, bool) {
		_ = rc.c.SetReadDeadline(time.Now().Add(wait))
		r, err := readResp(rc.r)
		if err != nil {
			if rc.r.Buffered() > 0 {
				t.Fatalf("read: %v", err)
			}
			return r, false
		}
		return r, true
	}
	read := func() {
		rc.send("LLEN", "ctr")
		for {
			r, ok := next(opTimeout)
			if !ok {
				t.Fatal("no LLEN reply")
			}
			handle(r)
			if r.kind == ':' {
				return
			}
		}
	}
	const rounds, burst = 40, 50
	total := int64(0)
	for round := 0; round < rounds; round++ {
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range burst {
				w.RPush(ctxT(t, opTimeout), "ctr", "x")
			}
		}()
		for running := true; running; {
			select {
			case <-done:
				running = false
			default:
			}
			if !valid {
				read()
			} else if r, ok := next(time.Millisecond); ok {
				handle(r)
			}
		}
		total += burst
		// Every invalidation made so far arrives within a short wait.
		for {
			r, ok := next(100 * time.Millisecond)
			if !ok {
				break
			}
			handle(r)
		}
		if valid && cached != total {
			t.Fatalf("round %d: the tracker caches LLEN ctr = %d, but it is %d and no invalidation came", round, cached, total)
		}
		if !valid {
			read()
		}
	}
}

// ---- MONITOR and SLOWLOG ----

func TestMonitorRedactsPasswordsAndPayloads(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	mon := s.dialRaw(t)
	send(t, mon, `+"OK"`, "MONITOR")
	c := s.Client()
	addr := parseClientLine(t, do(t, c, "CLIENT", "INFO").(string))["addr"]
	expect(t, c, anyReply{}, "DELAY.ADD", "q", "0", "secret payload", "ID", "job\"1\n")
	expect(t, c, "OK", "AUTH", "default", "hunter2")
	expect(t, c, anyReply{}, "HELLO", "2", "AUTH", "default", "hunter2", "SETNAME", "me")
	expect(t, c, int64(3), "RPUSH", "q", "p1", "p2")
	expect(t, c, int64(0), "DELAY.NACK", "q", "nosuch", "ERROR", "secret reason")
	expect(t, c, anyReply{}, "CONFIG", "GET", "port") // admin: not shown
	expect(t, c, "PONG", "PING")
	prefix := regexp.MustCompile(`^\d{10}\.\d{6} \[0 ` + regexp.QuoteMeta(addr) + `\] `)
	want := []string{
		`"DELAY.ADD" "q" "0" "(redacted)" "ID" "job\"1\n"`,
		`"AUTH" "(redacted)" "(redacted)"`,
		`"HELLO" "2" "AUTH" "(redacted)" "(redacted)" "SETNAME" "me"`,
		`"RPUSH" "q" "(redacted)" "(redacted)"`,
		`"DELAY.NACK" "q" "nosuch" "ERROR" "(redacted)"`,
		`"PING"`,
	}
	// go-redis's own handshake (HELLO, CLIENT SETINFO) may come first.
	for i := 0; i < len(want); {
		line := mon.readLine()
		if !strings.HasPrefix(line, "+") || !prefix.MatchString(line[1:]) {
			t.Fatalf("MONITOR line %q: want +<unix.micro> [0 %s] ...", line, addr)
		}
		rest := prefix.ReplaceAllString(line[1:], "")
		if strings.Contains(rest, "hunter2") || strings.Contains(rest, "secret") {
			t.Fatalf("MONITOR shows a password or a payload: %q", line)
		}
		if rest == want[i] {
			i++
		} else if i > 0 {
			t.Fatalf("MONITOR line %q, want %q", rest, want[i])
		}
	}
}

func TestMonitorDisconnectsAClientThatDoesNotRead(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	mon := s.dialRaw(t)
	send(t, mon, `+"OK"`, "MONITOR")
	c := s.Client()
	// Each command's MONITOR line is about 64 KiB; the monitor reads none.
	ids := make([]any, 0, 260)
	ids = append(ids, "DELAY.CANCEL", "q")
	for i := 0; i < 250; i++ {
		ids = append(ids, strings.Repeat("x", 250))
	}
	deadline := time.Now().Add(20 * time.Second)
	for n := 0; ; n++ {
		expect(t, c, int64(0), ids...)
		if n%20 == 0 {
			lines := do(t, c, "CLIENT", "LIST").(string)
			if !strings.Contains(lines, " flags=O ") {
				break // the monitor is gone
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("a MONITOR client that reads nothing is still connected")
		}
	}
	if !s.outputHas("did not read its pushes", 5*time.Second) {
		t.Errorf("no log line about the disconnected client: %s", s.Output())
	}
}

func TestSlowlog(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--slowlog-log-slower-than", "0", "--slowlog-max-len", "3")
	c := s.Client()
	expect(t, c, "OK", "CLIENT", "SETNAME", "slowpoke")
	expect(t, c, "OK", "SLOWLOG", "RESET") // logged itself, after the reset
	expect(t, c, anyReply{}, "DELAY.ADD", "q", "0", "secret payload")
	long := strings.Repeat("i", 200)
	args := []any{"DELAY.CANCEL", "q", long}
	for i := 0; i < 40; i++ {
		args = append(args, fmt.Sprint("id", i))
	}
	expect(t, c, int64(0), args...)
	expect(t, c, "OK", "AUTH", "default", "hunter2")
	entries := do(t, c, "SLOWLOG", "GET", "-1").([]any)
	if len(entries) != 3 {
		t.Fatalf("SLOWLOG GET -1: %d entries, want 3", len(entries))
	}
	text := fmt.Sprint(entries)
	if strings.Contains(text, "hunter2") || strings.Contains(text, "secret") {
		t.Errorf("SLOWLOG shows a password or a payload: %s", text)
	}
	// Newest first: AUTH, then the CANCEL, then the ADD.
	auth := entries[0].([]any)
	if len(auth) != 6 || fmt.Sprint(auth[3]) != "[AUTH (redacted) (redacted)]" || auth[5] != "slowpoke" {
		t.Errorf("SLOWLOG entry for AUTH: %s", showValue(auth))
	}
	if id0, id1 := auth[0].(int64), entries[1].([]any)[0].(int64); id0 != id1+1 {
		t.Errorf("SLOWLOG ids %d, %d: want them consecutive, newest first", id0, id1)
	}
	if ts := auth[1].(int64); time.Since(time.Unix(ts, 0)) > time.Minute {
		t.Errorf("SLOWLOG time %d, want now", ts)
	}
	if addr := auth[4].(string); !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Errorf("SLOWLOG client address %q", addr)
	}
	cancel := entries[1].([]any)[3].([]any)
	if len(cancel) != 32 || cancel[31] != "... (12 more arguments)" || cancel[2] != strings.Repeat("i", 128)+"... (72 more bytes)" {
		t.Errorf("SLOWLOG of a 43-argument command: %s", showValue(cancel))
	}
	if add := fmt.Sprint(entries[2].([]any)[3]); add != "[DELAY.ADD q 0 (redacted)]" {
		t.Errorf("SLOWLOG of DELAY.ADD: %s", add)
	}
	chain(t, c,
		cmd(int64(3), "SLOWLOG", "LEN"), // at most slowlog-max-len
		cmd(errIs("ERR count should be greater than or equal to -1"), "SLOWLOG", "GET", "-2"),
		cmd(anyReply{}, "SLOWLOG", "HELP"),
		cmd(errIs("ERR unknown subcommand 'BOGUS'. Try SLOWLOG HELP."), "SLOWLOG", "BOGUS"), // Redis 7.2's processCommand
	)
	expect(t, c, []any{"slowlog-log-slower-than", "0"}, "CONFIG", "GET", "slowlog-log-slower-than")
}

// TestDefaultAckTimeout: --ack-timeout is the ack timeout of a job added
// without ACKTIMEOUT and of a list push (SPEC: "default from config"), so
// DELAY.POP reserves it until DELAY.ACK; ACKTIMEOUT 0 still opts out.
func TestDefaultAckTimeout(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--ack-timeout", "30000")
	c := s.Client()
	expect(t, c, int64(1), "RPUSH", "pushed", "a")
	expect(t, c, anyReply{}, "DELAY.ADD", "added", "0", "b")
	expect(t, c, anyReply{}, "DELAY.ADD", "optout", "0", "c", "ACKTIMEOUT", "0")
	for _, q := range []string{"pushed", "added"} {
		got := do(t, c, "DELAY.POP", q, "0").([]any)
		id := fmt.Sprint(got[1])
		info := fmt.Sprint(do(t, c, "DELAY.GET", q, id))
		if !strings.Contains(info, "reserved") {
			t.Fatalf("%s: a popped job under --ack-timeout 30000 is not reserved: %s", q, info)
		}
		expect(t, c, int64(1), "DELAY.ACK", q, id)
	}
	got := do(t, c, "DELAY.POP", "optout", "0").([]any)
	expect(t, c, int64(0), "DELAY.ACK", "optout", fmt.Sprint(got[1]))
}
