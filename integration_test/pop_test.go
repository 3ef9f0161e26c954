package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SPEC "DELAY.POP", "Order and time", and "A client that disconnects while
// blocked in a pop is never handed a job".

// TestQuickStart is the README session: a worker waits, a producer adds a job
// due in 500 ms, the worker gets it no sooner and not much later.
func TestQuickStart(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	producer, worker := s.Client(), s.Client()

	ch := popAsync(worker, 10*time.Second, "orders", "0")
	s.waitBlocked(t, 1)
	start := time.Now()
	id := add(t, producer, "orders", 500, "hello")
	r := waitPop(t, ch, 5*time.Second)
	popTriple(t, r, "orders", id, "hello")
	waited := r.at.Sub(start)
	if waited < 500*time.Millisecond {
		t.Errorf("job with delay 500 ms handed out %v after the add was sent: early", waited)
	}
	if waited > 1500*time.Millisecond {
		t.Errorf("job with delay 500 ms handed out %v after the add: too late", waited)
	}
	t.Logf("delay 500 ms, delivered after %v", waited)
}

// TestNeverEarly adds jobs with small delays, each popped by a waiting
// client: none comes out before its delay, whatever the tick.
func TestNeverEarly(t *testing.T) {
	t.Parallel()
	for _, tick := range []string{"1", "7"} {
		t.Run("tick="+tick, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, "--tick", tick)
			tickMs, _ := strconv.Atoi(tick)
			producer, worker := s.Client(), s.Client()
			rng := rand.New(rand.NewPCG(1, 2))
			var late time.Duration
			for i := 0; i < 25; i++ {
				delay := time.Duration(1+rng.IntN(40)) * time.Millisecond
				ch := popAsync(worker, 5*time.Second, "q", "3")
				start := time.Now()
				payload := "job" + strconv.Itoa(i)
				id := add(t, producer, "q", delay.Milliseconds(), payload)
				r := waitPop(t, ch, 6*time.Second)
				popTriple(t, r, "q", id, payload)
				got := r.at.Sub(start)
				if got < delay {
					t.Errorf("job %d with delay %v handed out after %v: early", i, delay, got)
				}
				// within one tick, plus generous scheduling noise
				if limit := delay + time.Duration(tickMs)*time.Millisecond + 500*time.Millisecond; got > limit {
					t.Errorf("job %d with delay %v handed out after %v: later than %v", i, delay, got, limit)
				}
				late = max(late, got-delay)
			}
			t.Logf("tick %s ms: worst lateness %v", tick, late)
		})
	}
}

func TestPopKeysInOrderGiven(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()

	a := add(t, c, "k2", 0, "from-k2")
	b := add(t, c, "k3", 0, "from-k3")
	chain(t, c,
		cmd([]any{"k3", b, "from-k3"}, "DELAY.POP", "k1", "k3", "k2", "0.1"),
		cmd([]any{"k2", a, "from-k2"}, "DELAY.POP", "k1", "k3", "k2", "0.1"),
		cmd(nil, "DELAY.POP", "k1", "k3", "k2", "0.1"),
	)
	// one key, FIFO within the ready list
	x := add(t, c, "k", 0, "x")
	y := add(t, c, "k", 0, "y")
	chain(t, c,
		cmd([]any{"k", x, "x"}, "DELAY.POP", "k", "0"),
		cmd([]any{"k", y, "y"}, "DELAY.POP", "k", "0"),
	)
}

func TestPopTimeout(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()

	for _, timeout := range []string{"0.2", "0.35", "1"} {
		want, _ := time.ParseDuration(timeout + "s")
		start := time.Now()
		expect(t, c, nil, "DELAY.POP", "empty", "other", timeout)
		took := time.Since(start)
		if took < want-5*time.Millisecond || took > want+time.Second {
			t.Errorf("DELAY.POP ... %s: null reply after %v, want about %v", timeout, took, want)
		}
	}
	// a job that becomes ready during the wait ends it
	start := time.Now()
	ch := popAsync(c, 5*time.Second, "q", "2.5")
	id := add(t, s.Client(), "q", 200, "p")
	r := waitPop(t, ch, 5*time.Second)
	popTriple(t, r, "q", id, "p")
	if took := r.at.Sub(start); took > 1500*time.Millisecond {
		t.Errorf("waiter got a 200 ms job after %v", took)
	}
	// the waiter left when it timed out: a later job stays ready
	expect(t, c, nil, "DELAY.POP", "gone", "0.1")
	add(t, c, "gone", 0, "stays")
	expectStats(t, c, "gone", 0, 1, 0)
}

// TestWaitersFIFO: three workers block on one queue in a known order; three
// jobs ready at once go one each, the oldest waiter first.
func TestWaitersFIFO(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	var chans []<-chan popResult
	for i := 0; i < 3; i++ {
		chans = append(chans, popAsync(s.Client(), 10*time.Second, "fifo", "0"))
		s.waitBlocked(t, i+1)
	}
	c := s.Client()
	var ids []string
	for i := 0; i < 3; i++ {
		ids = append(ids, add(t, c, "fifo", 0, "job"+strconv.Itoa(i)))
	}
	for i, ch := range chans {
		r := waitPop(t, ch, 5*time.Second)
		popTriple(t, r, "fifo", ids[i], "job"+strconv.Itoa(i))
	}
	expectStats(t, c, "fifo", 0, 0, 0)
}

// TestBlockOnSeveralKeys: a waiter on k1 k2 gets a job added to k2, and a
// waiter on several keys is served once.
func TestBlockOnSeveralKeys(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()

	ch := popAsync(s.Client(), 10*time.Second, "k1", "k2", "0")
	s.waitBlocked(t, 1)
	id := add(t, c, "k2", 50, "on-k2")
	popTriple(t, waitPop(t, ch, 5*time.Second), "k2", id, "on-k2")

	// served once: a job on k1 afterwards stays ready
	ch = popAsync(s.Client(), 10*time.Second, "k1", "k2", "k3", "0")
	s.waitBlocked(t, 1)
	id = add(t, c, "k3", 0, "on-k3")
	popTriple(t, waitPop(t, ch, 5*time.Second), "k3", id, "on-k3")
	add(t, c, "k1", 0, "left")
	expectStats(t, c, "k1", 0, 1, 0)
	s.waitBlocked(t, 0)
}

// TestDisconnectedWaiterNeverGetsJob: a blocked client that goes away is
// never handed a job; the job waits for, or goes to, a live worker.
func TestDisconnectedWaiterNeverGetsJob(t *testing.T) {
	t.Parallel()

	t.Run("closed connection", func(t *testing.T) {
		t.Parallel()
		s := startServer(t)
		c := s.Client()
		dead := s.dialRaw(t)
		dead.send("DELAY.POP", "q", "0")
		s.waitBlocked(t, 1)
		dead.c.Close()
		s.waitBlocked(t, 0)
		id := add(t, c, "q", 0, "for-the-living")
		expectStats(t, c, "q", 0, 1, 0)
		expect(t, c, []any{"q", id, "for-the-living"}, "DELAY.POP", "q", "1")
		expectStats(t, c, "q", 0, 0, 0)
	})

	t.Run("closed connection ahead of a live waiter", func(t *testing.T) {
		t.Parallel()
		s := startServer(t)
		c := s.Client()
		dead := s.dialRaw(t)
		dead.send("DELAY.POP", "q", "0")
		s.waitBlocked(t, 1)
		live := popAsync(s.Client(), 10*time.Second, "q", "0")
		s.waitBlocked(t, 2)
		dead.c.Close()
		s.waitBlocked(t, 1)
		id := add(t, c, "q", 100, "p")
		popTriple(t, waitPop(t, live, 5*time.Second), "q", id, "p")
		expectStats(t, c, "q", 0, 0, 0)
	})

	t.Run("closed just before the job is added", func(t *testing.T) {
		t.Parallel()
		s := startServer(t)
		c := s.Client()
		// eight clients that will leave, queued ahead of one that stays; the
		// job is added right after they close, before the server may have
		// noticed: it must still reach the live one
		var dead []*rawConn
		for i := 0; i < 8; i++ {
			rc := s.dialRaw(t)
			rc.send("DELAY.POP", "q", "0")
			dead = append(dead, rc)
			s.waitBlocked(t, i+1)
		}
		live := popAsync(s.Client(), 10*time.Second, "q", "0")
		s.waitBlocked(t, 9)
		for _, rc := range dead {
			rc.c.Close()
		}
		id := add(t, c, "q", 0, "p")
		popTriple(t, waitPop(t, live, 5*time.Second), "q", id, "p")
		expectStats(t, c, "q", 0, 0, 0)
	})

	t.Run("closed while a delayed job comes due", func(t *testing.T) {
		t.Parallel()
		s := startServer(t)
		c := s.Client()
		// the job is due while the dead client's close is being noticed
		id := add(t, c, "q", 150, "p")
		dead := s.dialRaw(t)
		dead.send("DELAY.POP", "q", "0")
		s.waitBlocked(t, 1)
		dead.c.Close()
		s.waitBlocked(t, 0)
		expect(t, c, []any{"q", id, "p"}, "DELAY.POP", "q", "2")
	})

	t.Run("redis-cli killed", func(t *testing.T) {
		t.Parallel()
		bin := cliPath(t)
		s := startServer(t)
		c := s.Client()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		proc := exec.CommandContext(ctx, bin, "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port()), "DELAY.POP", "q", "0")
		var out strings.Builder
		proc.Stdout = &out
		if err := proc.Start(); err != nil {
			t.Fatal(err)
		}
		s.waitBlocked(t, 1)
		_ = proc.Process.Kill()
		_ = proc.Wait()
		s.waitBlocked(t, 0)
		id := add(t, c, "q", 0, "after-kill")
		expectStats(t, c, "q", 0, 1, 0)
		expect(t, c, []any{"q", id, "after-kill"}, "DELAY.POP", "q", "1")
		if out.Len() > 0 {
			t.Errorf("killed redis-cli printed %q", out.String())
		}
	})

	t.Run("client context cancelled", func(t *testing.T) {
		t.Parallel()
		s := startServer(t)
		c := s.Client()
		// go-redis drops the connection when the context of a blocked call ends
		gone := s.Client()
		ch := popAsync(gone, 300*time.Millisecond, "q", "0")
		r := waitPop(t, ch, 5*time.Second)
		if r.err == nil || errors.Is(r.err, redis.Nil) {
			t.Fatalf("want a client-side timeout, got %v %v", r.reply, r.err)
		}
		s.waitBlocked(t, 0)
		id := add(t, c, "q", 0, "p")
		expect(t, c, []any{"q", id, "p"}, "DELAY.POP", "q", "1")
	})
}

// TestManyProducersAndConsumers: 50 producers add 5000 jobs with random
// delays over 3 queues while 20 consumers pop; every job is delivered exactly
// once, none early.
func TestManyProducersAndConsumers(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const (
		producers = 50
		consumers = 20
		perProd   = 100
		total     = producers * perProd
	)
	queues := []string{"qa", "qb", "qc"}

	type sent struct{ key, payload string }
	var (
		mu       sync.Mutex
		produced = map[string]sent{} // id -> what was added
		received = map[string]int{}  // id -> times popped
		got      = map[string]sent{} // id -> what was popped
		early    []string
		errs     []string
		nrecv    atomic.Int64
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(errs) < 20 {
			errs = append(errs, fmt.Sprintf(format, args...))
		}
	}
	deadline := time.Now().Add(40 * time.Second)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()

	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		c := s.Client()
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(p), 7))
			for j := 0; j < perProd; j++ {
				key := queues[rng.IntN(len(queues))]
				delay := rng.IntN(201)
				// the payload carries when it was sent and its delay, so a
				// consumer can tell an early delivery
				payload := fmt.Sprintf("%d/%d/%d/%d", p, j, time.Now().UnixNano(), delay)
				id, err := c.Do(ctx, "DELAY.ADD", key, delay, payload).Text()
				if err != nil {
					fail("producer %d: DELAY.ADD: %v", p, err)
					return
				}
				mu.Lock()
				if _, dup := produced[id]; dup {
					errs = append(errs, fmt.Sprintf("id %q replied to two adds", id))
				}
				produced[id] = sent{key, payload}
				mu.Unlock()
			}
		})
	}
	var cwg sync.WaitGroup
	for k := 0; k < consumers; k++ {
		c := s.Client()
		cwg.Go(func() {
			for nrecv.Load() < total && time.Now().Before(deadline) {
				v, err := c.Do(ctx, "DELAY.POP", "qa", "qb", "qc", "0.5").Slice()
				if errors.Is(err, redis.Nil) {
					continue
				}
				now := time.Now().UnixNano()
				if err != nil {
					fail("consumer %d: DELAY.POP: %v", k, err)
					return
				}
				if len(v) != 3 {
					fail("consumer %d: DELAY.POP replied %s", k, showValue(v))
					continue
				}
				key, _ := v[0].(string)
				id, _ := v[1].(string)
				payload, _ := v[2].(string)
				parts := strings.Split(payload, "/")
				if len(parts) == 4 {
					sentAt, _ := strconv.ParseInt(parts[2], 10, 64)
					delay, _ := strconv.ParseInt(parts[3], 10, 64)
					if now < sentAt+delay*int64(time.Millisecond) {
						mu.Lock()
						early = append(early, fmt.Sprintf("%s (delay %d ms) after %v", id, delay, time.Duration(now-sentAt)))
						mu.Unlock()
					}
				}
				mu.Lock()
				received[id]++
				got[id] = sent{key, payload}
				mu.Unlock()
				nrecv.Add(1)
			}
		})
	}
	wg.Wait()
	cwg.Wait()

	for _, e := range errs {
		t.Error(e)
	}
	if len(early) > 0 {
		t.Errorf("%d jobs handed out before their delay, e.g. %v", len(early), early[:min(5, len(early))])
	}
	var missing, dups []string
	for id := range produced {
		switch n := received[id]; {
		case n == 0:
			missing = append(missing, id)
		case n > 1:
			dups = append(dups, fmt.Sprintf("%s x%d", id, n))
		}
	}
	var unknown []string
	for id, g := range got {
		p, ok := produced[id]
		if !ok {
			unknown = append(unknown, id)
		} else if p != g {
			t.Errorf("id %s: popped [%s %q], but it was added to %s with %q", id, g.key, g.payload, p.key, p.payload)
		}
	}
	if len(produced) != total {
		t.Errorf("%d distinct ids for %d adds", len(produced), total)
	}
	if len(missing)+len(dups)+len(unknown) > 0 {
		t.Errorf("%d jobs never delivered (e.g. %v), %d delivered more than once (e.g. %v), %d unknown ids popped (e.g. %v)",
			len(missing), missing[:min(5, len(missing))], len(dups), dups[:min(5, len(dups))], len(unknown), unknown[:min(5, len(unknown))])
	}
	c := s.Client()
	for _, q := range queues {
		expectStats(t, c, q, 0, 0, 0)
	}
	expect(t, c, 0, "DBSIZE")
}
