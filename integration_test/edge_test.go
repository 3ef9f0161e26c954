package integration

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Corners of the commands above that a client library or a worker fleet
// runs into: pipelines, commands sent while blocked, a key named twice.

// TestPipeline sends many commands in one write: every reply comes back, in
// order.
func TestPipeline(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()

	const n = 5000
	ctx := ctxT(t, 10*time.Second)
	pipe := c.Pipeline()
	for i := 0; i < n; i++ {
		pipe.Do(ctx, "DELAY.ADD", "q", 0, "p"+strconv.Itoa(i))
	}
	cmds, err := pipe.Exec(ctx)
	if err != nil {
		t.Fatalf("pipeline of %d DELAY.ADD: %v", n, err)
	}
	ids := make([]string, n)
	for i, cmd := range cmds {
		id, err := cmd.(interface{ Text() (string, error) }).Text()
		if err != nil || id == "" {
			t.Fatalf("pipelined DELAY.ADD %d: %q %v", i, id, err)
		}
		ids[i] = id
	}
	expectStats(t, c, "q", 0, n, 0)
	expect(t, c, []any{[]any{ids[0], "p0"}, []any{ids[1], "p1"}}, "DELAY.PEEK", "q", 2)

	// pops pipelined behind adds on the same connection
	pipe = c.Pipeline()
	for i := 0; i < 3; i++ {
		pipe.Do(ctx, "DELAY.POP", "q", "1")
	}
	cmds, err = pipe.Exec(ctx)
	if err != nil {
		t.Fatalf("pipeline of DELAY.POP: %v", err)
	}
	for i, cmd := range cmds {
		v, _ := cmd.(interface{ Slice() ([]any, error) }).Slice()
		if msg := matchValue([]any{"q", ids[i], "p" + strconv.Itoa(i)}, v); msg != "" {
			t.Errorf("pipelined DELAY.POP %d: %s", i, msg)
		}
	}
}

// TestCommandsSentWhileBlocked: a client that sends more commands while
// blocked in DELAY.POP gets their replies after the pop's, in order (Redis
// queues them the same way).
func TestCommandsSentWhileBlocked(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()
	rc := s.dialRaw(t)

	rc.write("*3\r\n$9\r\nDELAY.POP\r\n$1\r\nq\r\n$1\r\n0\r\n*1\r\n$4\r\nPING\r\n")
	s.waitBlocked(t, 1)
	rc.write("*2\r\n$4\r\nECHO\r\n$5\r\nafter\r\n")
	// nothing may come back while the pop waits
	_ = rc.c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if b, err := rc.r.Peek(1); err == nil {
		t.Fatalf("a reply (%q...) arrived while DELAY.POP q 0 was still blocked", b)
	}
	id := add(t, c, "q", 0, "job")
	r := rc.read()
	if r.kind != '*' || len(r.elems) != 3 || r.elems[1].str != id || r.elems[2].str != "job" {
		t.Fatalf("DELAY.POP: got %s, want [q %s job]", r, id)
	}
	if line := rc.readLine(); line != "+PONG" {
		t.Errorf("PING sent behind the blocked pop: got %q", line)
	}
	if r := rc.read(); r.str != "after" {
		t.Errorf("ECHO sent while blocked: got %s", r)
	}
	s.waitBlocked(t, 0)
}

// TestPopSameKeyTwice: DELAY.POP q q 0 is legal (BLPOP allows it); the client
// is served once.
func TestPopSameKeyTwice(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()

	w := popAsync(s.Client(), 10*time.Second, "q", "q", "0")
	time.Sleep(150 * time.Millisecond) // blocked_clients may count per key here
	id1 := add(t, c, "q", 0, "one")
	popTriple(t, waitPop(t, w, 5*time.Second), "q", id1, "one")
	id2 := add(t, c, "q", 0, "two")
	expectStats(t, c, "q", 0, 1, 0)
	expect(t, c, []any{"q", id2, "two"}, "DELAY.POP", "q", "q", "0.1")
	s.waitBlocked(t, 0)
}

// TestCancelWhileWaiting: a job cancelled before its time never reaches the
// worker waiting for it.
func TestCancelWhileWaiting(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()

	w := popAsync(s.Client(), 5*time.Second, "q", "0.6")
	s.waitBlocked(t, 1)
	id := add(t, c, "q", 200, "cancelled")
	expect(t, c, 1, "DELAY.CANCEL", "q", id)
	if r := waitPop(t, w, 3*time.Second); r.err == nil {
		t.Errorf("waiter got %s, a cancelled job", showValue(r.reply))
	}
	expectStats(t, c, "q", 0, 0, 0)
}

// TestExtremeTimes: far-future and long-past times do not break the server.
func TestExtremeTimes(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()

	year9999 := int64(253402300799999)
	far := bulkID(t, "DELAY.ADDAT year 9999", do(t, c, "DELAY.ADDAT", "q", year9999, "far"))
	expectJob(t, c, "q", far, map[string]string{"state": "delayed", "due": strconv.FormatInt(year9999, 10)}, 0, 0)
	epoch := bulkID(t, "DELAY.ADDAT 0", do(t, c, "DELAY.ADDAT", "q", 0, "epoch"))
	expectJob(t, c, "q", epoch, map[string]string{"state": "ready", "due": "0"}, 0, 0)
	// a delay of ten years is an ordinary delayed job
	decade := bulkID(t, "DELAY.ADD decade", do(t, c, "DELAY.ADD", "q", int64(10*365*24*3600*1000), "decade"))
	expectJob(t, c, "q", decade, map[string]string{"state": "delayed"}, 0, 0)
	// delays so large that now+delay overflows 64 bits: an error, or a job
	// that stays delayed; never one that is ready at once
	for _, d := range []string{"9223372036854775807", "9223372036854775000", "9000000000000000000"} {
		v, err := c.Do(ctxT(t, opTimeout), "DELAY.ADD", "huge", d, "huge").Result()
		if err != nil {
			continue
		}
		m := job(t, c, "huge", bulkID(t, "DELAY.ADD huge "+d, v))
		if m["state"] != "delayed" {
			t.Errorf("DELAY.ADD huge %s huge: state %v, due %v; want an error or a delayed job", d, m["state"], m["due"])
		}
	}
	expect(t, c, nil, "DELAY.POP", "huge", "0.05")
	// the extreme absolute times are just far future and far past
	expect(t, c, anyReply{}, "DELAY.ADDAT", "far", "9223372036854775807", "max-at")
	expectStats(t, c, "far", 1, 0, 0)
	// the smallest 64-bit time: out of range, or a past time (ready now)
	if v, err := c.Do(ctxT(t, opTimeout), "DELAY.ADDAT", "past", "-9223372036854775808", "min-at").Result(); err == nil {
		expect(t, c, []any{"past", bulkID(t, "DELAY.ADDAT min", v), "min-at"}, "DELAY.POP", "past", "0.1")
	}

	expect(t, c, "PONG", "PING")
	expect(t, c, []any{"q", epoch, "epoch"}, "DELAY.POP", "q", "0.1")
	// the wheel still works for ordinary jobs after those
	id := add(t, c, "q", 30, "normal")
	popTriple(t, waitPop(t, popAsync(c, 3*time.Second, "q", "2"), 4*time.Second), "q", id, "normal")
}

// TestPopTimeoutRace: workers whose short timeouts keep expiring while jobs
// arrive; a job that becomes ready as a wait times out goes to someone,
// exactly once.
func TestPopTimeoutRace(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const total = 2000
	var (
		mu   sync.Mutex
		seen = map[string]int{}
		errs []string
		got  atomic.Int64
	)
	deadline := time.Now().Add(20 * time.Second)
	var wg sync.WaitGroup
	for k := 0; k < 16; k++ {
		c := s.Client()
		timeout := []string{"0.001", "0.005", "0.01", "0.02"}[k%4]
		wg.Go(func() {
			for got.Load() < total && time.Now().Before(deadline) {
				ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
				v, err := c.Do(ctx, "DELAY.POP", "q", timeout).Slice()
				cancel()
				if errors.Is(err, redis.Nil) {
					continue
				}
				mu.Lock()
				if err != nil {
					errs = append(errs, err.Error())
				} else {
					seen[fmt.Sprint(v[1])]++
				}
				mu.Unlock()
				if err != nil {
					return
				}
				got.Add(1)
			}
		})
	}
	c := s.Client()
	ids := make([]string, 0, total)
	for i := 0; i < total; i++ {
		ids = append(ids, add(t, c, "q", int64(i%4), "p"))
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("DELAY.POP errors: %v", errs[:min(5, len(errs))])
	}
	var lost, dup int
	for _, id := range ids {
		switch seen[id] {
		case 0:
			lost++
		case 1:
		default:
			dup++
		}
	}
	if lost+dup > 0 {
		d, r, _ := stats(t, c, "q")
		t.Errorf("%d of %d jobs never popped, %d popped twice (DELAY.STATS q: delayed=%d ready=%d)", lost, total, dup, d, r)
	}
}
