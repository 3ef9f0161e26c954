package integration

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SPEC "Redis list commands on ready lists" (the reliable-list pattern) and
// "Transactions and the keyspace" (SCAN, KEYS, INFO keyspace, FLUSHDB,
// FLUSHALL, MEMORY USAGE), checked against redis-server where it is
// installed and with redis-cli's key tools.

// TestParityListMoves: LMOVE, BLMOVE, RPOPLPUSH, BRPOPLPUSH and LREM reply
// as Redis's do, and leave the lists as Redis's do.
func TestParityListMoves(t *testing.T) {
	t.Parallel()
	parity(t, map[string]func(tg *target) []string{
		"lmove every end": func(tg *target) []string {
			c := tg.client()
			out := []string{reply(c, "RPUSH", "m1", "a", "b", "c", "d")}
			for _, e := range [][2]string{{"LEFT", "LEFT"}, {"LEFT", "RIGHT"}, {"RIGHT", "LEFT"}, {"RIGHT", "RIGHT"}} {
				out = append(out, reply(c, "LMOVE", "m1", "m1dst", e[0], e[1]), reply(c, "LRANGE", "m1dst", "0", "-1"))
			}
			return append(out, reply(c, "LMOVE", "m1", "m1dst", "LEFT", "LEFT"), reply(c, "EXISTS", "m1"),
				reply(c, "LMOVE", "m1", "m1dst", "UP", "LEFT"), reply(c, "LMOVE", "m1dst", "m1dst", "LEFT", "RIGHT"),
				reply(c, "LRANGE", "m1dst", "0", "-1"), reply(c, "RPOPLPUSH", "m1dst", "m1"), reply(c, "RPOPLPUSH", "none", "m1"),
				reply(c, "LRANGE", "m1", "0", "-1"))
		},
		"blocking moves": func(tg *target) []string {
			c := tg.client()
			out := []string{reply(c, "BLMOVE", "m2", "m2dst", "LEFT", "RIGHT", "0.05"),
				reply(c, "BRPOPLPUSH", "m2", "m2dst", "0.05"), reply(c, "EXISTS", "m2", "m2dst")}
			w1 := blockAsync(tg, "BLMOVE", "m2", "m2dst", "RIGHT", "LEFT", "5")
			tg.waitBlocked(1)
			w2 := blockAsync(tg, "BLPOP", "m2", "5")
			tg.waitBlocked(2)
			w3 := blockAsync(tg, "BRPOPLPUSH", "m2", "m2dst", "5")
			tg.waitBlocked(3)
			out = append(out, reply(c, "RPUSH", "m2", "x", "y", "z"), recv(tg, w1), recv(tg, w2), recv(tg, w3),
				reply(c, "LRANGE", "m2dst", "0", "-1"), reply(c, "LLEN", "m2"))
			// a waiter on the destination is served by the move
			w4 := blockAsync(tg, "BLPOP", "m2dst2", "5")
			tg.waitBlocked(1)
			return append(out, reply(c, "LMOVE", "m2dst", "m2dst2", "LEFT", "LEFT"), recv(tg, w4), reply(c, "LLEN", "m2dst2"))
		},
		"lrem": func(tg *target) []string {
			c := tg.client()
			out := []string{reply(c, "RPUSH", "r1", "a", "x", "b", "x", "c", "x", "d", "x")}
			for _, n := range []string{"1", "-2", "0", "0", "nope"} {
				out = append(out, reply(c, "LREM", "r1", n, "x"), reply(c, "LRANGE", "r1", "0", "-1"))
			}
			return append(out, reply(c, "LREM", "none", "0", "x"), reply(c, "LREM", "r1", "0", "a"),
				reply(c, "LREM", "r1", "0", "b"), reply(c, "LREM", "r1", "0", "c"), reply(c, "LREM", "r1", "0", "d"), reply(c, "EXISTS", "r1"))
		},
		"keys and scan": func(tg *target) []string {
			c := tg.client()
			names := []string{"jobs:email", "jobs:sms", "jobs:", "job", "Jobs:x", "a*b", "a?b", "a[b", `a\b`, "h-llo", "hallo", "hello", "x]y", "-"}
			for _, n := range names {
				reply(c, "RPUSH", n, "v")
			}
			var out []string
			for _, p := range []string{"*", "jobs:*", "*:*", "j?b", "h[ae]llo", "h[^e]llo", "h[a-e]llo", "h[e-a]llo", `a\*b`, `a\?b`, `a\[b`,
				`a\\b`, "a[*]b", "[", "a[", "*[", "x]y", "[]]", `[\]]`, "[a-]", "-", "[-]", "*l*l*", "", "h[a-]llo", `a\`, "[^"} {
				out = append(out, "KEYS "+p+" "+sorted(c, "KEYS", p), "SCAN MATCH "+p+" "+scanAll(c, "MATCH", p))
			}
			out = append(out, "SCAN TYPE list "+scanAll(c, "TYPE", "list"), "SCAN TYPE string "+scanAll(c, "TYPE", "string"),
				"SCAN COUNT 1 "+scanAll(c, "COUNT", "1"), reply(c, "SCAN", "0", "COUNT", "0"), reply(c, "SCAN", "x"),
				reply(c, "SCAN", "0", "MATCH"), reply(c, "SCAN", "0", "FOO", "bar"), reply(c, "DBSIZE"), reply(c, "MEMORY", "USAGE", "nokey"))
			return out
		},
		"flush and info keyspace": func(tg *target) []string {
			c := tg.client()
			reply(c, "FLUSHALL")
			out := []string{keyspace(c), reply(c, "RPUSH", "f1", "a"), reply(c, "LPUSH", "f2", "b"), keyspace(c)}
			w := blockAsync(tg, "BLPOP", "f3", "5")
			tg.waitBlocked(1)
			out = append(out, reply(c, "FLUSHDB"), keyspace(c), reply(c, "DBSIZE"), reply(c, "FLUSHALL", "SYNC"), reply(c, "FLUSHALL", "ASYNC"),
				reply(c, "FLUSHALL", "NOW"))
			// the blocked client is still blocked
			return append(out, reply(c, "RPUSH", "f3", "z"), recv(tg, w), keyspace(c))
		},
	})
}

// keyspace is INFO keyspace without its line ends.
func keyspace(c *redis.Client) string {
	text, err := c.Info(context.Background(), "keyspace").Result()
	if err != nil {
		return "error: " + err.Error()
	}
	return strings.Join(strings.Fields(text), " ")
}

// sorted is a reply that is an array of names, sorted.
func sorted(c *redis.Client, args ...any) string {
	v, err := c.Do(context.Background(), args...).StringSlice()
	if err != nil {
		return "error: " + err.Error()
	}
	slices.Sort(v)
	return strings.Join(v, ",")
}

// scanAll runs a whole SCAN with the options and returns the names seen,
// sorted and without repeats.
func scanAll(c *redis.Client, opts ...any) string {
	var all []string
	cursor := "0"
	for calls := 0; calls < 10000; calls++ {
		v, err := c.Do(context.Background(), append([]any{"SCAN", cursor}, opts...)...).Slice()
		if err != nil {
			return "error: " + err.Error()
		}
		cursor = v[0].(string)
		for _, k := range v[1].([]any) {
			all = append(all, k.(string))
		}
		if cursor == "0" {
			slices.Sort(all)
			return strings.Join(slices.Compact(all), ",")
		}
	}
	return "the scan never ended"
}

// TestReliableQueuePattern: the reliable-list pattern with a stock list
// worker: BLMOVE jobs processing, work, LREM processing 1 payload. A worker
// that dies after the move leaves its job in processing, where a reaper
// finds it; nothing is lost across a kill -9.
func TestReliableQueuePattern(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
	c := s.Client()
	// A worker blocked before the jobs exist is served by the first add.
	got := make(chan any, 1)
	go func() {
		w := s.Client()
		v, _ := w.Do(context.Background(), "BLMOVE", "jobs", "processing", "LEFT", "RIGHT", "5").Result()
		got <- v
	}()
	s.waitBlocked(t, 1)
	id := add(t, c, "jobs", 0, "job-1")
	if v := <-got; v != "job-1" {
		t.Fatalf("blocked BLMOVE got %v", v)
	}
	// the job kept its id in processing
	expectJob(t, c, "processing", id, map[string]string{"state": "ready", "payload": "job-1"}, 0, 0)
	expect(t, c, int64(1), "LREM", "processing", 1, "job-1")
	expect(t, c, int64(0), "EXISTS", "processing")

	for i := range 5 {
		add(t, c, "jobs", 0, "job-"+strconv.Itoa(i+2))
	}
	chain(t, c,
		cmd("job-2", "BLMOVE", "jobs", "processing", "LEFT", "RIGHT", "1"),
		cmd("job-6", "BRPOPLPUSH", "jobs", "processing", "1"),
	)
	// BRPOPLPUSH takes from the tail and puts at the head, as Redis's does.
	expect(t, c, []any{"job-6", "job-2"}, "LRANGE", "processing", 0, -1)
	s.Kill9() // a worker (and the server) die with two jobs in processing
	durRestartAfterKill(t, s)
	c = s.Client()
	chain(t, c,
		cmd([]any{"job-6", "job-2"}, "LRANGE", "processing", 0, -1),
		cmd([]any{"job-3", "job-4", "job-5"}, "LRANGE", "jobs", 0, -1),
		// a reaper puts them back
		cmd("job-2", "RPOPLPUSH", "processing", "jobs"),
		cmd("job-6", "LMOVE", "processing", "jobs", "LEFT", "RIGHT"),
		cmd([]any{"job-2", "job-3", "job-4", "job-5", "job-6"}, "LRANGE", "jobs", 0, -1),
		cmd(int64(0), "EXISTS", "processing"),
	)
	// A timeout is a null array, as Redis's (RESP2 *-1); LMOVE of nothing a null bulk.
	rc := s.dialRaw(t)
	rc.send("BLMOVE", "empty", "processing", "LEFT", "RIGHT", "0.05")
	if line := rc.readLine(); line != "*-1" {
		t.Errorf("BLMOVE timeout: %q, want *-1", line)
	}
	rc.send("LMOVE", "empty", "processing", "LEFT", "RIGHT")
	if line := rc.readLine(); line != "$-1" {
		t.Errorf("LMOVE of an empty list: %q, want $-1", line)
	}
}

// TestRedisCliKeyTools: redis-cli --scan, --bigkeys, --memkeys and --stat
// work against delayd, exit 0 and show the queues.
func TestRedisCliKeyTools(t *testing.T) {
	t.Parallel()
	cliPath(t)
	s := startServer(t)
	c := s.Client()
	for i := range 30 {
		add(t, c, "jobs:"+strconv.Itoa(i), int64(i%3)*600000, "payload")
	}
	expect(t, c, int64(3), "RPUSH", "jobs:big", "a", "b", "c")
	add(t, c, "other", 0, "x")

	out, code := cliRun(t, s, "--scan", "--pattern", "jobs:*")
	names := strings.Fields(out)
	slices.Sort(names)
	if code != 0 || len(names) != 31 || !slices.Contains(names, "jobs:big") || slices.Contains(names, "other") {
		t.Errorf("redis-cli --scan --pattern 'jobs:*': exit %d, %d names %q", code, len(names), out)
	}

	out, code = cliRun(t, s, "--bigkeys")
	if code != 0 || !strings.Contains(out, `Biggest   list found '"jobs:big"' has 3 items`) || !strings.Contains(out, "32 lists with 14 items") {
		t.Errorf("redis-cli --bigkeys: exit %d\n%s", code, out)
	}

	out, code = cliRun(t, s, "--memkeys")
	if code != 0 || !strings.Contains(out, "32 lists with") || !strings.Contains(out, "Biggest   list found") {
		t.Errorf("redis-cli --memkeys: exit %d\n%s", code, out)
	}

	// --stat runs until interrupted; its exit code then says nothing
	out, code = cliRun(t, s, "--stat", "-i", "0.1")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) < 4 || !strings.HasPrefix(lines[1], "keys") ||
		!strings.HasPrefix(lines[len(lines)-1], "32 ") {
		t.Errorf("redis-cli --stat: exit %d\n%q", code, out)
	}
}

// cliRun runs redis-cli with args against s for at most 3 s (redis-cli
// --stat runs until stopped: it is then interrupted, as a user would) and
// returns its output and exit code.
func cliRun(t *testing.T, s *server, args ...string) (string, int) {
	t.Helper()
	argv := append([]string{cliPath(t), "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port())}, args...)
	if sb, err := exec.LookPath("stdbuf"); err == nil {
		// redis-cli --stat writes through stdio: line-buffer it, or what it
		// printed is lost when it is interrupted
		argv = append([]string{sb, "-oL"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(3 * time.Second):
		_ = cmd.Process.Signal(os.Interrupt)
		err = <-done
	}
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	}
	return out.String(), code
}
