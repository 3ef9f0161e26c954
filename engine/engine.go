package engine

import (
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/clock"
	"github.com/delayd/delayd/finetimer"
	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/journal"
	"github.com/delayd/delayd/latetrace"
	"github.com/delayd/delayd/queue"
	"github.com/delayd/delayd/schedule"
	"github.com/delayd/delayd/wheel"
)

// Options configure an Engine. The zero value is usable: every field has a
// default, applied by New.
type Options struct {
	// Tick is the wheel's level-0 tick in milliseconds (default 1). A job is
	// ready at the end of the tick holding its due time, never before.
	Tick int64
	// FineTimer wakes the timer goroutine on a Linux timerfd instead of the
	// runtime's timer, which wakes an idle process up to a millisecond late
	// (docs/decisions/timer-wakeup.md). Off by default: tests run on
	// testing/synctest's fake clock, which only the runtime's timers follow.
	FineTimer bool
	// MaxPayload bounds one payload in bytes (default 4 MiB; exactly this
	// size is accepted).
	MaxPayload int
	// MaxJobs bounds the jobs held in every state (0: no limit).
	MaxJobs int
	// AckTimeout is the ack timeout in ms of jobs added without one (0: a
	// pop removes the job, at-most-once).
	AckTimeout int64
	// Now returns the current unix time. Tests inject nothing: they run the
	// engine inside testing/synctest, whose fake clock drives time.Now and
	// timers alike. Kept as a seam for tools that replay at a given time.
	Now func() time.Time

	// AppendOnly keeps a log in Dir (file LogFile) and replays it at start.
	AppendOnly bool
	Dir        string
	Fsync      string // FsyncAlways, FsyncEverySec (default) or FsyncNo
	FS         aof.FS // default: the real filesystem
	// Repair cuts a log damaged before its tail at the damage (keeping the
	// rest as *.broken) instead of refusing to start.
	Repair bool
	// RewritePercent starts a background rewrite when the log has grown by
	// this percentage over its size after the last rewrite (0: never), and is
	// at least RewriteMinSize bytes.
	RewritePercent int
	RewriteMinSize int64
	// SegmentSize is the size past which the log's active segment rolls
	// (0: DefaultSegmentSize; docs/decisions/segmented-log.md).
	SegmentSize int64
	// Horizon keeps in memory the payloads of jobs due within this many ms
	// and those of the rest in the log (0: every payload in memory; off
	// without a log of our own: docs/decisions/payloads-on-disk.md).
	Horizon int64
	// FarBuckets moves the jobs whose payloads the horizon keeps on disk
	// out of memory, into time buckets on disk (far.go; off without a
	// horizon).
	FarBuckets bool
	Logger     zerolog.Logger
	// Loading, if set, follows the replay of the log in New from other
	// goroutines, and can stop it (see Loading).
	Loading *Loading

	// Replicator, in cluster mode, takes the batches the append-only log
	// would (AppendOnly must be off: the consensus log is the durability),
	// and Follower starts the engine as a follower (replica.go).
	Replicator Replicator
	Follower   bool
	// ReplicaWindow bounds the batches proposed and not yet committed
	// (0: no bound). A small window (2) makes records gather into fewer,
	// larger entries under load, which is what Raft's per-entry costs want.
	ReplicaWindow int
}

// MaxKey bounds queue names a job can be added to, and MaxPayload the
// payload: together they keep every log record under aof.MaxRecordSize.
const (
	MaxKey     = 16 << 10
	MaxPayload = 64 << 20
)

// Validate checks the options and fills defaults.
func (o *Options) Validate() error {
	if o.Tick <= 0 {
		o.Tick = 1
	}
	if o.MaxPayload <= 0 {
		o.MaxPayload = 4 << 20
	}
	if o.MaxPayload > MaxPayload {
		return fmt.Errorf("max-payload-bytes: %d is over %d, the most one log record holds", o.MaxPayload, MaxPayload)
	}
	if o.MaxJobs < 0 {
		o.MaxJobs = 0
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	f, err := journal.FsyncPolicy(o.Fsync)
	if err != nil {
		return err
	}
	o.Fsync = f
	if o.Replicator != nil && o.AppendOnly {
		return fmt.Errorf("a replicated engine keeps no append-only log of its own")
	}
	if o.Follower && o.Replicator == nil {
		return fmt.Errorf("a follower needs a Replicator (to lead later)")
	}
	if o.AppendOnly && o.Dir == "" {
		o.Dir = "."
	}
	if !o.AppendOnly || o.Horizon < 0 {
		o.Horizon = 0 // a cluster's payloads are in Raft's log, not in segments of ours
	}
	o.FarBuckets = o.FarBuckets && o.Horizon > 0
	return nil
}

// queueEntry is a queue as the engine holds it: the queue's own state (its
// ready order, counts, limit and counters: package queue), plus the name,
// the clients blocked on it, its watch and its push run. It exists while it
// holds a job in any state or a waiter; then it is freed.
type queueEntry struct {
	queue.Queue
	name    string
	waiters queue.Waiters[*Waiter] // the clients blocked on it, oldest first (waiter.go)
	live    bool
	watch   *queue.Watch // non-nil while the name is watched or tracked (watch.go)
	run     jobs.PushRun // the server ids of its list-pushed jobs (jobs/pushrun.go)
	far     int          // of its Delayed, those in the far-future buckets (far.go)
}

// Engine owns every job and queue (the package doc says how it locks). It
// is a handle on the state: the one New returns takes the lock in every
// public method; the one Atomic passes skips it (engineLock).
type Engine struct {
	*core
	mu engineLock
	// txNow and txUp are the time a transaction's handle reads (clock):
	// time stands still inside a transaction, as Redis fixes the time its
	// EXEC sees, so no job fires between two of its commands.
	txNow, txUp int64
}

// engineLock is the lock as one handle sees it: the state's mutex, or, for a
// transaction's handle, nothing, because Atomic holds the mutex for the
// whole transaction. The cost on the hot path is one branch.
type engineLock struct {
	m    *sync.Mutex
	held bool // this handle runs inside Atomic: the mutex is already held
}

// Lock takes the state's mutex unless the handle runs inside Atomic.
func (l *engineLock) Lock() {
	if !l.held {
		l.m.Lock()
	}
}

// Unlock releases what Lock took.
func (l *engineLock) Unlock() {
	if !l.held {
		l.m.Unlock()
	}
}

// core is the state every Engine handle reaches.
type core struct {
	opts Options

	bg sync.WaitGroup // the log's background work (a compaction round, the next segment's making): Close waits for it

	mutex sync.Mutex // guards everything below; reached through Engine.mu

	wheel  *wheel.Wheel
	tm     wheel.Timers // the clocks that are not jobs (timers.go)
	ident  identState   // the tombstones of UNIQUE ids (unique.go)
	limits queue.Limits // DELAY.LIMIT's limits and DELAY.PAUSE's pauses by queue name (limit.go)
	// freed lists queues whose waiters may be served because a reservation
	// ended; served at the end of the operation that ended it (serveFreed),
	// not in the middle of it.
	freed   []uint32
	jobs    jobs.Table // every job: records, ids and payloads, the id index, side tables
	queues  []queueEntry
	byName  map[string]uint32
	lastQ   uint32 // queueFor's last find, +1 (0: none)
	qfree   []uint32
	njobs   int
	seq     uint64
	lastSID uint64
	fired   []uint32
	toServe []uint32 // advanceLocked's queues with waiters and newly ready jobs

	armed    int64         // deadline the timer goroutine sleeps until, or 0
	opNow    int64         // the time of the last advanceLocked, which every operation begins with: its records carry it (recNow)
	watches  queue.Watches // names watched or tracked, and TrackAll (watch.go)
	onChange func(name string)
	closed   bool
	stats    Stats
	met      metrics // lateness and ack-time histograms (metrics.go)
	// inTx is set while Atomic runs: records go to the unit, and queues
	// whose waiters a write would serve wait in txServe until it ends.
	inTx    bool
	txServe []uint32

	sched schedule.Table // recurring schedules (schedule.go)
	lazy  lazyState      // deleted queues being freed (lazyfree.go)

	clk clock.Clock // the time since start: nowMs and clockAt add what is not the clock's

	j       logState         // replay's state and the record buffers (journal.go)
	far     farState         // the far-future jobs on disk (far.go)
	journal *journal.Journal // the log: the file, or the Replicator in cluster mode; nil when off
	repl    replState        // cluster mode's role and clock (replica.go)

	sleep   *finetimer.Sleeper // the timer goroutine's sleep: on Options.FineTimer's timerfd, or the runtime's timer
	quit    chan struct{}      // stops the timer goroutine
	done    chan struct{}
	logQuit chan struct{} // stops the flusher
	logDone chan struct{} // closed when the flusher (or, in cluster mode, the committer) is done
}

// Stats are counters since start.
type Stats struct {
	Added        uint64
	Delivered    uint64 // every pop, first deliveries and redeliveries
	Redelivered  uint64 // pops of a job delivered before
	Acked        uint64
	Nacked       uint64
	Expired      uint64 // reservations whose ack timeout passed
	DeadLettered uint64
	Dropped      uint64 // out of retries with no dead-letter queue
	Cancelled    uint64
	Fired        uint64 // delayed jobs that became ready
	Requeued     uint64 // deliveries taken back because the client left
	WaitersNow   int
}

// New returns a running engine. With AppendOnly it first replays the log:
// every job comes back with its state and due time, and jobs whose time
// passed while the server was down become ready, in (due time, add order).
// That takes about a second per million jobs: a server runs New in the
// background and follows it through opts.Loading (ErrLoadAborted if it
// aborts it). Close stops the engine.
func New(opts Options) (*Engine, error) {
	clk := clock.New(opts.Now)
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	e := &Engine{core: &core{
		opts:    opts,
		byName:  make(map[string]uint32),
		clk:     clk,
		sleep:   finetimer.NewSleeper(),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
		logQuit: make(chan struct{}),
		logDone: make(chan struct{}),
	}}
	e.mu.m = &e.core.mutex
	e.jobs.Init()
	e.repl.now.Store(e.clk.StartMs())
	e.repl.following.Store(opts.Follower)
	if opts.Replicator != nil {
		e.journal = e.newJournal()
	}
	if opts.AppendOnly {
		if err := e.openLog(); err != nil {
			return nil, err
		}
	}
	e.mu.Lock()
	if e.wheel == nil && !opts.Follower {
		// A follower's wheel starts at the time of the first record it
		// applies, as replay's does: its own clock may be ahead of the
		// leader's, and a wheel ahead of a record would make due jobs of it.
		e.wheel = e.newJobWheel(e.clk.StartMs())
	}
	// Reservations replayed from the log keep their absolute deadlines: a
	// worker that reconnects can still ACK, NACK or TOUCH its job, and one
	// whose deadline passed while the server was down expires here, as it
	// would have live (an expiry is derived, never logged).
	e.advanceLocked(e.nowMs())
	e.armSchedules(false) // the replay is over: firings are decided from here on
	e.mu.Unlock()
	if opts.AppendOnly {
		go e.flusher()
	}
	if e.opts.Horizon > 0 && e.journal.Active() != 0 {
		e.jobs.SetDisk(e.journal)
		e.bg.Add(1)
		go e.spiller()
	}
	if opts.Replicator != nil {
		go e.replFlusher()
		go e.replCommitter()
	}
	if opts.FineTimer {
		if ft, err := finetimer.New(); err == nil {
			e.sleep.SetFine(ft)
		} else {
			opts.Logger.Warn().Err(err).Msg("no fine timer: jobs may reach blocked clients up to a millisecond late")
		}
	}
	go e.run()
	return e, nil
}

// nowMs is unix milliseconds read from the monotonic clock: a wall-clock step
// after start cannot make a job early or late. Flooring both parts keeps it
// at or before the true time, so a job is never handed out before its due ms.
func (e *Engine) nowMs() int64 {
	if e.mu.held {
		return e.txNow
	}
	if e.repl.following.Load() {
		return e.repl.now.Load() // a follower's time is the leader's, as replicated
	}
	// A leader's clock never reads before the time it took over at, should
	// its machine's clock be behind the old leader's (replica.go).
	return max(e.clk.Now(), e.repl.now.Load())
}

// recNow is the time a record made now carries: the time the operation
// advanced the wheel to when it began (every operation does), not a fresh
// reading. Replay and followers advance to a record's time before applying
// it; a record stamped a millisecond after the advance would have them fire
// jobs due in that millisecond before it, where the live engine fired them
// after it.
func (e *Engine) recNow() int64 {
	if e.mu.held {
		return e.txNow
	}
	return e.opNow
}

// laterMs is now plus d milliseconds, rounded up to a whole millisecond
// (clock.Clock.At): used for every relative time (delays, ack deadlines),
// so none fires before the client's clock says it should.
func (e *Engine) laterMs(d int64) int64 {
	_, up := e.clock()
	return up + d
}

// MonoEpoch anchors Mono (clock.Epoch).
var MonoEpoch = clock.Epoch

// Mono is the monotonic time since MonoEpoch (clock.Mono).
func Mono() time.Duration { return clock.Mono() }

// clock reads the time once: now floored (nowMs) and rounded up to a whole
// millisecond (what laterMs adds to).
func (e *Engine) clock() (now, up int64) { return e.clockAt(0) }

// clockAt is clock for an operation whose caller already read the clock
// when its command arrived (at, a Mono reading; 0: read it now): a
// transaction's frozen time, a follower's replicated one, else the clock's
// (clock.Clock.At), floored at the time a leader took over at and at the
// last operation's (opNow, which every operation sets). Called with mu
// held.
func (e *Engine) clockAt(at time.Duration) (now, up int64) {
	if e.mu.held {
		return e.txNow, e.txUp
	}
	if e.repl.following.Load() {
		now = e.repl.now.Load()
		return now, now
	}
	return e.clk.At(at, e.repl.now.Load(), e.opNow)
}

// Now returns the engine's current unix time in milliseconds.
func (e *Engine) Now() int64 { return e.nowMs() }

// run is the goroutine that drives time: it sleeps until the earlier of the
// wheels' next deadlines (the first nanosecond of the due millisecond), then
// advances them by elapsed time; with nothing delayed it sleeps until woken.
// How it wakes, and why commands are the backstop of a busy process
// (Overdue): docs/decisions/timer-wakeup.md.
func (e *Engine) run() {
	defer close(e.done)
	defer e.sleep.Close()
	var slept int64 // the deadline the last wake-up was for (latetrace)
	for {
		e.mu.Lock()
		if traceOn && slept != 0 {
			e.traceWake(slept)
		}
		slept = 0
		var dl int64
		ok := false
		if e.wheel != nil && !e.repl.following.Load() {
			// A follower's timer sleeps: only records move its wheel.
			var t0 time.Time
			if traceOn {
				t0 = time.Now()
			}
			e.advanceLocked(e.nowMs())
			if traceOn {
				latetrace.Advance(time.Since(t0))
			}
			dl, ok = e.wheel.NextDeadline()
			if tdl, tok := e.tm.NextDeadline(); tok && (!ok || tdl < dl) {
				dl, ok = tdl, true
			}
		}
		e.armed = 0
		e.sleep.Disarm()
		if ok {
			e.armed = dl
			d := e.clk.Until(dl)
			e.sleep.Arm(dl, d, Mono()+d)
		}
		e.mu.Unlock()
		// What this round logged (expiries, schedules, the reservations of
		// the waiters it served) is written here, before sleeping, not by
		// a hand-off to the flusher.
		e.writeOwed()
		expired, stop := e.sleep.Wait(e.quit, func() bool { return e.clk.Until(dl) > 0 })
		if stop {
			latetrace.Dump()
			return
		}
		if expired {
			slept = dl
		}
	}
}

// Overdue wakes the timer goroutine if now, a Mono reading, is past the
// deadline the timerfd was armed for (finetimer.Sleeper.Overdue): the
// command layer calls it after each command. One atomic load when nothing
// is due.
func (e *Engine) Overdue(now time.Duration) { e.sleep.Overdue(now) }

// poke makes the timer goroutine re-read the next deadline if due is earlier
// than the one it sleeps until. Called with mu held.
func (e *Engine) poke(due int64) {
	if (e.armed != 0 && e.armed <= due) || e.repl.following.Load() {
		return // a follower's timer sleeps: Lead wakes it
	}
	e.armed = due
	e.sleep.Wake()
}

// advanceLocked moves every job due by now from the wheel to its ready list,
// in (due, add order), serving blocked clients as jobs arrive. O(1) per job
// plus the sort of one batch.
func (e *Engine) advanceLocked(now int64) {
	e.opNow = now
	if e.wheel == nil {
		return // Reset, before the first record restored
	}
	if dl, ok := e.wheel.NextDeadline(); !ok || dl > now {
		e.advanceTimers(now)
		return
	}
	e.replTime(now)
	fired := e.wheel.Advance(now, e.fired[:0])
	e.fired = nil // a nested advance (there should be none) gets its own buffer
	for _, h := range fired {
		j := e.jobs.At(h)
		q := &e.queues[j.Queue]
		if !q.live {
			e.dropFired(h) // its queue was deleted: it is being freed
			continue
		}
		switch j.State {
		case jobs.StateDelayed:
			q.Delayed--
			e.stats.Fired++
			e.pushReady(h, false)
			if q.waiters.Len() > 0 && (len(e.toServe) == 0 || e.toServe[len(e.toServe)-1] != j.Queue) {
				e.toServe = append(e.toServe, j.Queue)
			}
		case jobs.StateReserved:
			// Like an operation in Kafka's purgatory whose timeout passed.
			e.unreserve(j.Queue, h)
			q.Expired++
			j.State = jobs.StateFree // the wheel already let go of it
			e.stats.Expired++
			e.jobs.SetReason(h, reasonAckTimeout)
			e.endDelivery(h, now, 0, false, nil)
		}
	}
	e.fired = fired[:0]
	// Waiters are served once every fired job is ready, so a blocked MPOP
	// COUNT n takes up to n of a tick's jobs (docs/decisions/blocking.md);
	// single pops are served in the same order either way.
	for _, qi := range e.toServe {
		e.serve(qi)
	}
	e.toServe = e.toServe[:0]
	e.advanceTimers(now)
}

// Stop refuses new writes and pops, resolves every blocked client with a
// null reply, and stops the timer. The log stays open so that connections
// still finishing (and jobs handed back by clients that left) are logged;
// Close ends it.
func (e *Engine) Stop() {
	if e.mu.held {
		panic("engine: Stop inside Atomic") // it waits for the timer goroutine, which needs the lock
	}
	if e.far.set != nil {
		// The next start replays over it: the far jobs' records are skipped, not placed in memory
		// and sent out again (far.go). A failure leaves the last checkpoint, which the log covers.
		_ = e.checkpoint(0, nil)
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.closed = true
	for i := range e.queues {
		q := &e.queues[i]
		for l := q.waiters.First(); l != nil; l = q.waiters.First() {
			e.resolve(l.W, false)
		}
	}
	freer := e.lazy.done // it ends at its next batch (lazyfree.go)
	e.mu.Unlock()
	close(e.quit)
	<-e.done
	if freer != nil {
		<-freer
	}
}

// Close stops the engine and flushes and fsyncs the log, whatever the fsync
// policy, then closes it. Last, it gives the job pages back to the system
// (they are mapped outside the Go heap, jobs/slab.go): the engine must not be
// used after Close.
func (e *Engine) Close() error {
	if e.mu.held {
		return ErrInTransaction
	}
	e.Stop()
	e.bg.Wait() // a compaction ends at its next step once closed (compact.go)
	if e.far.set != nil {
		defer e.far.set.Close()
	}
	defer func() {
		e.mu.Lock()
		e.dropPages()
		e.mu.Unlock()
	}()
	if e.opts.Replicator != nil {
		select {
		case <-e.logQuit:
		default:
			close(e.logQuit)
		}
		<-e.logDone
		return nil
	}
	if e.journal == nil {
		return nil
	}
	select {
	case <-e.logQuit:
		return nil // already closed
	default:
	}
	close(e.logQuit)
	<-e.logDone
	if e.j.linger != nil {
		e.j.linger.Close()
	}
	if e.j.tailPause != nil {
		e.j.tailPause.Close() // the spiller ended with bg
	}
	return e.journal.Close()
}

// dropPages gives back the memory mapped outside the Go heap (the slab, the
// arena, the wheels' nodes, the index) and leaves all of them empty: for
// resetState, which rebuilds the rest, and Close. Called with mu held.
func (e *Engine) dropPages() {
	e.stopCapture() // it reads the arena's pages
	for i := range e.queues {
		e.queues[i].run.Release() // into the table's kept pages, which it then unmaps
	}
	e.jobs.Release()
	if e.wheel != nil {
		e.wheel.Free()
	}
	e.tm.Free()
}
