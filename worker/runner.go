package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
)

// runner is one queue's loop: its slots, the acks waiting for a fetch,
// its running jobs. Its handler is h, run in a goroutine a job by
// fetchLoop, or batch, run on batchLoop's own goroutine a fetch at a time.
type runner struct {
	w     *Worker
	queue string
	h     Handler
	batch BatchHandler
	qm    *queueMetrics
	log   *slog.Logger

	mu        sync.Mutex
	free      int   // slots not running a job
	acks      []any // finished jobs' ids not acknowledged yet, as the fetch's reply boxed them
	running   map[*task]struct{}
	abandoned bool          // the stop's deadline passed: give back what comes in
	wake      chan struct{} // cap 1: a slot freed
	ackWake   chan struct{} // cap 1: acks are waiting
	rtt       atomic.Int64  // ns: a moving average of fetches that got every job they asked for
	away      bool          // fetchLoop will not fetch soon: a fetch in flight, a retry's wait, or the stop
	fetching  bool          // batchLoop has a fetch in flight
	fetched   *sync.Cond    // on mu: fetching turned false
}

// task is one running job, or a batch handler's jobs. state decides once
// who ends it: the handler returning (finish) or a stop's deadline
// (giveUp).
type task struct {
	jobs  []*Job
	taken time.Time
	state atomic.Int32 // 0 running, 1 finished, 2 given up
	// Guarded by the runner's mu: the heartbeats once the task ran
	// HeartbeatAfter (heartbeatLoop starts them, one a job), and whether
	// the handler returned (then none starts).
	hb    []*heartbeat
	ended bool
}

func (t *task) finish() bool { return t.state.CompareAndSwap(0, 1) }
func (t *task) giveUp() bool { return t.state.CompareAndSwap(0, 2) }

func (r *runner) init() {
	r.free = r.w.opt.Concurrency
	r.running = make(map[*task]struct{}, r.free)
	r.wake = make(chan struct{}, 1)
	r.ackWake = make(chan struct{}, 1)
	r.fetched = sync.NewCond(&r.mu)
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
	defer func() {
		r.mu.Lock()
		r.away = true
		r.mu.Unlock()
		signal(r.ackWake) // what finished meanwhile goes alone now
	}()
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
		r.away = true
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
			// Let the handlers just started run before the next fetch goes
			// out: fast ones end now, and their acks ride with it rather
			// than alone a few ms later, a round trip and a timer each.
			runtime.Gosched()
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
		r.mu.Lock()
		r.away = true
		r.mu.Unlock()
		signal(r.ackWake)
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
func (r *runner) fetch(ctx context.Context, acks []any, n int) ([]*Job, error) {
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

func ackCmd(ctx context.Context, queue string, ids []any) *redis.Cmd {
	args := make([]any, 0, 2+len(ids))
	args = append(args, "DELAY.ACK", queue)
	args = append(args, ids...)
	return redis.NewCmd(ctx, args...)
}

// acked reads a DELAY.ACK's reply: fewer acknowledged than sent means
// reservations that expired (those jobs are delivered again) or jobs added
// without ACKTIMEOUT (their pop removed them).
func (r *runner) acked(ids []any, cmd *redis.Cmd) {
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
		strs := make([]string, len(ids))
		for i, id := range ids {
			strs[i] = str(id)
		}
		r.w.opt.Acked(r.queue, strs)
	}
}

// start runs the jobs a fetch brought, each in its own goroutine.
func (r *runner) start(jobs []*Job) {
	now := r.w.clk.Now()
	tasks := make([]task, len(jobs)) // one allocation for the fetch
	r.mu.Lock()
	r.away = false // the fetch is back: acks from now on go with the next
	abandoned := r.abandoned
	if !abandoned {
		r.free -= len(jobs)
		for i := range jobs {
			tasks[i].jobs, tasks[i].taken = jobs[i:i+1:i+1], now
			r.running[&tasks[i]] = struct{}{}
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
	for i := range tasks {
		go r.run(&tasks[i])
	}
}

// run runs one job and ends it: acked with the next fetch, or given back
// with its backoff. The stop waits for that (tasks) unless its deadline
// gave the job back first.
func (r *runner) run(t *task) {
	job := t.jobs[0]
	err := r.timed(t, func() error { return r.call(job) })
	if !t.finish() {
		return // given back at the stop's deadline
	}
	defer r.w.tasks.Done()
	ack := r.end(job, err)
	r.mu.Lock()
	delete(r.running, t)
	r.free++
	first := false
	if ack {
		r.acks = append(r.acks, job.ackArg())
		// The flusher is needed only when no fetch is coming to take it:
		// a fetch that is back comes at once, or (all slots busy) as soon
		// as this freed one lets it.
		first = len(r.acks) == 1 && r.away
	}
	r.mu.Unlock()
	signal(r.wake)
	if first {
		signal(r.ackWake)
	}
}

// timed runs a task's handler call, counted in the metrics, and stops its
// heartbeats once it returns.
func (r *runner) timed(t *task, call func() error) error {
	var start time.Time
	if r.qm != nil {
		r.qm.running(len(t.jobs))
		start = time.Now()
	}
	err := call()
	r.mu.Lock()
	hb := t.hb
	t.ended = true
	r.mu.Unlock()
	for _, h := range hb {
		h.stop()
	}
	if r.qm != nil {
		r.qm.observe(time.Since(start).Seconds())
		r.qm.running(-len(t.jobs))
	}
	return err
}

// end settles a finished job by its handler's error: true to acknowledge
// it (done, or SkipRetry), false when it was given back for a retry.
func (r *runner) end(job *Job, err error) bool {
	switch {
	case err == nil:
		r.qm.add(processed, 1)
		return true
	case errors.Is(err, SkipRetry):
		r.qm.add(failed, 1)
		r.qm.add(discarded, 1)
		r.log.Warn("delayd: job failed, not retried (SkipRetry)", "id", job.ID, "err", err)
		return true
	}
	r.qm.add(failed, 1)
	r.retry(job, err)
	return false
}

// call runs the handler, a panic turned into a PanicError.
func (r *runner) call(job *Job) (err error) {
	defer r.recover(job.ID, &err)
	return r.h.ProcessJob(r.w.handlerCtx, job)
}

// recover turns a handler's panic into a PanicError in *err.
func (r *runner) recover(id string, err *error) {
	if v := recover(); v != nil {
		pe := &PanicError{Value: v, Stack: debug.Stack()}
		r.log.Error("delayd: handler panicked", "id", id, "panic", fmt.Sprint(v), "stack", string(pe.Stack))
		*err = pe
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
			for _, h := range hb {
				h.stop()
			}
			for _, job := range t.jobs {
				r.log.Warn("delayd: job still running at the stop's deadline; given back", "id", job.ID)
				r.nack(ctx, job, 0, shuttingDown)
			}
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
				t.hb = make([]*heartbeat, len(t.jobs))
				for i, job := range t.jobs {
					t.hb[i] = startHeartbeat(r.w.clk, r, r.queue, job.ID, t.taken, 0, func(err error) { r.reservationTrouble(job, err) })
				}
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
