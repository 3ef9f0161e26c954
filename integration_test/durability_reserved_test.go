package integration

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SPEC "Durability": reserved jobs across kill -9 and restarts, the
// records everysec must still flush, and SIGTERM (helpers in
// durability_test.go).

// TestDurabilityReservedSurvivesKill9: a popped, unacknowledged job with an
// ack timeout is still reserved after kill -9 and a restart, with the same
// absolute deadline; an ACK after the restart deletes it for good.
func TestDurabilityReservedSurvivesKill9(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
	c := s.Client()
	id := add(t, c, "q", 0, "work", "ACKTIMEOUT", 60000)
	expect(t, c, []any{"q", id, "work"}, "DELAY.POP", "q", "1")
	m := job(t, c, "q", id)
	if m["state"] != "reserved" {
		t.Fatalf("after the pop: state %v, want reserved", m["state"])
	}
	deadline, ok := m["ack_deadline"]
	if !ok {
		t.Errorf("DELAY.GET of a reserved job has no ack_deadline: %v", sortedKeys(m))
	}
	expectStats(t, c, "q", 0, 0, 1)
	s.Kill9()
	durRestartAfterKill(t, s)
	c = s.Client()
	m = job(t, c, "q", id)
	if m["state"] != "reserved" || fmt.Sprint(m["ack_deadline"]) != fmt.Sprint(deadline) {
		t.Errorf("after kill -9 and restart: state %v deadline %v, want reserved until %v", m["state"], m["ack_deadline"], deadline)
	}
	if d := asInt(t, "deliveries", m["deliveries"]); d != 1 {
		t.Errorf("after kill -9 and restart: deliveries %d, want 1", d)
	}
	expectStats(t, c, "q", 0, 0, 1)
	expect(t, c, nil, "DELAY.POP", "q", "0.1")
	expect(t, c, int64(1), "DELAY.ACK", "q", id)
	s.Kill9()
	durRestartAfterKill(t, s)
	c = s.Client()
	expect(t, c, nil, "DELAY.GET", "q", id)
	expectStats(t, c, "q", 0, 0, 0)
}

// TestDurabilityEverysecReservedSurvivesKill9: under everysec, as under
// always, a pop's reservation is in the log before its reply (SPEC,
// Durability), so a kill -9 right after the pop neither loses the job nor
// hands it out again before its ack deadline; an ACK's likewise.
func TestDurabilityEverysecReservedSurvivesKill9(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--appendonly", "yes", "--appendfsync", "everysec")
	c := s.Client()
	id := add(t, c, "q", 0, "a", "ACKTIMEOUT", 60000)
	other := add(t, c, "q", 0, "b", "ACKTIMEOUT", 60000)
	expect(t, c, []any{"q", id, "a"}, "DELAY.POP", "q", "1")
	deadline := job(t, c, "q", id)["ack_deadline"]
	s.Kill9()
	durRestartAfterKill(t, s)
	c = s.Client()
	m := job(t, c, "q", id)
	if m["state"] != "reserved" || fmt.Sprint(m["ack_deadline"]) != fmt.Sprint(deadline) {
		t.Fatalf("after a pop and kill -9 under everysec: %v, want reserved until %v", m, deadline)
	}
	expect(t, c, []any{"q", other, "b"}, "DELAY.POP", "q", "1") // not a again
	expect(t, c, int64(1), "DELAY.ACK", "q", id)
	expect(t, c, int64(1), "DELAY.ACK", "q", other)
	s.Kill9()
	durRestartAfterKill(t, s)
	c = s.Client()
	expect(t, c, nil, "DELAY.GET", "q", id)
	expect(t, c, nil, "DELAY.GET", "q", other)
	expectStats(t, c, "q", 0, 0, 0)
}

// TestDurabilityEverysecTimerRecordsSurviveKill9: under everysec the records
// the timer goroutine makes, which no client waits for, are written by that
// goroutine before it sleeps (engine/journal.go), not left for the flusher's
// one-second tick. A job served to a blocked DELAY.POP when it comes due is
// reserved after a kill -9 right after the reply; a schedule's firings, made
// while no client sends anything, are in the log when the server is killed.
// Without the timer goroutine's write, every firing is lost.
func TestDurabilityEverysecTimerRecordsSurviveKill9(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--appendonly", "yes", "--appendfsync", "everysec")
	c := s.Client()

	// A reservation made by the timer: the job comes due while the worker
	// blocks.
	popped := make(chan []any, 1)
	go func() {
		v, _ := s.Client().Do(ctxT(t, 10*time.Second), "DELAY.POP", "r", "5").Slice()
		popped <- v
	}()
	s.waitBlocked(t, 1)
	id := add(t, c, "r", 200, "served", "ACKTIMEOUT", 60000)
	if v := <-popped; len(v) != 3 || v[1] != id {
		t.Fatalf("the blocked pop: %v, want job %s", v, id)
	}
	s.Kill9()
	durRestartAfterKill(t, s)
	c = s.Client()
	if m := job(t, c, "r", id); m["state"] != "reserved" || asInt(t, "deliveries", m["deliveries"]) != 1 {
		t.Fatalf("a job served by the timer, after kill -9: %v, want reserved, delivered once", m)
	}

	// A schedule's firings, made while no client sends a command: any
	// command, even a read, would have the pending records written
	// (Engine.Settle), so the test learns the firing times only after the
	// restart. Those due 150 ms before the kill or earlier must be there: a
	// firing late by that much on a loaded machine is not what this tests.
	const every = 20
	expect(t, c, "OK", "DELAY.SCHEDULE", "q", "tick", "EVERY", every, "x")
	from := time.Now().UnixMilli()
	time.Sleep(500 * time.Millisecond)
	killed := time.Now().UnixMilli()
	s.Kill9()
	durRestartAfterKill(t, s)
	c = s.Client()
	list := do(t, c, "DELAY.SCHEDULES", "q").([]any)
	if len(list) != 1 {
		t.Fatalf("DELAY.SCHEDULES q: %v", list)
	}
	next := asInt(t, "next", fields(t, "tick", list[0])["next"])
	first := from + 1 + ((next-from-1)%every+every)%every // the first firing after from
	var made, lost []string
	for at := first; at <= killed-150; at += every {
		made = append(made, "tick:"+strconv.FormatInt(at, 10))
	}
	if len(made) < 3 {
		t.Fatalf("%d firings in 350 ms of EVERY %d", len(made), every)
	}
	found := durExisting(t, c, "q", made)
	for _, id := range made {
		if !found[id] {
			lost = append(lost, id)
		}
	}
	if len(lost) > 0 {
		t.Errorf("after kill -9, %d of the %d firings due by then are gone: %v (from %d, killed %d)", len(lost), len(made), lost, from, killed)
	}
}

// TestDurabilitySigtermKeepsEverything: SIGTERM exits 0 and the restart sees
// every write, whatever the fsync policy (a graceful stop flushes and fsyncs).
func TestDurabilitySigtermKeepsEverything(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"no", "everysec", "always"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, "--appendonly", "yes", "--appendfsync", policy)
			c := s.Client()
			delayed := durAddMany(t, c, "d", 600000, 3000)
			ready := durAddMany(t, c, "r", 0, 10)
			expect(t, c, int64(2), "DELAY.CANCEL", "d", delayed[0], delayed[1])
			expect(t, c, []any{"r", ready[0], "payload-0"}, "DELAY.POP", "r", "1")
			resv := add(t, c, "a", 0, "reserved", "ACKTIMEOUT", 60000)
			acked := add(t, c, "a", 0, "acked", "ACKTIMEOUT", 60000)
			expect(t, c, []any{"a", resv, "reserved"}, "DELAY.POP", "a", "1")
			expect(t, c, []any{"a", acked, "acked"}, "DELAY.POP", "a", "1")
			expect(t, c, int64(1), "DELAY.ACK", "a", acked)
			custom := add(t, c, "x", 600000, "v1", "ID", "mine")
			expect(t, c, custom, "DELAY.ADD", "x", 600000, "v2", "ID", "mine", "REPLACE")

			durStopClean(t, s)
			if out, err := durStart(t, s); err != nil {
				t.Fatalf("restart: %v\n%s", err, out)
			}
			c = s.Client()
			expectStats(t, c, "d", int64(len(delayed)-2), 0, 0)
			expectStats(t, c, "r", 0, 9, 0)
			// a reserved job stays reserved across a restart
			expectStats(t, c, "a", 0, 0, 1)
			if m := job(t, c, "a", resv); m["state"] != "reserved" {
				t.Errorf("reserved job after restart: %v", m)
			}
			expect(t, c, nil, "DELAY.GET", "a", acked)
			expect(t, c, nil, "DELAY.GET", "d", delayed[0])
			expect(t, c, nil, "DELAY.GET", "r", ready[0])
			if m := job(t, c, "x", "mine"); m["payload"] != "v2" {
				t.Errorf("replaced job after restart: payload %v, want v2", m["payload"])
			}
			if found := durExisting(t, c, "d", delayed[2:]); len(found) != len(delayed)-2 {
				t.Errorf("%d of %d delayed jobs after the restart", len(found), len(delayed)-2)
			}
			expect(t, c, []any{"r", ready[1], "payload-1"}, "DELAY.POP", "r", "1")
		})
	}
}

// durPopAll pops n jobs of key with pipelined DELAY.POP key 1 and returns
// their ids; any error or null reply fails the test.
func durPopAll(t testing.TB, c *redis.Client, key string, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pipe := c.Pipeline()
	cmds := make([]*redis.Cmd, n)
	for i := range cmds {
		cmds[i] = pipe.Do(ctx, "DELAY.POP", key, "1")
	}
	_, _ = pipe.Exec(ctx)
	ids := make([]string, 0, n)
	for i, cmd := range cmds {
		v, err := cmd.Result()
		if err != nil {
			t.Fatalf("pipelined DELAY.POP %s #%d of %d: %v", key, i, n, err)
		}
		r, _ := v.([]any)
		if len(r) != 3 {
			t.Fatalf("pipelined DELAY.POP %s #%d: %s", key, i, showValue(v))
		}
		ids = append(ids, fmt.Sprint(r[1]))
	}
	return ids
}

// TestDurabilityManyReservedSurviveRestarts: 1,000 reserved jobs keep their
// reservations across a restart (SIGTERM, and kill -9 under appendfsync
// always): none is handed out again before its deadline, an ACK sent after
// the restart deletes its job, and once the deadline passes every un-acked
// job comes back, once.
func TestDurabilityManyReservedSurviveRestarts(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"kill -9", "SIGTERM"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			const n = 1000
			const ackTimeout = 4000 // the wait before the deadline fits expect's 5 s
			s := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
			c := s.Client()
			var want []string
			for start := 0; start < n; start += 100 {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				pipe := c.Pipeline()
				cmds := make([]*redis.Cmd, 100)
				for i := range cmds {
					cmds[i] = pipe.Do(ctx, "DELAY.ADD", "q", 0, "w"+strconv.Itoa(start+i), "ACKTIMEOUT", ackTimeout)
				}
				_, _ = pipe.Exec(ctx)
				cancel()
				for _, cmd := range cmds {
					want = append(want, bulkID(t, "DELAY.ADD", cmd.Val()))
				}
			}
			got := durPopAll(t, c, "q", n)
			if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
				t.Fatalf("the %d pops did not return each job once", n)
			}
			// The first job popped has the earliest deadline.
			first := asInt(t, "ack_deadline", job(t, c, "q", got[0])["ack_deadline"])
			if how == "kill -9" {
				s.Kill9()
			} else {
				durStopClean(t, s)
			}
			if out, err := durStart(t, s); err != nil {
				t.Fatalf("restart with %d reserved jobs in the log: %v\n%s", n, err, out)
			}
			c = s.Client()
			expectStats(t, c, "q", 0, 0, n)
			if d := asInt(t, "ack_deadline", job(t, c, "q", got[0])["ack_deadline"]); d != first {
				t.Fatalf("ack deadline after the restart %d, want %d as before", d, first)
			}
			// ACK every other job after the restart: each deletes its job.
			acked := map[string]bool{}
			for i := 0; i < n; i += 2 {
				expect(t, c, int64(1), "DELAY.ACK", "q", got[i])
				acked[got[i]] = true
			}
			// Nothing is handed out again before the deadline.
			if wait := first - durNowMs() - 300; wait > 0 {
				ms := strconv.FormatFloat(float64(wait)/1000, 'f', 3, 64)
				expect(t, c, nil, "DELAY.POP", "q", ms)
			} else {
				t.Logf("the restart took past the deadline; skipping the check before it")
			}
			if durNowMs() < first-50 {
				expectStats(t, c, "q", 0, 0, n/2)
			}
			// After the deadline the un-acked jobs come back, each once.
			for durNowMs() <= first+ackTimeout/10 {
				time.Sleep(50 * time.Millisecond)
			}
			back := durPopAll(t, c, "q", n/2)
			for _, id := range back {
				if acked[id] {
					t.Fatalf("acked job %s came back", id)
				}
			}
			if len(slices.Compact(slices.Sorted(slices.Values(back)))) != n/2 {
				t.Fatalf("%d distinct jobs came back, want %d", len(slices.Compact(slices.Sorted(slices.Values(back)))), n/2)
			}
			expect(t, c, nil, "DELAY.GET", "q", got[0])
			expect(t, c, nil, "DELAY.POP", "q", "0.1") // nothing else
		})
	}
}
