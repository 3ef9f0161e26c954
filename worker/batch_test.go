package worker_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/delayd/delayd/worker"
)

// A batch handler gets each fetch's jobs in one call, at most BatchSize
// of them, and their acks go with the next fetch: no ACK goes alone while
// jobs are waiting.
func TestBatchHandlerTakesAFetchInOneCall(t *testing.T) {
	q := fresh("batch")
	rdb := client(t)
	c := worker.NewClient(rdb)
	const n = 200
	addN(t, c, q, n)
	rt := &roundTrips{alone: map[string]int{}, pipelines: map[string]int{}}
	wrdb := redis.NewClient(&redis.Options{Addr: delaydAddr})
	defer wrdb.Close()
	wrdb.AddHook(rt)
	var mu sync.Mutex
	var sizes []int
	seen := map[string]int{}
	m := worker.NewMetrics(prometheus.NewRegistry())
	w := worker.New(wrdb, worker.Options{BatchSize: 16, Logger: quiet, Metrics: m})
	w.HandleBatchFunc(q, func(ctx context.Context, jobs []*worker.Job) error {
		mu.Lock()
		defer mu.Unlock()
		sizes = append(sizes, len(jobs))
		for _, j := range jobs {
			seen[j.ID]++
		}
		return nil
	})
	stop := run(t, w, 5*time.Second)
	waitFor(t, 10*time.Second, "every job acked", func() bool {
		s := stats(t, c, q)
		return s.Ready+s.Reserved == 0
	})
	stop()
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != n {
		t.Fatalf("%d jobs handled, want %d", len(seen), n)
	}
	for id, k := range seen {
		if k != 1 {
			t.Fatalf("job %s handled %d times", id, k)
		}
	}
	for _, s := range sizes {
		if s < 1 || s > 16 {
			t.Fatalf("a batch of %d with BatchSize 16", s)
		}
	}
	// The jobs were all ready before the worker started: full batches.
	if len(sizes) > n/16+1 {
		t.Fatalf("%d batches for %d ready jobs: %v", len(sizes), n, sizes)
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.alone["DELAY.ACK"] > 1 || rt.pipelines["DELAY.ACK+DELAY.MPOP"] < len(sizes)-1 {
		t.Fatalf("%d batches: ACK alone %d, ACK+MPOP %d; want every ack with the next fetch", len(sizes), rt.alone["DELAY.ACK"], rt.pipelines["DELAY.ACK+DELAY.MPOP"])
	}
	if got := testutil.ToFloat64(m.Processed(q)); got != n {
		t.Fatalf("processed %v, want %d", got, n)
	}
}

// BatchErrors settles each job by its own error: nil acks, SkipRetry acks,
// an error gives the job back with its backoff and text.
func TestBatchErrorsSettleEachJob(t *testing.T) {
	q := fresh("batcherr")
	rdb := client(t)
	c := worker.NewClient(rdb)
	ctx := context.Background()
	for _, id := range []string{"ok", "skip", "fail"} {
		c.Add(ctx, q, []byte(id), worker.ID(id), worker.AckTimeout(30*time.Second))
	}
	hour := func(int, error, *worker.Job) time.Duration { return time.Hour }
	var batches atomic.Int32
	w := worker.New(rdb, worker.Options{BatchSize: 16, Logger: quiet, Backoff: hour})
	w.HandleBatchFunc(q, func(ctx context.Context, jobs []*worker.Job) error {
		batches.Add(1)
		errs := make(worker.BatchErrors, len(jobs))
		for i, j := range jobs {
			switch string(j.Payload) {
			case "skip":
				errs[i] = fmt.Errorf("bad: %w", worker.SkipRetry)
			case "fail":
				errs[i] = errors.New("down")
			}
		}
		return fmt.Errorf("some failed: %w", errs)
	})
	run(t, w, 5*time.Second)
	waitFor(t, 5*time.Second, "ok and skip acked, fail given back", func() bool {
		ok, _ := c.Get(ctx, q, "ok")
		skip, _ := c.Get(ctx, q, "skip")
		fail, _ := c.Get(ctx, q, "fail")
		return ok == nil && skip == nil && fail != nil && fail.State == "delayed"
	})
	fail, _ := c.Get(ctx, q, "fail")
	if fail.Error != "down" || time.Until(fail.Due) < 59*time.Minute {
		t.Fatalf("the failed job: %+v, want delayed an hour with reason down", fail)
	}
	if b := batches.Load(); b != 1 {
		t.Fatalf("%d batches for 3 ready jobs, want 1", b)
	}
}

// A panic, or an error that is not a BatchErrors of the batch's length,
// fails every job of the batch, each with the error's text.
func TestBatchPanicFailsEveryJob(t *testing.T) {
	q := fresh("batchpanic")
	rdb := client(t)
	c := worker.NewClient(rdb)
	ctx := context.Background()
	for _, id := range []string{"a", "b"} {
		c.Add(ctx, q, []byte(id), worker.ID(id), worker.AckTimeout(30*time.Second), worker.Retry(1), worker.DeadLetter(q+":dead"))
	}
	var calls atomic.Int32
	now := func(int, error, *worker.Job) time.Duration { return 0 }
	w := worker.New(rdb, worker.Options{BatchSize: 16, Logger: quiet, Backoff: now})
	w.HandleBatchFunc(q, func(ctx context.Context, jobs []*worker.Job) error {
		if calls.Add(1) == 1 {
			panic("boom")
		}
		return worker.BatchErrors{errors.New("only one")} // two jobs: fails both
	})
	run(t, w, 5*time.Second)
	waitFor(t, 5*time.Second, "both jobs dead-lettered", func() bool {
		a, _ := c.Get(ctx, q+":dead", "a")
		b, _ := c.Get(ctx, q+":dead", "b")
		return a != nil && b != nil
	})
	a, _ := c.Get(ctx, q+":dead", "a")
	if a.Error != "1 of 1 jobs failed: only one" || a.Deliveries != 2 {
		t.Fatalf("dead job a: %+v, want 2 deliveries and the BatchErrors text", a)
	}
}

// A batch still running at the stop's deadline has its context cancelled
// and every job given back at once; the stop does not wait for it.
func TestBatchShutdownDeadlineGivesBack(t *testing.T) {
	q := fresh("batchstop")
	rdb := client(t)
	c := worker.NewClient(rdb)
	ctx := context.Background()
	for _, id := range []string{"a", "b", "c"} {
		c.Add(ctx, q, []byte(id), worker.ID(id), worker.AckTimeout(30*time.Second))
	}
	started := make(chan struct{})
	release := make(chan struct{})
	w := worker.New(rdb, worker.Options{BatchSize: 16, Logger: quiet, BlockTime: 200 * time.Millisecond})
	w.HandleBatchFunc(q, func(ctx context.Context, jobs []*worker.Job) error {
		close(started)
		<-ctx.Done()
		<-release // ignores the stop: its jobs are back already
		return nil
	})
	defer close(release)
	stop := run(t, w, 300*time.Millisecond)
	<-started
	begin := time.Now()
	if err := stop(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown: %v, want the deadline's error", err)
	}
	if took := time.Since(begin); took > 900*time.Millisecond {
		t.Fatalf("Shutdown took %v with a 300ms deadline", took)
	}
	for _, id := range []string{"a", "b", "c"} {
		j, _ := c.Get(ctx, q, id)
		if j == nil || j.State != "ready" || j.Error != "worker shutting down" {
			t.Fatalf("job %s after the stop: %+v, want ready with reason worker shutting down", id, j)
		}
	}
}

// A batch that ends after the stop began is acknowledged at once, not when
// the stop's last flush comes after every other queue's handlers.
func TestBatchEndingInTheStopIsAckedAtOnce(t *testing.T) {
	qb, qs := fresh("batchlate"), fresh("slow")
	rdb := client(t)
	c := worker.NewClient(rdb)
	addN(t, c, qb, 3)
	addN(t, c, qs, 1)
	batchIn, slowIn := make(chan struct{}), make(chan struct{})
	releaseBatch, releaseSlow := make(chan struct{}), make(chan struct{})
	w := worker.New(rdb, worker.Options{BatchSize: 16, Logger: quiet})
	w.HandleBatchFunc(qb, func(ctx context.Context, jobs []*worker.Job) error {
		close(batchIn)
		<-releaseBatch
		return nil
	})
	w.HandleFunc(qs, func(ctx context.Context, job *worker.Job) error {
		close(slowIn)
		<-releaseSlow
		return nil
	})
	defer close(releaseSlow)
	stop := run(t, w, 10*time.Second)
	<-batchIn
	<-slowIn
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	time.Sleep(50 * time.Millisecond) // the stop has begun: no fetch will carry the batch's acks
	close(releaseBatch)
	waitFor(t, 2*time.Second, "the batch acked while the slow job still runs", func() bool {
		return stats(t, c, qb).Reserved == 0
	})
	select {
	case err := <-stopped:
		t.Fatalf("the stop ended (%v) with the slow job running", err)
	default:
	}
}
