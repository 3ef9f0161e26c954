package integration

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SPEC "Commands of the delay queue": DELAY.ADD, DELAY.ADDAT, DELAY.CANCEL,
// DELAY.GET, DELAY.STATS, DELAY.PEEK.

// bulkID checks that v is a non-empty bulk string (a job id) and returns it.
func bulkID(t testing.TB, what string, v any) string {
	t.Helper()
	id, ok := v.(string)
	if !ok || id == "" {
		t.Fatalf("%s: want a job id (bulk string), got %T %s", what, v, showValue(v))
	}
	return id
}

// add runs DELAY.ADD key delay payload opts... and returns the id.
func add(t testing.TB, c *redis.Client, key string, delayMs int64, payload string, opts ...any) string {
	t.Helper()
	args := append([]any{"DELAY.ADD", key, delayMs, payload}, opts...)
	return bulkID(t, showCmd(args), do(t, c, args...))
}

// job returns DELAY.GET key id as a field map (fails on a null reply).
func job(t testing.TB, c *redis.Client, key, id string) map[string]any {
	t.Helper()
	return fields(t, "DELAY.GET "+key+" "+id, do(t, c, "DELAY.GET", key, id))
}

// expectJob checks the fields of DELAY.GET key id given in want; when
// dueMax > 0, due must lie in [dueMin, dueMax+1]. Callers pass the client's
// clock in ms (floored) just before sending and just after the reply: the
// due of a relative add is the add's own time plus the delay, so it cannot
// be before the client sent it; the +1 allows a server that rounds the add
// time up to the next millisecond.
func expectJob(t testing.TB, c *redis.Client, key, id string, want map[string]string, dueMin, dueMax int64) {
	t.Helper()
	m := job(t, c, key, id)
	for f, w := range want {
		v, ok := m[f]
		if !ok {
			t.Errorf("DELAY.GET %s %s: no field %q (fields %v)", key, id, f, sortedKeys(m))
			continue
		}
		if g := fmt.Sprint(v); g != w {
			t.Errorf("DELAY.GET %s %s: %s = %s, want %s", key, id, f, showValue(g), showValue(w))
		}
	}
	if dueMax > 0 {
		due := asInt(t, "due", m["due"])
		if due < dueMin || due > dueMax+1 {
			t.Errorf("DELAY.GET %s %s: due = %d, want within [%d, %d] (client clock before the add, after its reply +1)", key, id, due, dueMin, dueMax+1)
		}
	}
}

func TestAddRepliesIDsThatIncrease(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()

	// Server-made ids strictly increase in byte order, across queues.
	var prev string
	for i := 0; i < 60; i++ {
		key := []string{"q1", "q2", "q3"}[i%3]
		delay := int64([]int{0, 10000, 50}[i%3])
		id := add(t, c, key, delay, "p"+strconv.Itoa(i))
		if i > 0 && bytes.Compare([]byte(prev), []byte(id)) >= 0 {
			t.Fatalf("id %d (%q in %s) is not greater in byte order than the one before (%q)", i, id, key, prev)
		}
		prev = id
	}
}

func TestAddDelayZeroIsReadyAtOnce(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()

	t0 := time.Now().UnixMilli()
	id := add(t, c, "q", 0, "now")
	t1 := time.Now().UnixMilli()
	// The due of a delay-0 job is the time it was added.
	expectJob(t, c, "q", id, map[string]string{"id": id, "queue": "q", "state": "ready", "payload": "now", "deliveries": "0"}, t0, t1)
	expectStats(t, c, "q", 0, 1, 0)
	chain(t, c,
		cmd([]any{"q", id, "now"}, "DELAY.POP", "q", "0.1"),
		cmd(nil, "DELAY.POP", "q", "0.1"),
		cmd(nil, "DELAY.GET", "q", id), // popped without ack timeout: gone
	)
	expectStats(t, c, "q", 0, 0, 0)
}

func TestAddWithDelayIsDelayedUntilDue(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()

	t0 := time.Now().UnixMilli()
	id := add(t, c, "q", 60000, "later")
	t1 := time.Now().UnixMilli()
	expectJob(t, c, "q", id, map[string]string{"id": id, "queue": "q", "state": "delayed", "payload": "later", "deliveries": "0"}, t0+60000, t1+60000)
	expectStats(t, c, "q", 1, 0, 0)
	expect(t, c, nil, "DELAY.POP", "q", "0.1")
	expect(t, c, []any{}, "DELAY.PEEK", "q")
}

func TestAddCustomID(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()

	id256 := strings.Repeat("i", 256)
	chain(t, c,
		cmd("job-1", "DELAY.ADD", "q", 60000, "p1", "ID", "job-1"),
		cmd(id256, "DELAY.ADD", "q", 60000, "p", "ID", id256),
		cmd(anyErr, "DELAY.ADD", "q", 60000, "p", "ID", strings.Repeat("i", 257)),
		cmd(anyErr, "DELAY.ADD", "q", 60000, "p", "ID", ""),
		cmd("bin\x00\r\nid", "DELAY.ADD", "q", 60000, "p", "ID", "bin\x00\r\nid"),
		// the same id in another queue is another job
		cmd("job-1", "DELAY.ADD", "other", 60000, "p-other", "ID", "job-1"),
	)
	expectStats(t, c, "q", 3, 0, 0)
	expectStats(t, c, "other", 1, 0, 0)
	expectJob(t, c, "q", "job-1", map[string]string{"payload": "p1", "queue": "q"}, 0, 0)
	expectJob(t, c, "other", "job-1", map[string]string{"payload": "p-other", "queue": "other"}, 0, 0)
}

func TestAddExistingIDWithoutReplaceChangesNothing(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()

	t0 := time.Now().UnixMilli()
	expect(t, c, "j", "DELAY.ADD", "q", 60000, "first", "ID", "j")
	t1 := time.Now().UnixMilli()
	// a producer retry: null, and the job keeps its payload, due and state
	expect(t, c, nil, "DELAY.ADD", "q", 0, "second", "ID", "j")
	expect(t, c, nil, "DELAY.ADDAT", "q", 1, "third", "ID", "j")
	expectJob(t, c, "q", "j", map[string]string{"state": "delayed", "payload": "first"}, t0+60000, t1+60000)
	expectStats(t, c, "q", 1, 0, 0)

	// also for a ready job
	expect(t, c, "r", "DELAY.ADD", "q", 0, "ready-one", "ID", "r")
	expect(t, c, nil, "DELAY.ADD", "q", 60000, "changed", "ID", "r")
	expectJob(t, c, "q", "r", map[string]string{"state": "ready", "payload": "ready-one"}, 0, 0)
	expectStats(t, c, "q", 1, 1, 0)
}

func TestAddReplace(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()

	expect(t, c, "j", "DELAY.ADD", "q", 60000, "v1", "ID", "j")

	// delayed -> ready: REPLACE with delay 0
	expect(t, c, "j", "DELAY.ADD", "q", 0, "v2", "ID", "j", "REPLACE")
	expectJob(t, c, "q", "j", map[string]string{"state": "ready", "payload": "v2"}, 0, 0)
	expectStats(t, c, "q", 0, 1, 0)
	expect(t, c, []any{[]any{"j", "v2"}}, "DELAY.PEEK", "q")

	// ready -> delayed: REPLACE with a new time takes it off the ready list
	t0 := time.Now().UnixMilli()
	expect(t, c, "j", "DELAY.ADD", "q", 30000, "v3", "ID", "j", "REPLACE")
	t1 := time.Now().UnixMilli()
	expectJob(t, c, "q", "j", map[string]string{"state": "delayed", "payload": "v3"}, t0+30000, t1+30000)
	expectStats(t, c, "q", 1, 0, 0)
	expect(t, c, nil, "DELAY.POP", "q", "0.1")

	// delayed -> delayed sooner: the old time no longer counts
	expect(t, c, "j", "DELAY.ADD", "q", 100, "v4", "ID", "j", "REPLACE")
	start := time.Now()
	r := waitPop(t, popAsync(c, 3*time.Second, "q", "2"), 4*time.Second)
	popTriple(t, r, "q", "j", "v4")
	if d := r.at.Sub(start); d > 1500*time.Millisecond {
		t.Errorf("replaced job (delay 100 ms) popped after %v", d)
	}
	expect(t, c, nil, "DELAY.GET", "q", "j")

	// REPLACE of an id that does not exist simply adds it
	expect(t, c, "new", "DELAY.ADD", "q", 0, "fresh", "ID", "new", "REPLACE")
	expect(t, c, []any{"q", "new", "fresh"}, "DELAY.POP", "q", "0.1")

	// ADDAT REPLACE with a past time: ready, due is the time given
	expect(t, c, "k", "DELAY.ADD", "q", 60000, "w1", "ID", "k")
	expect(t, c, "k", "DELAY.ADDAT", "q", 1000, "w2", "ID", "k", "REPLACE")
	expectJob(t, c, "q", "k", map[string]string{"state": "ready", "payload": "w2", "due": "1000"}, 0, 0)
	expectStats(t, c, "q", 0, 1, 0)
}

func TestAddAt(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()

	past := time.Now().Add(-time.Hour).UnixMilli()
	future := time.Now().Add(time.Hour).UnixMilli()
	idPast := bulkID(t, "DELAY.ADDAT past", do(t, c, "DELAY.ADDAT", "q", past, "old"))
	idFuture := bulkID(t, "DELAY.ADDAT future", do(t, c, "DELAY.ADDAT", "q", future, "new"))
	expectJob(t, c, "q", idPast, map[string]string{"state": "ready", "due": strconv.FormatInt(past, 10), "payload": "old", "queue": "q"}, 0, 0)
	expectJob(t, c, "q", idFuture, map[string]string{"state": "delayed", "due": strconv.FormatInt(future, 10), "payload": "new"}, 0, 0)
	expectStats(t, c, "q", 1, 1, 0)
	chain(t, c,
		cmd([]any{"q", idPast, "old"}, "DELAY.POP", "q", "0.1"),
		cmd(nil, "DELAY.POP", "q", "0.1"),
	)

	// an ADDAT a little ahead is handed out at its time, not before
	at := time.Now().Add(300 * time.Millisecond)
	id := bulkID(t, "DELAY.ADDAT soon", do(t, c, "DELAY.ADDAT", "soon", at.UnixMilli(), "x"))
	r := waitPop(t, popAsync(c, 3*time.Second, "soon", "2"), 4*time.Second)
	popTriple(t, r, "soon", id, "x")
	if r.at.UnixMilli() < at.UnixMilli() {
		t.Errorf("DELAY.ADDAT job due %d handed out at %d, before its time", at.UnixMilli(), r.at.UnixMilli())
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()

	d1 := add(t, c, "q", 60000, "delayed-1")
	d2 := add(t, c, "q", 150, "delayed-2")
	r1 := add(t, c, "q", 0, "ready-1")
	r2 := add(t, c, "q", 0, "ready-2")
	keep := add(t, c, "q", 0, "ready-3")
	expectStats(t, c, "q", 2, 3, 0)

	chain(t, c,
		cmd(4, "DELAY.CANCEL", "q", d1, "nope", r1, d2, "also-nope", r2),
		cmd(0, "DELAY.CANCEL", "q", d1),
		cmd(0, "DELAY.CANCEL", "q", "unknown"),
		cmd(0, "DELAY.CANCEL", "other-queue", keep), // ids belong to their queue
		cmd(nil, "DELAY.GET", "q", d1),
		cmd(nil, "DELAY.GET", "q", r1),
	)
	expectStats(t, c, "q", 0, 1, 0)

	// d2 would have been due after 150 ms; the cancelled jobs never come out
	time.Sleep(300 * time.Millisecond)
	chain(t, c,
		cmd([]any{"q", keep, "ready-3"}, "DELAY.POP", "q", "0.1"),
		cmd(nil, "DELAY.POP", "q", "0.2"),
	)
	expectStats(t, c, "q", 0, 0, 0)
	expect(t, c, 0, "DBSIZE")
}

func TestGet(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()

	due := time.Now().Add(time.Hour).UnixMilli()
	id := bulkID(t, "DELAY.ADDAT", do(t, c, "DELAY.ADDAT", "q", due, "body"))
	reply := do(t, c, "DELAY.GET", "q", id)
	if _, ok := reply.([]any); !ok {
		t.Fatalf("DELAY.GET in RESP2: want a flat array, got %T %s", reply, showValue(reply))
	}
	m := fields(t, "DELAY.GET", reply)
	want := map[string]string{
		"id": id, "queue": "q", "state": "delayed", "due": strconv.FormatInt(due, 10),
		"payload": "body", "deliveries": "0",
	}
	for f, w := range want {
		if g, ok := m[f]; !ok {
			t.Errorf("DELAY.GET: no field %q (got %v)", f, sortedKeys(m))
		} else if fmt.Sprint(g) != w {
			t.Errorf("DELAY.GET: %s = %s, want %s", f, showValue(g), showValue(w))
		}
	}
	if _, ok := m["ack_deadline"]; ok {
		t.Errorf("DELAY.GET: ack_deadline present for a job that is not reserved")
	}
	if _, ok := m["due"].(int64); !ok {
		t.Logf("note: DELAY.GET due is %T, not an integer reply", m["due"])
	}

	chain(t, c,
		cmd(nil, "DELAY.GET", "q", "no-such-id"),
		cmd(nil, "DELAY.GET", "no-such-queue", id),
		cmd(errIs("ERR wrong number of arguments for 'delay.get' command"), "DELAY.GET", "q"),
	)

	// RESP3: a map
	c3 := s.Client3()
	reply3 := do(t, c3, "DELAY.GET", "q", id)
	m3, ok := reply3.(map[any]any)
	if !ok {
		t.Fatalf("DELAY.GET in RESP3: want a map, got %T %s", reply3, showValue(reply3))
	}
	for f, w := range want {
		if g, ok := m3[f]; !ok {
			t.Errorf("DELAY.GET (RESP3): no field %q (got %v)", f, m3)
		} else if fmt.Sprint(g) != w {
			t.Errorf("DELAY.GET (RESP3): %s = %v, want %s", f, g, w)
		}
	}
	expect(t, c3, nil, "DELAY.GET", "q", "no-such-id")
}

func TestStats(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()

	reply := do(t, c, "DELAY.STATS", "empty")
	if _, ok := reply.([]any); !ok {
		t.Fatalf("DELAY.STATS: want a field/value array, got %T", reply)
	}
	expectStats(t, c, "empty", 0, 0, 0)
	add(t, c, "q", 60000, "a")
	add(t, c, "q", 60000, "b")
	add(t, c, "q", 0, "c")
	add(t, c, "other", 0, "d")
	expectStats(t, c, "q", 2, 1, 0)
	expectStats(t, c, "other", 0, 1, 0)
	expect(t, c, errIs("ERR wrong number of arguments for 'delay.stats' command"), "DELAY.STATS")
}

func TestPeek(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()

	expect(t, c, []any{}, "DELAY.PEEK", "q")
	a := add(t, c, "q", 0, "a")
	b := add(t, c, "q", 0, "b")
	cc := add(t, c, "q", 0, "c")
	add(t, c, "q", 60000, "not-ready")
	chain(t, c,
		cmd([]any{[]any{a, "a"}}, "DELAY.PEEK", "q"),
		cmd([]any{[]any{a, "a"}, []any{b, "b"}}, "DELAY.PEEK", "q", 2),
		cmd([]any{[]any{a, "a"}, []any{b, "b"}, []any{cc, "c"}}, "DELAY.PEEK", "q", 10),
		cmd(errIs("ERR value is not an integer or out of range"), "DELAY.PEEK", "q", "abc"),
	)
	expectStats(t, c, "q", 1, 3, 0) // nothing removed
	expect(t, c, []any{"q", a, "a"}, "DELAY.POP", "q", "0.1")
	expect(t, c, []any{[]any{b, "b"}}, "DELAY.PEEK", "q")
}

func TestDelayCommandsBadInput(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()

	const (
		notInt = "ERR value is not an integer or out of range"
		syntax = "ERR syntax error"
	)
	arity := func(name string) errIs {
		return errIs("ERR wrong number of arguments for '" + name + "' command")
	}
	chain(t, c,
		cmd(arity("delay.add"), "DELAY.ADD"),
		cmd(arity("delay.add"), "DELAY.ADD", "q"),
		cmd(arity("delay.add"), "DELAY.ADD", "q", 10),
		cmd(arity("delay.add"), "delay.add", "q", 10), // name in lower case whatever the client sent
		cmd(arity("delay.addat"), "DELAY.ADDAT", "q", 10),
		cmd(arity("delay.cancel"), "DELAY.CANCEL", "q"),
		cmd(arity("delay.pop"), "DELAY.POP", "q"),
		cmd(arity("delay.pop"), "DELAY.POP"),
		cmd(arity("delay.peek"), "DELAY.PEEK"),

		cmd(errIs(notInt), "DELAY.ADD", "q", -1, "x"),
		cmd(errIs(notInt), "DELAY.ADD", "q", "abc", "x"),
		cmd(errIs(notInt), "DELAY.ADD", "q", "1.5", "x"),
		cmd(errIs(notInt), "DELAY.ADD", "q", "", "x"),
		cmd(errIs(notInt), "DELAY.ADD", "q", "99999999999999999999999", "x"),
		cmd(errIs(notInt), "DELAY.ADDAT", "q", "soon", "x"),
		cmd(errIs(notInt), "DELAY.ADDAT", "q", "1e3", "x"),

		cmd(errIs(syntax+": unknown option 'FOO'"), "DELAY.ADD", "q", 10, "x", "FOO"),
		cmd(errIs(syntax+": option 'ID' needs a value"), "DELAY.ADD", "q", 10, "x", "ID"),
		cmd(errIs(syntax+": unknown option 'BAR'"), "DELAY.ADDAT", "q", 10, "x", "BAR", "1"),
		cmd(errIs(syntax+": unknown option 'ACKTIMOUT'"), "DELAY.ADD", "q", 10, "x", "ACKTIMOUT", 5000),
		cmd(errIs(syntax+": option 'ID' given twice"), "DELAY.ADD", "q", 10, "x", "ID", "a", "ID", "b"),
		cmd(errIs("ERR REPLACE needs ID"), "DELAY.ADD", "q", 10, "x", "REPLACE"),
		cmd(errIs(syntax+": unknown option 'BOGUS'"), "DELAY.NACK", "q", "id", 60000, "BOGUS", "x"),
		cmd(errIs(syntax+": unknown option 'b'"), "DELAY.NACK", "q", "a", "b", "x"),

		cmd(errIs("ERR timeout is not a float or out of range"), "DELAY.POP", "q", "abc"),
		cmd(errIs("ERR timeout is not a float or out of range"), "DELAY.POP", "q", ""),
		cmd(errIs("ERR timeout is negative"), "DELAY.POP", "q", "-1"),
		cmd(errIs("ERR timeout is negative"), "DELAY.POP", "q", "-0.5"),
	)
	// none of that added anything, and the connection still works
	expectStats(t, c, "q", 0, 0, 0)
	expect(t, c, 0, "DBSIZE")
	expect(t, c, "PONG", "PING")
	// command names are case-insensitive
	id := bulkID(t, "delay.add", do(t, c, "delay.add", "q", 0, "lower"))
	expect(t, c, []any{"q", id, "lower"}, "Delay.Pop", "q", "0.1")
}
