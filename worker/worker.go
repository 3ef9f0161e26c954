package worker

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Options configure a Worker. The zero value is a worker with the defaults.
type Options struct {
	// Concurrency is how many jobs of each queue run at once (default 10).
	// A fetch takes at most the free slots, so nothing waits unstarted in
	// the worker. With 1, jobs are taken one at a time. A queue of
	// HandleBatch runs one batch at a time and ignores it (see BatchSize).
	Concurrency int

	// BatchSize is the most jobs a HandleBatch call gets, one fetch's
	// (default 64). A fetch costs the worker about as much as 30 jobs'
	// handling (a round trip through the client and the kernel), so a
	// batch of 16 pays that cost twice a job's own; 64 pays it once in
	// four. A batch waits for its slowest job: lower it for slow handlers.
	BatchSize int

	// BlockTime is how long one DELAY.MPOP waits when the queue is empty
	// (default 1 s). It is kept under half the client's ReadTimeout: go-redis
	// cannot know that a command it sends with Do blocks, and would cut it.
	BlockTime time.Duration

	// ShutdownTimeout is how long a stop waits for running handlers when
	// Run's context ends (default 30 s). Shutdown takes its own deadline.
	ShutdownTimeout time.Duration

	// Backoff says how long a failed job waits before its next delivery
	// (default DefaultBackoff: exponential from 1 s, factor 2, cap 1 h, full
	// jitter).
	Backoff BackoffFunc

	// HeartbeatAfter is how long a job runs before the worker starts to
	// keep its reservation alive with DELAY.TOUCH (default 1 s; negative:
	// never). Jobs that end sooner cost nothing.
	HeartbeatAfter time.Duration

	// Logger receives the worker's events (default slog.Default()).
	Logger *slog.Logger

	// Metrics, if set, are updated (see NewMetrics).
	Metrics *Metrics

	// Acked, if set, is called with the ids of every DELAY.ACK the server
	// answered, from the goroutine that sent it: keep it short. Ids it
	// found no longer reserved are among them (Metrics counts those).
	Acked func(queue string, ids []string)
}

// Defaults.
const (
	DefaultConcurrency     = 10
	DefaultBatchSize       = 64
	DefaultBlockTime       = time.Second
	DefaultShutdownTimeout = 30 * time.Second
	DefaultHeartbeatAfter  = time.Second
)

// Finished jobs' ids wait for the next fetch to carry them before they are
// sent on their own: three times the recent round trip of a fetch that
// did not park (the fetch in flight, the wait for the other slots, the next
// fetch), at least ackFlushMin, at most ackFlushMax. A busy worker fetches
// again as soon as its fetch in flight returns (the job that finished freed
// a slot), so the wait ends early only when the fetch is parked on an
// empty queue or every slot is busy with a slow job.
const (
	ackFlushMin = 2 * time.Millisecond
	ackFlushMax = 20 * time.Millisecond
)

// A full worker, once a slot frees, waits a fetch's recent round trip
// for the other slots before it fetches, within these bounds.
const (
	batchWaitMin = 50 * time.Microsecond
	batchWaitMax = time.Millisecond
)

// Retrying a failed fetch or ack: 100 ms doubling to 2 s (an election takes
// one to a few seconds).
const (
	retryFirst = 100 * time.Millisecond
	retryMax   = 2 * time.Second
)

// shuttingDown is the failure reason of a job given back at a stop's deadline.
const shuttingDown = "worker shutting down"

// ErrWorkerStarted is returned by a second Run.
var ErrWorkerStarted = errors.New("worker: already started")

// Worker runs handlers for the jobs of one or more queues. Register the
// handlers with Handle, then Run. A Worker is not reused after it stops.
type Worker struct {
	rdb   redis.UniversalClient
	opt   Options
	block string // BlockTime in seconds, as DELAY.MPOP takes it
	clk   clock
	log   *slog.Logger

	mu      sync.Mutex
	runners []*runner
	mw      []Middleware
	started bool

	stopFetch  chan struct{} // closed: no more fetches
	stopFlush  chan struct{} // closed: the flushers end (the stop flushes the rest itself)
	stopOnce   sync.Once
	stopped    chan struct{} // closed when the stop is complete
	handlerCtx context.Context
	cancelJobs context.CancelFunc
	fetchers   sync.WaitGroup // the fetch loops of Handlers (a batch loop runs its handler: see waitFetch)
	flushers   sync.WaitGroup
	tasks      sync.WaitGroup
}

// New returns a worker on rdb: a *redis.Client, or a *redis.ClusterClient
// made with ClusterOptions (or with ClusterStateReloadInterval set).
func New(rdb redis.UniversalClient, opt Options) *Worker {
	if opt.Concurrency <= 0 {
		opt.Concurrency = DefaultConcurrency
	}
	if opt.BatchSize <= 0 {
		opt.BatchSize = DefaultBatchSize
	}
	if opt.BlockTime <= 0 {
		opt.BlockTime = DefaultBlockTime
	}
	if rt := readTimeout(rdb); rt > 0 && opt.BlockTime > rt/2 {
		opt.BlockTime = rt / 2
	}
	if opt.ShutdownTimeout <= 0 {
		opt.ShutdownTimeout = DefaultShutdownTimeout
	}
	if opt.Backoff == nil {
		opt.Backoff = DefaultBackoff
	}
	if opt.HeartbeatAfter == 0 {
		opt.HeartbeatAfter = DefaultHeartbeatAfter
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	ms := opt.BlockTime.Milliseconds()
	if ms < 1 {
		ms = 1
	}
	return &Worker{
		rdb:       rdb,
		opt:       opt,
		block:     strconv.FormatFloat(float64(ms)/1000, 'f', -1, 64),
		clk:       realClock{},
		log:       opt.Logger,
		stopFetch: make(chan struct{}),
		stopFlush: make(chan struct{}),
		stopped:   make(chan struct{}),
	}
}

// readTimeout is the client's read timeout (normalized: go-redis turns 0
// into its default), or 0 when it has none or is not a client we know.
func readTimeout(rdb redis.UniversalClient) time.Duration {
	switch c := rdb.(type) {
	case *redis.Client:
		return c.Options().ReadTimeout
	case *redis.ClusterClient:
		return c.Options().ReadTimeout
	case *redis.Ring:
		return c.Options().ReadTimeout
	}
	return 0
}

// ClusterOptions are go-redis cluster options with what a worker needs to
// follow a failover: the slot map read again every second. go-redis reads
// it otherwise only on MOVED or once a minute, and a dead leader says no
// MOVED (docs/decisions/failover-clients.md).
func ClusterOptions(addrs ...string) *redis.ClusterOptions {
	return &redis.ClusterOptions{Addrs: addrs, ClusterStateReloadInterval: time.Second}
}

// Handle registers the handler of a queue. It panics on a second handler
// for the same queue or after Run.
func (w *Worker) Handle(queue string, h Handler) {
	w.add(&runner{w: w, queue: queue, h: h})
}

// HandleFunc registers a function as the handler of a queue.
func (w *Worker) HandleFunc(queue string, f func(context.Context, *Job) error) {
	w.Handle(queue, HandlerFunc(f))
}

// HandleBatch registers a batch handler for a queue: each fetch's jobs, up
// to BatchSize of them, go to one call of h, made on the goroutine that
// fetched them, and their acks go with the next fetch, sent as soon as h
// returns. One batch of a queue runs at a time. A job so costs the worker
// no goroutine, timer or wake-up of its own, which is what a fast handler
// spends most of its time on; a batch is as slow as its slowest job.
// Middleware (Use) wraps Handlers only. It panics on a second handler for
// the same queue or after Run.
func (w *Worker) HandleBatch(queue string, h BatchHandler) {
	w.add(&runner{w: w, queue: queue, batch: h})
}

// HandleBatchFunc registers a function as the batch handler of a queue.
func (w *Worker) HandleBatchFunc(queue string, f func(context.Context, []*Job) error) {
	w.HandleBatch(queue, BatchHandlerFunc(f))
}

func (w *Worker) add(r *runner) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		panic("worker: Handle after Run")
	}
	for _, o := range w.runners {
		if o.queue == r.queue {
			panic("worker: a second handler for queue " + r.queue)
		}
	}
	w.runners = append(w.runners, r)
}

// Use adds middleware around every handler; call it before Run.
func (w *Worker) Use(mw ...Middleware) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mw = append(w.mw, mw...)
}

// Run works the registered queues until ctx ends or Shutdown is called,
// then stops gracefully (see Shutdown; after ctx ends, within
// Options.ShutdownTimeout) and returns nil. To stop on SIGTERM:
//
//	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
//	defer stop()
//	err := w.Run(ctx)
func (w *Worker) Run(ctx context.Context) error {
	w.mu.Lock()
	if w.started {
		w.mu.Unlock()
		return ErrWorkerStarted
	}
	if len(w.runners) == 0 {
		w.mu.Unlock()
		return errors.New("worker: no handler registered")
	}
	w.started = true
	// Handlers outlive ctx: its end starts the stop, which lets them finish.
	w.handlerCtx, w.cancelJobs = context.WithCancel(context.WithoutCancel(ctx))
	for _, r := range w.runners {
		r.init()
		w.flushers.Add(2)
		go r.flushLoop()
		go r.heartbeatLoop()
		if r.batch != nil {
			go r.batchLoop()
			continue
		}
		for i := len(w.mw) - 1; i >= 0; i-- {
			r.h = w.mw[i](r.h)
		}
		w.fetchers.Add(1)
		go r.fetchLoop()
	}
	w.mu.Unlock()

	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), w.opt.ShutdownTimeout)
		defer cancel()
		w.Shutdown(sctx)
	case <-w.stopFetch:
		<-w.stopped // Shutdown was called: return when it is done
	}
	return nil
}

// Shutdown stops the worker gracefully: no fetch from now on; running
// handlers finish and their jobs are acknowledged; handlers still running
// when ctx ends get their context cancelled and their jobs given back at
// once (DELAY.NACK with delay 0 and reason "worker shutting down"). It
// returns when the stop is complete, with ctx's error if the deadline cut
// handlers short. A fetch in flight when the stop begins is waited for,
// past the deadline if need be (it ends within BlockTime); jobs it brings
// are run as the others are.
func (w *Worker) Shutdown(ctx context.Context) error {
	first := false
	w.stopOnce.Do(func() {
		first = true
		close(w.stopFetch)
	})
	if !first {
		select {
		case <-w.stopped:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	defer close(w.stopped)
	w.mu.Lock()
	started := w.started
	w.started = true // no Run after a Shutdown
	w.mu.Unlock()
	if !started {
		return nil
	}

	// The fetches first, whatever the deadline: a job they bring joins the
	// running ones, and a fetch still parked when the jobs of the deadline
	// are given back could take them again. A parked fetch ends within
	// BlockTime.
	w.fetchers.Wait()
	for _, r := range w.runners {
		if r.batch != nil {
			r.waitFetch()
		}
	}
	var err error
	if !waitOrDone(ctx, &w.tasks) {
		err = ctx.Err()
		w.cancelJobs()
		for _, r := range w.runners {
			r.abandon()
		}
	}
	close(w.stopFlush)
	w.flushers.Wait()
	// Finished jobs' acks, with a few seconds of their own: the deadline
	// may be gone, and an ack not sent is a job done twice.
	fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, r := range w.runners {
		r.flushAll(fctx)
	}
	w.cancelJobs()
	return err
}

// waitOrDone waits for wg or ctx, and says whether wg was done.
func waitOrDone(ctx context.Context, wg *sync.WaitGroup) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}
