package worker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/delayd/delayd/worker"
)

var quiet = slog.New(slog.DiscardHandler)

var runs atomic.Int64

// fresh is a queue name no earlier run of a test used (the server lives
// for the whole process, -count=n included).
func fresh(name string) string { return fmt.Sprintf("%s-%d", name, runs.Add(1)) }

func client(t *testing.T) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: delaydAddr})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// run starts w and returns a function that stops it (Shutdown with limit)
// and returns Shutdown's error.
func run(t *testing.T, w *worker.Worker, limit time.Duration) func() error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	var once sync.Once
	var err error
	stop := func() error {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), limit)
			defer cancel()
			err = w.Shutdown(ctx)
			if rerr := <-done; rerr != nil {
				t.Errorf("Run: %v", rerr)
			}
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

func addN(t *testing.T, c *worker.Client, queue string, n int, opts ...worker.Option) {
	t.Helper()
	for i := 0; i < n; i++ {
		o := append([]worker.Option{worker.ID(fmt.Sprintf("j%d", i)), worker.AckTimeout(30 * time.Second)}, opts...)
		if _, err := c.Add(context.Background(), queue, []byte("p"), o...); err != nil {
			t.Fatal(err)
		}
	}
}

func waitFor(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", limit, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func stats(t *testing.T, c *worker.Client, queue string) *worker.QueueStats {
	t.Helper()
	s, err := c.Stats(context.Background(), queue)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A fetch never takes more jobs than there are free slots: with 3 slots
// busy, 7 jobs stay ready on the server, none waits in the worker.
func TestFetchTakesOnlyFreeSlots(t *testing.T) {
	q := fresh("slots")
	rdb := client(t)
	c := worker.NewClient(rdb)
	addN(t, c, q, 10)
	release := make(chan struct{})
	var running, done atomic.Int32
	reg := prometheus.NewRegistry()
	m := worker.NewMetrics(reg)
	w := worker.New(rdb, worker.Options{Concurrency: 3, Logger: quiet, Metrics: m})
	w.HandleFunc(q, func(ctx context.Context, job *worker.Job) error {
		running.Add(1)
		<-release
		done.Add(1)
		return nil
	})
	run(t, w, 5*time.Second)
	waitFor(t, 5*time.Second, "3 jobs running", func() bool { return running.Load() == 3 })
	time.Sleep(50 * time.Millisecond)
	if s := stats(t, c, q); s.Reserved != 3 || s.Ready != 7 || running.Load() != 3 {
		t.Fatalf("with 3 slots busy: %d reserved, %d ready, %d running; want 3, 7, 3", s.Reserved, s.Ready, running.Load())
	}
	close(release)
	waitFor(t, 5*time.Second, "every job acked", func() bool {
		s := stats(t, c, q)
		return s.Ready+s.Reserved+s.Delayed == 0
	})
	// (A queue's counters go with it once it is empty and nobody waits on
	// it, so the jobs are asked for one by one.)
	for i := 0; i < 10; i++ {
		if j, err := c.Get(context.Background(), q, fmt.Sprintf("j%d", i)); j != nil || err != nil {
			t.Fatalf("job j%d after the run: %+v %v, want acked", i, j, err)
		}
	}
	if got := testutil.ToFloat64(m.Processed(q)); got != 10 {
		t.Fatalf("processed %v, want 10", got)
	}
}

// roundTrips counts what a client sends: each Process and each pipeline
// is one write and one round trip.
type roundTrips struct {
	mu        sync.Mutex
	alone     map[string]int // commands sent on their own, by name
	pipelines map[string]int // pipelines, by their commands' names joined
}

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.mu.Lock()
		r.alone[strings.ToUpper(cmd.Name())]++
		r.mu.Unlock()
		return next(ctx, cmd)
	}
}
func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var names []string
		for _, c := range cmds {
			names = append(names, strings.ToUpper(c.Name()))
		}
		r.mu.Lock()
		r.pipelines[strings.Join(names, "+")]++
		r.mu.Unlock()
		return next(ctx, cmds)
	}
}

// The acks of finished jobs go with the next fetch: a busy worker pays
// fewer round trips than jobs, and sends no ACK on its own while it has
// jobs to fetch.
func TestAcksRideWithTheNextFetch(t *testing.T) {
	q := fresh("piggy")
	rdb := client(t)
	c := worker.NewClient(rdb)
	const n = 500
	addN(t, c, q, n)
	rt := &roundTrips{alone: map[string]int{}, pipelines: map[string]int{}}
	wrdb := redis.NewClient(&redis.Options{Addr: delaydAddr})
	defer wrdb.Close()
	wrdb.AddHook(rt)
	var handled atomic.Int32
	w := worker.New(wrdb, worker.Options{Logger: quiet})
	w.HandleFunc(q, func(ctx context.Context, job *worker.Job) error {
		handled.Add(1)
		return nil
	})
	stop := run(t, w, 5*time.Second)
	waitFor(t, 10*time.Second, "every job acked", func() bool {
		s := stats(t, c, q)
		return s.Ready+s.Reserved == 0
	})
	stop()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	fetches := rt.alone["DELAY.MPOP"] + rt.pipelines["DELAY.ACK+DELAY.MPOP"]
	total := fetches + rt.alone["DELAY.ACK"]
	t.Logf("%d jobs: MPOP alone %d, ACK+MPOP %d, ACK alone %d", n, rt.alone["DELAY.MPOP"], rt.pipelines["DELAY.ACK+DELAY.MPOP"], rt.alone["DELAY.ACK"])
	if rt.pipelines["DELAY.ACK+DELAY.MPOP"] == 0 {
		t.Fatal("no ACK went with a fetch")
	}
	if total > n/2 {
		t.Fatalf("%d round trips for %d jobs, want at most one for two", total, n)
	}
	// Acks go alone when a fetch takes longer than a few round trips (a
	// loaded machine, -race); most must still ride with a fetch.
	if alone := rt.alone["DELAY.ACK"]; alone > rt.pipelines["DELAY.ACK+DELAY.MPOP"]/2 {
		t.Fatalf("%d ACKs sent alone while jobs waited, against %d with a fetch", alone, rt.pipelines["DELAY.ACK+DELAY.MPOP"])
	}
	if handled.Load() != n {
		t.Fatalf("handled %d, want %d", handled.Load(), n)
	}
}

// Jobs that come due one at a time, each taken by a fetch that was parked
// on the queue: the handler ends before the next fetch goes out, so its
// ack rides with it instead of going alone a few ms later (a round trip
// and a timer a job).
func TestAcksOfJobsDueOneByOneRideWithTheFetch(t *testing.T) {
	q := fresh("onebyone")
	rdb := client(t)
	c := worker.NewClient(rdb)
	const n = 40
	base := time.Now().Add(300 * time.Millisecond)
	for i := 0; i < n; i++ {
		if _, err := c.Add(context.Background(), q, []byte("p"), worker.ID(fmt.Sprintf("j%d", i)),
			worker.AckTimeout(30*time.Second), worker.At(base.Add(time.Duration(i)*10*time.Millisecond))); err != nil {
			t.Fatal(err)
		}
	}
	rt := &roundTrips{alone: map[string]int{}, pipelines: map[string]int{}}
	wrdb := redis.NewClient(&redis.Options{Addr: delaydAddr})
	defer wrdb.Close()
	wrdb.AddHook(rt)
	var handled atomic.Int32
	w := worker.New(wrdb, worker.Options{Logger: quiet})
	w.HandleFunc(q, func(ctx context.Context, job *worker.Job) error {
		handled.Add(1)
		return nil
	})
	stop := run(t, w, 5*time.Second)
	waitFor(t, 10*time.Second, "every job acked", func() bool {
		s := stats(t, c, q)
		return handled.Load() == n && s.Ready+s.Reserved+s.Delayed == 0
	})
	stop()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	t.Logf("%d jobs due 10 ms apart: ACK+MPOP %d, ACK alone %d", n, rt.pipelines["DELAY.ACK+DELAY.MPOP"], rt.alone["DELAY.ACK"])
	if alone := rt.alone["DELAY.ACK"]; alone > n/4 {
		t.Fatalf("%d of %d acks sent alone, want most with the next fetch", alone, n)
	}
}

// A failing job is given back with the policy's delay (read in its next
// delivery's due time) and its error text, and dead-lettered at its RETRY
// limit with the last text as its reason.
func TestFailureBacksOffAndDeadLetters(t *testing.T) {
	q := fresh("fail")
	rdb := client(t)
	c := worker.NewClient(rdb)
	ctx := context.Background()
	if _, err := c.Add(ctx, q, []byte("x"), worker.ID("f1"), worker.AckTimeout(30*time.Second),
		worker.Retry(2), worker.DeadLetter(q+":dead")); err != nil {
		t.Fatal(err)
	}
	policy := func(deliveries int, err error, job *worker.Job) time.Duration {
		return time.Duration(deliveries) * 150 * time.Millisecond
	}
	type delivery struct {
		at         time.Time
		due        time.Time
		deliveries int
		lastError  string
	}
	var mu sync.Mutex
	var seen []delivery
	w := worker.New(rdb, worker.Options{Logger: quiet, Backoff: policy})
	w.HandleFunc(q, func(ctx context.Context, job *worker.Job) error {
		info, err := c.Get(ctx, job.Queue, job.ID)
		if err != nil || info == nil {
			t.Errorf("GET of a running job: %v %v", info, err)
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, delivery{at: time.Now(), due: info.Due, deliveries: info.Deliveries, lastError: info.Error})
		return fmt.Errorf("boom %d", len(seen))
	})
	run(t, w, 5*time.Second)
	var dead *worker.JobInfo
	waitFor(t, 5*time.Second, "the job dead-lettered", func() bool {
		dead, _ = c.Get(ctx, q+":dead", "f1")
		return dead != nil
	})
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 3 {
		t.Fatalf("%d deliveries, want 3 (RETRY 2)", len(seen))
	}
	for i := 1; i < 3; i++ {
		want := time.Duration(i) * 150 * time.Millisecond
		// The NACK is sent after the handler returned, so the due time is
		// the policy's delay after the handler's failure, plus the GET and
		// NACK round trips.
		gap := seen[i].due.Sub(seen[i-1].at)
		if gap < want-2*time.Millisecond || gap > want+100*time.Millisecond {
			t.Errorf("delivery %d due %v after the failure before it, want %v", i+1, gap, want)
		}
		if seen[i].at.Before(seen[i].due) {
			t.Errorf("delivery %d ran %v before its due time", i+1, seen[i].due.Sub(seen[i].at))
		}
		if seen[i].deliveries != i+1 || seen[i].lastError != fmt.Sprintf("boom %d", i) {
			t.Errorf("delivery %d: deliveries %d, error %q", i+1, seen[i].deliveries, seen[i].lastError)
		}
	}
	if dead.Error != "boom 3" || dead.Origin != q {
		t.Fatalf("dead letter: error %q origin %q, want boom 3 from fail", dead.Error, dead.Origin)
	}
}

func TestSkipRetryAcksAndPanicsAreRetried(t *testing.T) {
	q := fresh("skip")
	rdb := client(t)
	c := worker.NewClient(rdb)
	ctx := context.Background()
	c.Add(ctx, q, []byte("bad"), worker.ID("s1"), worker.AckTimeout(30*time.Second))
	c.Add(ctx, q, []byte("panic"), worker.ID("p1"), worker.AckTimeout(30*time.Second), worker.Retry(0), worker.DeadLetter(q+":dead"))
	reg := prometheus.NewRegistry()
	m := worker.NewMetrics(reg)
	w := worker.New(rdb, worker.Options{Logger: quiet, Metrics: m})
	w.HandleFunc(q, func(ctx context.Context, job *worker.Job) error {
		if string(job.Payload) == "panic" {
			var m map[string]int
			m["x"] = 1 // a nil map: panics
		}
		return fmt.Errorf("cannot parse %q: %w", job.Payload, worker.SkipRetry)
	})
	run(t, w, 5*time.Second)
	var dead *worker.JobInfo
	waitFor(t, 5*time.Second, "the panicking job dead-lettered", func() bool {
		dead, _ = c.Get(ctx, q+":dead", "p1")
		return dead != nil
	})
	if !strings.Contains(dead.Error, "panic: assignment to entry in nil map") {
		t.Errorf("the panic's reason: %q", dead.Error)
	}
	waitFor(t, 5*time.Second, "the skipped job acked", func() bool {
		j, _ := c.Get(ctx, q, "s1")
		return j == nil
	})
	if d := testutil.ToFloat64(m.Discarded(q)); d != 1 {
		t.Errorf("discarded %v, want 1", d)
	}
	if f := testutil.ToFloat64(m.Failed(q)); f != 2 {
		t.Errorf("failed %v, want 2", f)
	}
}

// Shutdown: handlers finish and are acked; one still running at the
// deadline has its context cancelled and its job given back at once.
func TestShutdownDeadlineGivesBack(t *testing.T) {
	q := fresh("stop")
	rdb := client(t)
	c := worker.NewClient(rdb)
	ctx := context.Background()
	c.Add(ctx, q, []byte("quick"), worker.ID("quick"), worker.AckTimeout(30*time.Second))
	c.Add(ctx, q, []byte("stuck"), worker.ID("stuck"), worker.AckTimeout(30*time.Second))
	var started atomic.Int32
	cancelled := make(chan struct{})
	// The stop waits for a parked fetch past its deadline: at most BlockTime.
	w := worker.New(rdb, worker.Options{Logger: quiet, BlockTime: 200 * time.Millisecond})
	w.HandleFunc(q, func(ctx context.Context, job *worker.Job) error {
		started.Add(1)
		if string(job.Payload) == "quick" {
			time.Sleep(100 * time.Millisecond)
			return nil
		}
		<-ctx.Done()
		close(cancelled)
		time.Sleep(200 * time.Millisecond) // ignores the stop a while: its job is back already
		return nil
	})
	stop := run(t, w, 400*time.Millisecond)
	waitFor(t, 5*time.Second, "both jobs running", func() bool { return started.Load() == 2 })
	begin := time.Now()
	if err := stop(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown: %v, want the deadline's error", err)
	}
	if took := time.Since(begin); took > 900*time.Millisecond {
		t.Fatalf("Shutdown took %v with a 400ms deadline and fetches of 200ms", took)
	}
	select {
	case <-cancelled:
	default:
		t.Fatal("the stuck handler's context was not cancelled")
	}
	if j, _ := c.Get(ctx, q, "quick"); j != nil {
		t.Fatalf("the quick job after the stop: %+v, want acked", j)
	}
	j, _ := c.Get(ctx, q, "stuck")
	if j == nil || j.State != "ready" || j.Error != "worker shutting down" {
		t.Fatalf("the stuck job after the stop: %+v, want ready with reason worker shutting down", j)
	}
}
