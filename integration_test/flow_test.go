package integration

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SPEC "Recurring schedules and job identity": flow control (DELAY.LIMIT),
// GROUP and PRIORITY, with the real binary.

// TestFlowRateHoldsWithEagerWorkers: RATE 100 per 1000 ms hands out 100 jobs
// in every second (within 2%) to 50 workers that pop as fast as they can.
// DELAYD_FLOW_RATE_DURATION sets the run (default 5s; the run is
// 30s).
func TestFlowRateHoldsWithEagerWorkers(t *testing.T) {
	t.Parallel()
	run := 5 * time.Second
	if v := os.Getenv("DELAYD_FLOW_RATE_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("DELAYD_FLOW_RATE_DURATION: %v", err)
		}
		run = d
	}
	secs := int(run / time.Second)
	const rate, workers = 100, 50
	s := startServer(t)
	c := s.Client()
	do(t, c, "DELAY.LIMIT", "q", "RATE", rate, 1000)
	ctx := ctxT(t, run+time.Minute)
	pipe := c.Pipeline()
	for i := range rate * (secs + 3) {
		pipe.Do(ctx, "DELAY.ADD", "q", 0, fmt.Sprint(i), "ACKTIMEOUT", 30000)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var got []time.Time
	end := time.Now().Add(run + 1500*time.Millisecond)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := s.Client()
			for time.Now().Before(end) {
				r, err := w.Do(ctx, "DELAY.POP", "q", 1).Slice()
				if err == redis.Nil {
					continue
				}
				if err != nil {
					t.Errorf("pop: %v", err)
					return
				}
				at := time.Now()
				if err := w.Do(ctx, "DELAY.ACK", "q", r[1]).Err(); err != nil {
					t.Errorf("ack: %v", err)
					return
				}
				mu.Lock()
				got = append(got, at)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(got) == 0 {
		t.Fatal("no job handed out")
	}
	sort.Slice(got, func(i, j int) bool { return got[i].Before(got[j]) })
	// Windows of one second starting a little before the first job: each
	// holds one second's hand-outs, whatever the jitter of a few ms.
	start := got[0].Add(-200 * time.Millisecond)
	per := make([]int, secs)
	total := 0
	for _, at := range got {
		if k := int(at.Sub(start) / time.Second); k < secs {
			per[k]++
			total++
		}
	}
	t.Logf("%d jobs in %d s (%.2f/s); per second: %v", total, secs, float64(total)/float64(secs), per)
	for k, n := range per {
		if n < rate*98/100 || n > rate*102/100 {
			t.Errorf("second %d: %d jobs, want %d within 2%%", k, n, rate)
		}
	}
	if want := rate * secs; total < want*98/100 || total > want*102/100 {
		t.Errorf("%d jobs in %d s, want %d within 2%%", total, secs, want)
	}
	// Never more than 100 in any second: the window slides over every job.
	// The times are the workers', stamped after the reply crossed a loaded
	// machine (CI runs this beside the other packages and benchmarks): a
	// worker held back stamps its job late, bunching it with the next
	// second's. The window is shortened by the 200 ms such a hold may last
	// and allows 10% (it held 104 to 108 in 900 to 980 ms under load, with
	// every second's count exact); a limiter that let a burst through shows
	// 200 here, well past either margin.
	for i := range got {
		j := sort.Search(len(got), func(j int) bool { return !got[j].Before(got[i].Add(time.Second - 200*time.Millisecond)) })
		if n := j - i; n > rate*110/100 {
			t.Errorf("%d jobs within one second from %v", n, got[i].Sub(start))
			break
		}
	}
}

// TestFlowCommands: DELAY.LIMIT's forms and errors, GROUP and PRIORITY
// orders seen by pops and list commands, limits kept across a restart.
func TestFlowCommands(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--appendonly", "yes")
	c := s.Client()
	chain(t, c,
		cmd(nil, "DELAY.LIMIT", "q"),
		cmd("OK", "DELAY.LIMIT", "q", "CONCURRENCY", 2, "RATE", 10, 1000, "GROUPCONCURRENCY", 1),
		cmd([]any{"concurrency", int64(2), "rate", int64(10), "per_ms", int64(1000), "group_concurrency", int64(1),
			"reserved", int64(0), "tokens", int64(10)}, "DELAY.LIMIT", "q"),
		cmd(errIs("ERR syntax error: option 'RATE' needs 2 values"), "DELAY.LIMIT", "q", "RATE", 10),
		cmd(errIs("ERR syntax error: unknown option 'SPEED'"), "DELAY.LIMIT", "q", "SPEED", 10),
		cmd(errIs("ERR syntax error: OFF takes no other option"), "DELAY.LIMIT", "q", "OFF", "CONCURRENCY", 1),
		cmd(errIs("ERR CONCURRENCY must be an integer from 1 to 2147483647"), "DELAY.LIMIT", "q", "CONCURRENCY", 0),
		cmd(errIs("ERR CONCURRENCY must be an integer from 1 to 2147483647"), "DELAY.LIMIT", "q", "CONCURRENCY", "x"),
		cmd(errIs("ERR wrong number of arguments for 'delay.limit' command"), "DELAY.LIMIT"),
		cmd(errIs("ERR PRIORITY must be an integer from 0 to 9"), "DELAY.ADD", "q", 0, "x", "PRIORITY", 10),
	)
	// GROUPCONCURRENCY 1: one job of group a at a time, b goes meanwhile.
	for _, g := range []string{"a", "a", "b"} {
		do(t, c, "DELAY.ADD", "q", 0, g, "GROUP", g, "ACKTIMEOUT", 10000)
	}
	ja := do(t, c, "DELAY.POP", "q", 0).([]any)
	chain(t, c,
		cmd([]any{"q", anyReply{}, "b"}, "DELAY.POP", "q", 0),
		cmd(nil, "DELAY.POP", "q", 0.05),
		cmd([]any{"a"}, "LRANGE", "q", 0, -1),
		cmd(int64(1), "DELAY.ACK", "q", ja[1]),
		cmd([]any{"q", anyReply{}, "a"}, "DELAY.POP", "q", 0),
		cmd("OK", "DELAY.LIMIT", "q", "OFF"),
		cmd(nil, "DELAY.LIMIT", "q"),
	)

	// Priorities, then round-robin across groups, in LRANGE, PEEK and pops.
	for _, a := range [][]any{{"p0", 0, "g1"}, {"p5", 5, "g1"}, {"x0", 0, "g1"}, {"y0", 0, "g2"}, {"p9", 9, "g2"}} {
		do(t, c, "DELAY.ADD", "r", 0, a[0], "PRIORITY", a[1], "GROUP", a[2])
	}
	order := []any{"p9", "p5", "p0", "y0", "x0"}
	chain(t, c,
		cmd(order, "LRANGE", "r", 0, -1),
		cmd("p9", "LPOP", "r"),
		// RPOP: the lowest priority, the group last in turn, its newest job.
		cmd("y0", "RPOP", "r"),
		cmd([]any{"p5", "p0", "x0"}, "LRANGE", "r", 0, -1),
	)
	do(t, c, "DELAY.LIMIT", "r", "CONCURRENCY", 1)
	s.Restart()
	c = s.Client()
	chain(t, c,
		cmd([]any{"concurrency", int64(1), "rate", int64(0), "per_ms", int64(0), "group_concurrency", int64(0),
			"reserved", int64(0), "tokens", int64(-1)}, "DELAY.LIMIT", "r"),
		cmd([]any{"p5", "p0", "x0"}, "LRANGE", "r", 0, -1),
	)
}

// TestFlowLimitedKeySkippedAndWoken: DELAY.POP over a limited key and a
// free one takes from the free one; a blocked worker is woken when the
// limited key gets room.
func TestFlowLimitedKeySkippedAndWoken(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()
	do(t, c, "DELAY.LIMIT", "a", "CONCURRENCY", 1)
	do(t, c, "DELAY.ADD", "a", 0, "a1", "ACKTIMEOUT", 10000)
	do(t, c, "DELAY.ADD", "a", 0, "a2", "ACKTIMEOUT", 10000)
	do(t, c, "DELAY.ADD", "b", 0, "b1")
	first := do(t, c, "DELAY.POP", "a", "b", 0).([]any)
	chain(t, c, cmd([]any{"b", anyReply{}, "b1"}, "DELAY.POP", "a", "b", 0))
	if first[2] != "a1" {
		t.Fatalf("first pop %v", first)
	}
	w := s.Client()
	done := make(chan []any, 1)
	go func() {
		r, err := w.Do(context.Background(), "DELAY.POP", "a", "b", 5).Slice()
		if err != nil {
			t.Errorf("blocked pop: %v", err)
		}
		done <- r
	}()
	s.waitBlocked(t, 1)
	do(t, c, "DELAY.ACK", "a", first[1])
	select {
	case r := <-done:
		if len(r) != 3 || r[2] != "a2" {
			t.Fatalf("woken with %v", r)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the blocked worker was not woken when a made room")
	}
}
