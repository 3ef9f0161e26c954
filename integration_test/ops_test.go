package integration

import (
	"strings"
	"testing"
	"time"
)

// SPEC "Observability": the commands the dashboard is a view of.
// DELAY.UPCOMING, DELAY.PAUSE / DELAY.RESUME, DELAY.REQUEUE, with the real
// binary, through go-redis and redis-cli, across restarts.

// opsPaused reads DELAY.STATS key's paused field.
func opsPaused(t *testing.T, s *server, key string) int64 {
	t.Helper()
	m := fields(t, "DELAY.STATS "+key, do(t, s.Client(), "DELAY.STATS", key))
	v, ok := m["paused"]
	if !ok {
		t.Fatalf("DELAY.STATS %s has no paused field: %v", key, m)
	}
	return asInt(t, "paused", v)
}

func TestOpsUpcoming(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()
	chain(t, c,
		cmd([]any{}, "DELAY.UPCOMING", "q"),
		cmd("late", "DELAY.ADDAT", "q", 4102444800000, "p-late", "ID", "late"),
		cmd("early", "DELAY.ADDAT", "q", 4000000000000, "p-early", "ID", "early"),
		cmd("ready", "DELAY.ADD", "q", 0, "p-ready", "ID", "ready"),
		cmd("other", "DELAY.ADDAT", "other", 3000000000000, "p-other", "ID", "other"),
		cmd([]any{[]any{"early", int64(4000000000000), "p-early"}, []any{"late", int64(4102444800000), "p-late"}}, "DELAY.UPCOMING", "q"),
		cmd([]any{[]any{"early", int64(4000000000000), "p-early"}}, "DELAY.UPCOMING", "q", 1),
		cmd(errIs("ERR count must be an integer from 1 to 1000"), "DELAY.UPCOMING", "q", 1001),
		cmd(errIs("ERR value is not an integer or out of range"), "DELAY.UPCOMING", "q", "x"),
	)
	// A job becomes ready when due, and leaves the upcoming list.
	id := add(t, c, "soon", 100, "x")
	expect(t, c, []any{[]any{id, anyReply{}, "x"}}, "DELAY.UPCOMING", "soon")
	time.Sleep(150 * time.Millisecond)
	expect(t, c, []any{}, "DELAY.UPCOMING", "soon")
}

// A paused queue hands nothing out, blocked workers stay blocked, jobs
// still become ready on time; RESUME serves the workers; the pause
// survives a restart and a kill -9.
func TestOpsPauseResume(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
	c := s.Client()
	expect(t, c, "OK", "DELAY.PAUSE", "q")
	if opsPaused(t, s, "q") != 1 {
		t.Fatal("DELAY.STATS of a paused name says 0")
	}
	worker := popAsync(s.Client(), 10*time.Second, "q", 0)
	s.waitBlocked(t, 1)
	add(t, c, "q", 0, "now")
	add(t, c, "q", 50, "soon")
	add(t, c, "other", 0, "o")
	time.Sleep(150 * time.Millisecond)
	select {
	case r := <-worker:
		t.Fatalf("a worker blocked on a paused queue got %v %v", r.reply, r.err)
	default:
	}
	expectStats(t, c, "q", 0, 2, 0)
	chain(t, c,
		cmd(nil, "LPOP", "q"),
		cmd([]any{"other", anyReply{}, "o"}, "DELAY.POP", "q", "other", 1), // skips q
	)
	expect(t, c, "OK", "DELAY.RESUME", "q")
	popTriple(t, waitPop(t, worker, 5*time.Second), "q", "", "now")
	if opsPaused(t, s, "q") != 0 {
		t.Fatal("still paused after RESUME")
	}

	// It survives a clean restart and a kill -9 (the log has it).
	expect(t, c, "OK", "DELAY.PAUSE", "q")
	s.Restart()
	c = s.Client()
	if opsPaused(t, s, "q") != 1 {
		t.Fatal("a restart resumed the queue")
	}
	expect(t, c, nil, "DELAY.POP", "q", 0.1)
	s.Kill9()
	durRestartAfterKill(t, s)
	c = s.Client()
	if opsPaused(t, s, "q") != 1 {
		t.Fatal("kill -9 and a restart resumed the queue")
	}
	expect(t, c, anyReply{}, "BGREWRITEAOF")
	time.Sleep(200 * time.Millisecond)
	s.Restart()
	c = s.Client()
	if opsPaused(t, s, "q") != 1 {
		t.Fatal("a rewrite resumed the queue")
	}
	chain(t, c,
		cmd("OK", "DELAY.RESUME", "q"),
		cmd([]any{"q", anyReply{}, "soon"}, "DELAY.POP", "q", 1),
	)
}

// A dead-lettered job goes back to its queue with its ack timeout and
// retry limit, across a kill -9; ALL and a to-key; one record per job.
func TestOpsRequeue(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
	c := s.Client()
	deadLetter := func(q, id string) {
		t.Helper()
		add(t, c, q, 0, "p-"+id, "ID", id, "RETRY", 0, "ACKTIMEOUT", 60000, "DEADLETTER", "dlq")
		expect(t, c, []any{q, id, "p-" + id}, "DELAY.POP", q, 1)
		expect(t, c, int64(1), "DELAY.NACK", q, id)
	}
	deadLetter("a", "1")
	deadLetter("b", "2")
	deadLetter("a", "3")
	add(t, c, "dlq", 0, "plain", "ID", "4")
	expectStats(t, c, "dlq", 0, 4, 0)
	s.Kill9()
	durRestartAfterKill(t, s)
	c = s.Client()
	chain(t, c,
		cmd(int64(0), "DELAY.REQUEUE", "dlq", "nosuch"),
		cmd(int64(1), "DELAY.REQUEUE", "dlq", "1"),
		cmd(int64(2), "DELAY.REQUEUE", "dlq", "ALL"), // 2 and 3; 4 has no origin
		cmd(int64(1), "DELAY.REQUEUE", "dlq", "ALL", "misc"),
		cmd([]any{"plain"}, "LRANGE", "misc", 0, -1),
		cmd([]any{"p-1", "p-3"}, "LRANGE", "a", 0, -1),
	)
	if d := job(t, c, "a", "1"); asInt(t, "deliveries", d["deliveries"]) != 0 || d["state"] != "ready" {
		t.Fatalf("requeued job: %v", d)
	}
	// Its options are back: the pop reserves it, and a failure sends it
	// back to the dead-letter queue.
	expect(t, c, []any{"a", "1", "p-1"}, "DELAY.POP", "a", 1)
	if d := job(t, c, "a", "1"); d["state"] != "reserved" {
		t.Fatalf("the ack timeout was not given back: %v", d)
	}
	expect(t, c, int64(1), "DELAY.NACK", "a", "1")
	if d := job(t, c, "dlq", "1"); d["state"] != "ready" {
		t.Fatalf("failed again, not dead-lettered: %v", d)
	}
	s.Restart()
	c = s.Client()
	chain(t, c,
		cmd(int64(1), "DELAY.REQUEUE", "dlq", "1"),
		cmd([]any{"a", "3", "p-3"}, "DELAY.POP", "a", 1),
		cmd([]any{"a", "1", "p-1"}, "DELAY.POP", "a", 1),
	)
}

// redis-cli shows the replies as the README does.
func TestOpsRedisCli(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	cliPath(t)
	cli(t, s, "DELAY.ADDAT", "emails", "4102444800000", "x", "ID", "a")
	out := cli(t, s, "--no-raw", "DELAY.UPCOMING", "emails", "2")
	want := "1) 1) \"a\"\n   2) (integer) 4102444800000\n   3) \"x\"\n"
	if out != want {
		t.Errorf("redis-cli DELAY.UPCOMING: %q, want %q", out, want)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"DELAY.PAUSE", "emails"}, "OK\n"},
		{[]string{"DELAY.REQUEUE", "emails-dlq", "ALL"}, "(integer) 0\n"},
		{[]string{"DELAY.RESUME", "emails"}, "OK\n"},
		{[]string{"DELAY.UPCOMING", "none"}, "(empty array)\n"},
	} {
		if got := cli(t, s, append([]string{"--no-raw"}, c.args...)...); got != c.want {
			t.Errorf("redis-cli %s: %q, want %q", strings.Join(c.args, " "), got, c.want)
		}
	}
}
