package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
)

// Options configure a Worker. The zero value is a worker with the defaults.
type Options struct {
	// Concurrency is how many jobs of each queue run at once (default 10).
	// A fetch takes at most the free slots, so nothing waits unstarted in
	// the worker. With 1, jobs are taken one at a time.
	Concurrency int

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
	fetchers   sync.WaitGroup
	flushers   sync.WaitGroup
	tasks      sync.WaitGroup
}

// New returns a worker on rdb: a *redis.Client, or a *redis.ClusterClient
// made with ClusterOptions (or with ClusterStateReloadInterval set).
func New(rdb redis.UniversalClient, opt Options) *Worker {
	if opt.Concurrency <= 0 {
		opt.Concurrency = DefaultConcurrency
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
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		panic("worker: Handle after Run")
	}
	for _, r := range w.runners {
		if r.queue == queue {
			panic("worker: a second handler for queue " + queue)
		}
	}
	w.runners = append(w.runners, &runner{w: w, queue: queue, h: h})
}

// HandleFunc registers a function as the handler of a queue.
func (w *Worker) HandleFunc(queue string, f func(context.Context, *Job) error) {
	w.Handle(queue, HandlerFunc(f))
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
		for i := len(w.mw) - 1; i >= 0; i-- {
			r.h = w.mw[i](r.h)
		}
		r.init()
		w.fetchers.Add(1)
		w.flushers.Add(2)
		go r.fetchLoop()
		go r.flushLoop()
		go r.heartbeatLoop()
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

// runner is one queue's loop: its slots, the acks waiting for a fetch,
// its running jobs.
type runner struct {
	w     *Worker
	queue string
	h     Handler
	qm    *queueMetrics
	log   *slog.Logger

	mu        sync.Mutex
	free      int      // slots not running a job
	acks      []string // finished jobs not acknowledged yet
	running   map[*task]struct{}
	abandoned bool          // the stop's deadline passed: give back what comes in
	wake      chan struct{} // cap 1: a slot freed
	ackWake   chan struct{} // cap 1: acks are waiting
	rtt       atomic.Int64  // ns: a moving average of fetches that got every job they asked for
}

// task is one running job. state decides once who ends it: the handler
// returning (finish) or a stop's deadline (giveUp).
type task struct {
	job   *Job
	taken time.Time
	state atomic.Int32 // 0 running, 1 finished, 2 given up
	// Guarded by the runner's mu: the heartbeat once the job ran
	// HeartbeatAfter (heartbeatLoop starts it), and whether the handler
	// returned (then none starts).
	hb    *heartbeat
	ended bool
}

func (t *task) finish() bool { return t.state.CompareAndSwap(0, 1) }
func (t *task) giveUp() bool { return t.state.CompareAndSwap(0, 2) }

func (r *runner) init() {
	r.free = r.w.opt.Concurrency
	r.running = make(map[*task]struct{}, r.free)
	r.wake = make(chan struct{}, 1)
	r.ackWake = make(chan struct{}, 1)
	r.qm = r.w.opt.Metrics.forQueue(r.queue)
	r.log = r.w.log.With("queue", r.queue)
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// fetchLoop takes jobs while there are free slots: one DELAY.MPOP for as
// many jobs as there are free slots, with the finished jobs' DELAY.ACK in
// the same write, so a busy worker pays one round trip for a whole batch of
// jobs and their acks.
func (r *runner) fetchLoop() {
	defer r.w.fetchers.Done()
	// Never cancelled: a cancelled blocking call closes its connection, and
	// a job the server hands over in that instant would wait out its ack
	// timeout. The stop waits for the call instead (at most BlockTime).
	ctx := context.Background()
	failures := 0
	all := r.w.opt.Concurrency
	batch := time.NewTimer(time.Hour)
	batch.Stop()
	for {
		r.mu.Lock()
		if r.free == 0 {
			// Full: wait for a slot, then up to a fetch's round trip for
			// the rest, so that one fetch (and the acks with it) serves the
			// handlers that end close together rather than one round trip
			// each. A slot so waits at most what the fetch itself takes; a
			// fetch while slots are free (an idle or filling worker) does
			// not wait.
			for r.free == 0 {
				r.mu.Unlock()
				select {
				case <-r.wake:
				case <-r.w.stopFetch:
					return
				}
				r.mu.Lock()
			}
			batch.Reset(min(max(time.Duration(r.rtt.Load()), batchWaitMin), batchWaitMax))
			for r.free < all {
				r.mu.Unlock()
				// Let the handlers that are ready end first: with one P a
				// woken fetcher would otherwise run before them.
				runtime.Gosched()
				select {
				case <-r.wake:
				case <-batch.C:
					all = 0
				case <-r.w.stopFetch:
					return
				}
				r.mu.Lock()
			}
			all = r.w.opt.Concurrency
			if !batch.Stop() {
				select {
				case <-batch.C:
				default:
				}
			}
		}
		select {
		case <-r.w.stopFetch:
			r.mu.Unlock()
			return
		default:
		}
		n, acks := r.free, r.acks
		r.acks = nil
		r.mu.Unlock()

		began := time.Now()
		jobs, err := r.fetch(ctx, acks, n)
		if len(jobs) == n {
			// A fetch that got all it asked for did not park: its time is
			// a round trip. A parked one's is the wait for a job.
			took, avg := int64(time.Since(began)), r.rtt.Load()
			r.rtt.Store(avg + (took-avg)/8)
		}
		if len(jobs) > 0 {
			r.start(jobs)
		}
		if err == nil {
			if failures > 0 {
				r.log.Info("delayd: fetching again", "failures", failures)
				failures = 0
			}
			continue
		}
		r.qm.add(fetchErrors, 1)
		if failures == 0 {
			r.log.Warn("delayd: DELAY.MPOP failed; retrying", "err", err)
		}
		failures++
		d := min(retryFirst<<min(failures-1, 5), retryMax)
		select {
		case <-time.After(d):
		case <-r.w.stopFetch:
			return
		}
	}
}

// fetch sends acks (if any) and one DELAY.MPOP for up to n jobs in one
// write. Acks that failed in a way a retry may pass are kept for the next.
func (r *runner) fetch(ctx context.Context, acks []string, n int) ([]*Job, error) {
	pop := redis.NewCmd(ctx, "DELAY.MPOP", r.w.block, 1, r.queue, "COUNT", n)
	pop.SetFirstKeyPos(3) // for the cluster client: the key follows a count
	if len(acks) == 0 {
		_ = r.w.rdb.Process(ctx, pop)
		return mpopJobs(r.queue, pop)
	}
	ack := ackCmd(ctx, r.queue, acks)
	pipe := r.w.rdb.Pipeline()
	_ = pipe.Process(ctx, ack)
	_ = pipe.Process(ctx, pop)
	_, _ = pipe.Exec(ctx)
	r.acked(acks, ack)
	return mpopJobs(r.queue, pop)
}

func ackCmd(ctx context.Context, queue string, ids []string) *redis.Cmd {
	args := make([]any, 0, 2+len(ids))
	args = append(args, "DELAY.ACK", queue)
	for _, id := range ids {
		args = append(args, id)
	}
	return redis.NewCmd(ctx, args...)
}

// acked reads a DELAY.ACK's reply: fewer acknowledged than sent means
// reservations that expired (those jobs are delivered again) or jobs added
// without ACKTIMEOUT (their pop removed them).
func (r *runner) acked(ids []string, cmd *redis.Cmd) {
	n, err := cmd.Int64()
	if err != nil {
		if transient(err) {
			r.mu.Lock()
			r.acks = append(r.acks, ids...)
			r.mu.Unlock()
			signal(r.ackWake)
			return
		}
		r.log.Error("delayd: DELAY.ACK failed; the jobs will be delivered again", "err", err, "jobs", len(ids))
		return
	}
	if lost := len(ids) - int(n); lost > 0 {
		r.qm.add(acksLost, lost)
		r.log.Warn("delayd: acknowledged jobs were no longer reserved (ack timeout passed, or no ACKTIMEOUT)", "lost", lost, "sent", len(ids))
	}
	if r.w.opt.Acked != nil {
		r.w.opt.Acked(r.queue, ids)
	}
}

// start runs the jobs a fetch brought, each in its own goroutine.
func (r *runner) start(jobs []*Job) {
	now := r.w.clk.Now()
	tasks := make([]*task, len(jobs))
	r.mu.Lock()
	abandoned := r.abandoned
	if !abandoned {
		r.free -= len(jobs)
		for i, j := range jobs {
			tasks[i] = &task{job: j, taken: now}
			r.running[tasks[i]] = struct{}{}
		}
		r.w.tasks.Add(len(jobs))
	}
	r.mu.Unlock()
	if abandoned {
		for _, j := range jobs {
			r.nack(context.Background(), j, 0, shuttingDown)
		}
		return
	}
	for _, t := range tasks {
		go r.run(t)
	}
}

// run runs one job and ends it: acked with the next fetch, or given back
// with its backoff. The stop waits for that (tasks) unless its deadline
// gave the job back first.
func (r *runner) run(t *task) {
	r.qm.running(1)
	start := time.Now()
	err := r.call(t.job)
	r.mu.Lock()
	hb := t.hb
	t.ended = true
	r.mu.Unlock()
	if hb != nil {
		hb.stop()
	}
	r.qm.observe(time.Since(start).Seconds())
	r.qm.running(-1)
	if !t.finish() {
		return // given back at the stop's deadline
	}
	defer r.w.tasks.Done()
	switch {
	case err == nil:
		r.qm.add(processed, 1)
		r.done(t, true)
	case errors.Is(err, SkipRetry):
		r.qm.add(failed, 1)
		r.qm.add(discarded, 1)
		r.log.Warn("delayd: job failed, not retried (SkipRetry)", "id", t.job.ID, "err", err)
		r.done(t, true)
	default:
		r.qm.add(failed, 1)
		r.retry(t.job, err)
		r.done(t, false)
	}
}

// call runs the handler, a panic turned into a PanicError.
func (r *runner) call(job *Job) (err error) {
	defer func() {
		if v := recover(); v != nil {
			pe := &PanicError{Value: v, Stack: debug.Stack()}
			r.log.Error("delayd: handler panicked", "id", job.ID, "panic", fmt.Sprint(v), "stack", string(pe.Stack))
			err = pe
		}
	}()
	return r.h.ProcessJob(r.w.handlerCtx, job)
}

// done frees the job's slot and, for ack, queues its id for the next fetch.
func (r *runner) done(t *task, ack bool) {
	r.mu.Lock()
	delete(r.running, t)
	r.free++
	first := false
	if ack {
		r.acks = append(r.acks, t.job.ID)
		first = len(r.acks) == 1
	}
	r.mu.Unlock()
	signal(r.wake)
	if first {
		signal(r.ackWake)
	}
}

// retry gives a failed job back with DELAY.NACK after the backoff, its
// error as the failure reason. The backoff needs the job's deliveries,
// which one DELAY.GET tells (failures are rare; a success pays nothing).
func (r *runner) retry(job *Job, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	deliveries := 1
	if v, gerr := r.w.rdb.Do(ctx, "DELAY.GET", job.Queue, job.ID).Result(); gerr == nil {
		if f, ferr := fields(v); ferr == nil {
			deliveries = max(1, int(integer(f["deliveries"])))
		}
	}
	delay := max(0, r.w.opt.Backoff(deliveries, err, job))
	r.log.Info("delayd: job failed; retrying", "id", job.ID, "deliveries", deliveries, "delay", delay, "err", err)
	if r.nack(ctx, job, delay, err.Error()) {
		r.qm.add(retried, 1)
	}
}

// nack sends DELAY.NACK, retried while the cluster is failing over.
func (r *runner) nack(ctx context.Context, job *Job, delay time.Duration, reason string) bool {
	reason = cutReason(reason)
	wait := retryFirst
	for {
		n, err := r.w.rdb.Do(ctx, "DELAY.NACK", job.Queue, job.ID, delay.Milliseconds(), "ERROR", reason).Int64()
		if err == nil {
			if n == 0 {
				r.qm.add(acksLost, 1)
				r.log.Warn("delayd: failed job was no longer reserved", "id", job.ID)
			}
			return n == 1
		}
		if !transient(err) || ctx.Err() != nil {
			r.log.Error("delayd: DELAY.NACK failed; the job comes back after its ack timeout", "id", job.ID, "err", err)
			return false
		}
		time.Sleep(wait)
		wait = min(2*wait, retryMax)
	}
}

// cutReason makes an error text a valid failure reason: 1 to 1024 bytes,
// cut on a UTF-8 boundary.
func cutReason(s string) string {
	const limit = 1024
	if s == "" {
		return "error"
	}
	if len(s) <= limit {
		return s
	}
	s = s[:limit]
	for len(s) > 0 && !utf8.ValidString(s[len(s)-min(len(s), utf8.UTFMax):]) {
		s = s[:len(s)-1]
	}
	return s
}

// abandon gives back the jobs still running at the stop's deadline.
func (r *runner) abandon() {
	r.mu.Lock()
	r.abandoned = true
	var left []*task
	for t := range r.running {
		left = append(left, t)
	}
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, t := range left {
		if t.giveUp() {
			r.mu.Lock()
			hb := t.hb
			t.ended = true
			r.mu.Unlock()
			if hb != nil {
				hb.stop()
			}
			r.log.Warn("delayd: job still running at the stop's deadline; given back", "id", t.job.ID)
			r.nack(ctx, t.job, 0, shuttingDown)
			r.mu.Lock()
			delete(r.running, t)
			r.mu.Unlock()
			r.w.tasks.Done()
		}
	}
}

// heartbeatLoop starts the heartbeat of each job that has run
// HeartbeatAfter, looking a few times a HeartbeatAfter. One loop a queue
// rather than a timer a job: most jobs end long before, and a timer set
// and stopped for each cost the fast ones a tenth of their client CPU.
func (r *runner) heartbeatLoop() {
	defer r.w.flushers.Done()
	after := r.w.opt.HeartbeatAfter
	if after <= 0 {
		return
	}
	tick := time.NewTicker(after / 4)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-r.w.stopFlush:
			return
		}
		now := r.w.clk.Now()
		r.mu.Lock()
		for t := range r.running {
			if t.hb == nil && !t.ended && now.Sub(t.taken) >= after {
				job := t.job
				t.hb = startHeartbeat(r.w.clk, r, r.queue, job.ID, t.taken, 0, func(err error) { r.reservationTrouble(job, err) })
			}
		}
		r.mu.Unlock()
	}
}

// flushLoop sends finished jobs' acks that no fetch took within
// ackFlushDelay: the fetch is parked on an empty queue, or every slot is
// busy with a slow job.
func (r *runner) flushLoop() {
	defer r.w.flushers.Done()
	t := time.NewTimer(time.Hour)
	t.Stop()
	for {
		select {
		case <-r.ackWake:
		case <-r.w.stopFlush:
			return
		}
		t.Reset(min(max(3*time.Duration(r.rtt.Load()), ackFlushMin), ackFlushMax))
		select {
		case <-t.C:
		case <-r.w.stopFlush:
			return
		}
		r.mu.Lock()
		acks := r.acks
		r.acks = nil
		r.mu.Unlock()
		if len(acks) > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			cmd := ackCmd(ctx, r.queue, acks)
			_ = r.w.rdb.Process(ctx, cmd)
			cancel()
			if cmd.Err() != nil && transient(cmd.Err()) {
				time.Sleep(retryFirst) // then again, as acked queued them
			}
			r.acked(acks, cmd)
		}
	}
}

// flushAll sends every waiting ack, retrying while the cluster fails over,
// until ctx ends.
func (r *runner) flushAll(ctx context.Context) {
	wait := retryFirst
	for {
		r.mu.Lock()
		acks := r.acks
		r.acks = nil
		r.mu.Unlock()
		if len(acks) == 0 {
			return
		}
		cmd := ackCmd(ctx, r.queue, acks)
		_ = r.w.rdb.Process(ctx, cmd)
		if cmd.Err() != nil && ctx.Err() != nil {
			r.log.Error("delayd: acks not sent at stop; those jobs will be delivered again", "err", cmd.Err(), "jobs", len(acks))
			return
		}
		r.acked(acks, cmd)
		if cmd.Err() != nil {
			time.Sleep(wait)
			wait = min(2*wait, retryMax)
		}
	}
}

// deadline and touch make the runner the heartbeat's reservation.
func (r *runner) deadline(queue, id string) (time.Time, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := r.w.rdb.Do(ctx, "DELAY.GET", queue, id).Result()
	if errors.Is(err, redis.Nil) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, err
	}
	f, err := fields(v)
	if err != nil {
		return time.Time{}, false, err
	}
	if str(f["state"]) != "reserved" || f["ack_deadline"] == nil {
		return time.Time{}, false, nil
	}
	return time.UnixMilli(integer(f["ack_deadline"])), true, nil
}

func (r *runner) touch(queue, id string) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := r.w.rdb.Do(ctx, "DELAY.TOUCH", queue, id).Int64()
	return n == 1, err
}

func (r *runner) reservationTrouble(job *Job, err error) {
	if err != nil {
		r.log.Warn("delayd: heartbeat failed; retrying", "id", job.ID, "err", err)
		return
	}
	r.qm.add(acksLost, 1)
	r.log.Warn("delayd: running job's reservation is gone (its ack timeout passed); it may run twice", "id", job.ID)
}
