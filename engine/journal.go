package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/hist"
	"github.com/delayd/delayd/jobs"
)

// The journal is the engine's side of the append-only log.
//
// Group commit: a write applies under mu and appends its encoded record to
// pend, getting a ticket (its position in the log). One flusher goroutine
// swaps pend out under mu, writes the whole batch with one write(2) and,
// under appendfsync always, one fsync, then marks every ticket in it durable.
// A reply waits only for its own ticket (the connection waits once per batch
// of pipelined commands), and the next fsync starts as soon as the last one
// returns, so throughput holds as writers are added.
//
// Under everysec and no (inline), whoever appends a record writes it: a
// client waiting for its ticket takes the pending batch and writes it itself
// when no write is in progress (WaitDurable), the timer goroutine writes
// what its round logged before it sleeps (writeOwed), and a command whose
// caller will not wait wakes the flusher (Settle). Waking the flusher for a
// batch its client then wrote cost a goroutine hand-off a write, about a
// tenth of the server's CPU at 1,000 jobs/s. The flusher's one-second tick
// writes what nobody did (a client gone before it waited). Under always the
// flusher writes every batch, so that concurrent writers share its fsync.
//
// Under appendfsync everysec the fsync is not the flusher's: once a second
// the flusher hands it to the syncer goroutine and goes on writing, as
// Redis hands it to a bio thread. An fsync after a burst of writes takes
// tens of milliseconds, and a write must not wait for it: its reply waits
// only for its write(2). Redis postpones its writes (up to 2 s) while an
// fsync runs; here a reply waits for its write, so the flusher writes at
// once and, past Redis's 2 s, counts the write in aof_delayed_fsync.
//
// A failed write is not applied: aof rolls the file back to its last good
// size, the engine reloads its state from the file (waiters are kept), and
// every ticket of the failed batch, and any given out after it, gets an
// error. Pops go on being served; while the log is broken they are not
// logged, so after a restart such a job is delivered again, never lost.

// LogFile is the log's name inside the data directory.
const LogFile = "delayd.aof"

// Fsync policies.
const (
	FsyncAlways   = "always"
	FsyncEverySec = "everysec"
	FsyncNo       = "no"
)

type journal struct {
	fs   aof.FS
	path string

	wmu sync.Mutex  // held while the log writer is used (a batch's writer, rewrite switch)
	log *aof.Writer // guarded by wmu to use; replaced under wmu and mu
	// inline says a client waiting for its record (WaitDurable) writes
	// the pending batch itself when no write is in progress, instead of
	// waking the flusher and sleeping until it has written: two goroutine
	// hand-offs fewer for each reply that waits for the log. It is off
	// under appendfsync always, whose fsyncs the flusher groups, and in
	// cluster mode, where batches go to consensus.
	inline bool
	// owed says records are pending that no writer has been woken for
	// (inline only): a client that waits for them writes them itself, and
	// whoever appended records no client waits for wakes the flusher
	// (Engine.Settle, the timer goroutine's round). Set under mu, cleared
	// when a batch is taken.
	owed      atomic.Bool
	spare     []byte      // guarded by wmu: the batch buffer not in use (double buffering)
	dirty     atomic.Bool // written since the last fsync began (everysec)
	wantProbe atomic.Bool // a write failed outside the flusher: it must probe the log
	// smu is held through an fsync and through the closing of a log, so a
	// rewrite's switch never closes the log an fsync is using (that fsync
	// failed and was taken for a disk error). It comes before wmu and is
	// never taken with wmu or mu held: the switch closes the old log after
	// it lets go of both, so a slow fsync delays the switch, never a write.
	smu chanLock
	// syncStart is when the background fsync (appendfsync everysec) in
	// flight began, in Unix ns, or 0: the flusher starts one only when none
	// runs, and counts the writes it makes while one has run over 2 s.
	syncStart atomic.Int64

	// guarded by Engine.mu
	pend      []byte // records, each as uvarint length then bytes
	pendFirst uint64
	proposing bool   // cluster mode: a batch left pend and is not yet in flight
	ticket    uint64 // last ticket given out
	broken    error  // log failure: writes are refused
	// retry says broken came from a write that was rolled back (a full
	// disk): the flusher probes the log and clears broken once a write and
	// an fsync succeed (faults.go). An fsync failure is never retried.
	retry     bool
	replaying bool
	// build, while a log file replays, takes the server-id index's inserts
	// of new adds to another goroutine (replay.go); deferIdx says the add
	// being placed is one of them.
	build        *sidBuilder
	deferIdx     bool
	presizeFor   int64 // log bytes to size the start-up replay's index for
	sidsDeferred int   // server-id inserts the last replay left to the builder (tests)
	rewriting    bool
	// aborted is set when a log write fails during a rewrite: its tail then
	// holds writes that were undone, so the rewrite must not be installed.
	aborted bool
	rwTail  []byte // records logged since the rewrite's snapshot began
	scratch []byte

	// A transaction's unit (tx.go), guarded by Engine.mu: its records while
	// Atomic runs, and its ticket once it logged one.
	unit       []byte
	unitTicket uint64
	// Replay's gathering of a unit logged in parts.
	unitBuf  []byte
	unitOpen bool
	unitNext uint64 // the part expected next

	kick chan struct{}
	done chan struct{}

	dmu     sync.Mutex
	dcond   *sync.Cond
	durable uint64     // guarded by dmu
	failed  [][2]int64 // guarded by dmu: ticket ranges whose write failed
	lastErr error      // guarded by dmu

	// guarded by dmu, for INFO persistence
	lastFsync     time.Time
	lastFsyncTook time.Duration
	baseSize      int64
	lastRewrite   time.Time
	rewriteTook   time.Duration
	rewriteErr    error
	replayed      int
	rewrites      uint64      // finished since start
	fsyncs        hist.Counts // syncLog's durations, µs (metrics.go)
	delayedFsync  uint64      // writes made while a background fsync had run over 2 s (INFO aof_delayed_fsync)
	delayedAt     time.Time
	size          int64 // the log's size after the last write; read without wmu, which comes before mu
}

// openLog replays the log into the engine and opens it for appending,
// reporting its progress to o.Loading. Called by New before any goroutine
// starts, so no lock is needed.
func (e *Engine) openLog() error {
	o := &e.opts
	j := &e.j
	j.fs, j.path = o.FS, filepath.Join(o.Dir, LogFile)
	j.kick = make(chan struct{}, 1)
	j.done = make(chan struct{})
	j.dcond = sync.NewCond(&j.dmu)
	j.inline = o.Fsync != FsyncAlways && o.Replicator == nil
	if j.fs == nil {
		j.fs = aof.OS
		if err := os.MkdirAll(o.Dir, 0o755); err != nil {
			return err
		}
	}
	if l := o.Loading; l != nil {
		l.start.Store(time.Now().UnixNano())
	}
	if st, err := j.fs.Stat(j.path); err == nil {
		j.presizeFor = st.Size() // presize.go
		if o.Loading != nil {
			o.Loading.total.Store(st.Size())
		}
	}
	res, err := e.replayFile(o.Loading)
	var ce *aof.CorruptError
	if errors.As(err, &ce) && o.Repair {
		cut, rerr := aof.Repair(j.fs, j.path)
		if rerr != nil {
			return fmt.Errorf("repair %s: %w", j.path, rerr)
		}
		o.Logger.Warn().Str("file", j.path).Int64("cut_at", cut).Str("kept_in", j.path+aof.BrokenSuffix).
			Msg("log repaired: cut at the damage")
		e.resetState()
		res, err = e.replayFile(o.Loading)
	}
	if err != nil {
		return err
	}
	if res.TornBytes > 0 {
		o.Logger.Warn().Str("file", j.path).Int64("offset", res.Size).Int64("cut_bytes", res.TornBytes).
			Msg("torn last record cut off (a crash during a write)")
	}
	j.log, err = aof.OpenAppend(j.fs, j.path, res.Size)
	if err != nil {
		return err
	}
	j.baseSize = j.log.Size()
	j.size = j.baseSize
	j.replayed = res.Records
	if res.Records > 100_000 {
		// Replay grew the slabs and the index by doubling; give the copies
		// left behind back to the OS now rather than at some later GC.
		debug.FreeOSMemory()
	}
	return nil
}

// replayFile applies every record of the log, at the time it was applied,
// logging its progress every second and reporting it to l (at start-up; nil
// for a reload), which may also abort it.
func (e *Engine) replayFile(l *Loading) (aof.Result, error) {
	j := &e.j
	j.replaying = true
	defer func() { j.replaying = false }()
	start := time.Now()
	n := 0
	j.unitOpen, j.unitBuf = false, nil
	defer e.dropTornUnit()
	e.startSidBuilder(j.presizeFor)
	j.presizeFor = 0 // a reload's index grows as it must
	defer e.stopSidBuilder()
	res, err := aof.ReplayProgress(j.fs, j.path, func(p []byte) error {
		if err := e.replayRecord(p); err != nil {
			return fmt.Errorf("%s: record %d: %w", j.path, n+1, err)
		}
		n++
		return nil
	}, e.replayProgress(l, &n, start))
	if l != nil {
		l.loaded.Store(res.Size)
		l.records.Store(int64(n))
	}
	if n > 0 && !errors.Is(err, ErrLoadAborted) {
		e.opts.Logger.Info().Int("records", n).Int("jobs", e.njobs).Dur("took_ms", time.Since(start)).
			Int64("bytes", res.Size).Msg("log replayed")
	}
	return res, err
}

// apply replays one record: time first moves to when it was applied.
func (e *Engine) apply(p []byte) error {
	var r rec
	if err := r.decode(p); err != nil {
		return err
	}
	if e.wheel == nil {
		e.wheel = e.newJobWheel(r.time)
	}
	// A plain new add leaves its index insert to the builder (replay.go);
	// any other record needs the index whole, before time moves.
	deferred := e.deferrable(&r)
	if !deferred {
		e.syncSids()
		defer e.raiseSidCeil(r.op)
	}
	e.advanceLocked(r.time)
	e.repl.lastTime = max(e.repl.lastTime, r.time)
	switch r.op {
	case opAdd:
		// A server id above every one seen cannot be in the index yet (a
		// client id could read as it only once jobs.Table.SIDLike is set).
		e.j.deferIdx = deferred
		e.put(&r, deferred || (r.id == nil && r.sid > e.lastSID && !e.jobs.SIDLike))
		e.j.deferIdx = false
	case opCancel, opPop:
		e.del(&r)
	case opReserve:
		e.applyReserve(&r)
	case opMove:
		e.applyMove(&r)
	case opDel:
		e.delQueue(r.queue, r.time)
	case opLMove:
		e.applyLMove(&r)
	case opFlush:
		e.flushAll()
	case opTomb:
		e.applyTomb(&r)
	case opLimit:
		e.applyLimit(&r)
	case opPause:
		e.applyPause(&r)
	case opRequeue:
		e.applyRequeue(&r)
	case opSchedule:
		e.applySchedule(&r)
	case opUnschedule:
		e.applyUnschedule(&r)
	case opFire:
		e.applyFire(&r)
	case opMeta:
		e.lastSID = max(e.lastSID, r.sid)
		e.seq = max(e.seq, r.seq)
	}
	return nil
}

// resetState drops every job and queue, keeping ids and add order counters
// so nothing is ever reused. Waiters are the caller's business.
func (e *Engine) resetState() {
	e.dropPages()
	e.wheel = nil
	e.resetTimers()
	e.resetFlow()
	e.resetSchedules()
	e.jobs.Reset()         // side tables by slot: slots are reused from 0
	e.ident = identState{} // FLUSHALL drops tombstones too
	e.queues, e.qfree = nil, nil
	e.byName = make(map[string]uint32)
	e.njobs = 0
	e.resetLazy()
	// Queue indices mean nothing after a reset (a FLUSHALL inside a
	// transaction): whoever reparks waiters asks to serve them again.
	e.txServe = e.txServe[:0]
}

// beginWrite starts a write op, with mu held: it refuses when writes are
// refused, and advances the wheel to now first, as replay does before it
// applies a record, so that live and replayed orders agree.
func (e *Engine) beginWrite() (int64, error) { return e.beginWriteAt(0) }

// beginWriteAt is beginWrite at a time its caller read when the command
// arrived (a Mono reading, as AddArgs.Mono; 0: read the clock): clockAt.
func (e *Engine) beginWriteAt(at time.Duration) (int64, error) {
	if err := e.writable(); err != nil {
		return 0, err
	}
	now, _ := e.clockAt(at)
	e.advanceLocked(now)
	return now, nil
}

// writable says whether a write may be applied now. Called with mu held.
func (e *Engine) writable() error {
	if e.closed {
		return ErrClosed
	}
	if e.j.broken != nil {
		return fmt.Errorf("%w: %w", ErrLog, e.j.broken)
	}
	return e.replWritable()
}

// logRec appends r to the pending batch and returns its ticket (0 when the
// log is off or broken). Called with mu held, in apply order.
func (e *Engine) logRec(r *rec) uint64 {
	j := &e.j
	if (j.log == nil && e.opts.Replicator == nil) || j.replaying || j.broken != nil {
		return 0
	}
	j.scratch = r.encode(j.scratch[:0])
	if e.inTx {
		return e.unitRec(j.scratch)
	}
	j.ticket++
	e.appendPend(j.scratch, j.ticket)
	return j.ticket
}

// appendPend appends one encoded record with this ticket to the pending
// batch (and to a running rewrite's tail). Called with mu held.
func (e *Engine) appendPend(b []byte, ticket uint64) {
	j := &e.j
	if len(j.pend) == 0 {
		j.pendFirst = ticket
		if j.inline {
			j.owed.Store(true)
		} else {
			j.wakeFlusher()
		}
	}
	j.pend = binary.AppendUvarint(j.pend, uint64(len(b)))
	j.pend = append(j.pend, b...)
	if j.rewriting {
		j.rwTail = binary.AppendUvarint(j.rwTail, uint64(len(b)))
		j.rwTail = append(j.rwTail, b...)
	}
}

// Settle is called by the command layer after each command. willWait says
// its caller waits for the command's ticket (Dispatcher.Durable), and so
// writes what is pending itself (WaitDurable); otherwise records the
// command made (a read that fired expiries, say) wake the flusher.
func (e *Engine) Settle(willWait bool) {
	if !willWait && e.j.owed.Load() {
		e.j.wakeFlusher()
	}
}

// writeOwed writes what the timer goroutine's round logged (inline only).
func (e *Engine) writeOwed() {
	if e.j.inline && e.j.owed.Load() {
		e.writePending()
	}
}

// writePending writes the pending batch from the calling goroutine if no
// write is in progress, and wakes the flusher if one is: its batch may have
// been taken before the caller's records.
func (e *Engine) writePending() {
	j := &e.j
	if !j.wmu.TryLock() {
		j.wakeFlusher()
		return
	}
	if e.commit() {
		j.wantProbe.Store(true) // the flusher probes a full disk
		j.wakeFlusher()
	}
}

func (j *journal) wakeFlusher() {
	select {
	case j.kick <- struct{}{}:
	default:
	}
}

// eachRecord calls fn for each length-prefixed record in buf.
func eachRecord(buf []byte, fn func([]byte)) {
	for len(buf) > 0 {
		n, k := binary.Uvarint(buf)
		fn(buf[k : k+int(n)])
		buf = buf[k+int(n):]
	}
}

// flusher is the group commit loop. It exits when the engine closes, after
// writing and fsyncing everything pending.
func (e *Engine) flusher() {
	j := &e.j
	defer close(j.done)
	var tick <-chan time.Time
	var syncReq, syncDone chan struct{} // to and from the syncer (everysec)
	if e.opts.Fsync == FsyncEverySec || j.inline {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		tick = t.C
	}
	if e.opts.Fsync == FsyncEverySec {
		syncReq, syncDone = make(chan struct{}, 1), make(chan struct{})
		go e.syncer(syncReq, syncDone)
	}
	var probe <-chan time.Time // armed while a full disk refuses writes
	for {
		closing := false
		select {
		case <-j.kick:
		case <-tick:
			// An fsync still running covers the writes made before it
			// began; the ones made since stay dirty for the next tick.
			// dirty is cleared before the fsync begins: a write made
			// meanwhile marks it again.
			if syncReq != nil && j.syncStart.Load() == 0 && j.dirty.Swap(false) {
				j.syncStart.Store(time.Now().UnixNano())
				syncReq <- struct{}{} // the syncer is idle: never blocks
			}
			if !j.owed.Load() {
				continue
			}
			// Records nobody was woken to write: their client left
			// before it waited for them. Write them now.
		case <-probe:
			probe = nil
			if !e.probeLog() {
				probe = time.After(probeEvery)
			}
			continue
		case <-e.logQuit:
			closing = true
		}
		j.wmu.Lock()
		if e.commit() || j.wantProbe.Swap(false) {
			if probe == nil {
				probe = time.After(probeEvery)
			}
		}
		if closing {
			if syncReq != nil {
				close(syncReq) // the fsync in flight ends first
				<-syncDone
			}
			if j.dirty.Load() {
				e.syncLog()
			}
			return
		}
	}
}

// commit writes the pending batch to the log, then marks its tickets
// durable (or failed). The caller holds wmu, which commit lets go once the
// batch is written: wmu is held from taking the batch until it is written,
// so a rewrite's switch (which takes wmu, then mu) never finds a batch in
// flight: every record is either written to the old log before the switch,
// or still pending, and so in the rewrite's tail. It reports whether a
// failed write wants the log probed (a full disk).
func (e *Engine) commit() (probe bool) {
	j := &e.j
	e.mu.Lock()
	batch, first, last := j.pend, j.pendFirst, j.ticket
	j.pend, j.spare = j.spare[:0], batch // double buffer: never the same array
	j.owed.Store(false)
	e.mu.Unlock()
	if len(batch) == 0 {
		j.wmu.Unlock()
		return false
	}
	eachRecord(batch, j.log.Append)
	err := j.log.Flush()
	size := j.log.Size()
	j.wmu.Unlock()
	j.dmu.Lock()
	j.size = size
	j.dmu.Unlock()
	fsyncErr := false
	if err == nil {
		j.dirty.Store(true)
		if e.opts.Fsync == FsyncAlways {
			err = e.syncLog()
			j.dirty.Store(false)
			fsyncErr = err != nil
		} else if s := j.syncStart.Load(); s != 0 {
			e.noteDelayedFsync(s)
		}
	}
	if err != nil {
		return e.logFailure(first, err, fsyncErr)
	}
	j.dmu.Lock()
	j.durable = max(j.durable, last) // a rewrite may have covered more
	j.dmu.Unlock()
	j.dcond.Broadcast()
	e.maybeAutoRewrite(size)
	return false
}

// chanLock is a mutex made of a channel: a goroutine waiting for it is
// durably blocked for testing/synctest, as one waiting on a sync.Mutex is
// not (a test holding an fsync would otherwise hang its bubble's clock
// while the rewrite's switch waits to close the log).
type chanLock struct {
	once sync.Once
	c    chan struct{}
}

func (l *chanLock) Lock() {
	l.once.Do(func() { l.c = make(chan struct{}, 1) })
	l.c <- struct{}{}
}

func (l *chanLock) Unlock() { <-l.c }

// syncer runs everysec's fsyncs, one per request, away from the flusher;
// it ends when req is closed, after the fsync in flight.
func (e *Engine) syncer(req <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	j := &e.j
	for range req {
		if err := e.syncLog(); err != nil {
			// Writes already acknowledged may not be on disk, and the page
			// cache's state is unknown: stop acknowledging.
			e.fsyncFailed(err)
		}
		j.syncStart.Store(0)
	}
}

// noteDelayedFsync counts a write made while the background fsync begun at
// start (Unix ns) has run over 2 s, once per 2 s as Redis does: where Redis
// would stop postponing its write and say the disk is busy.
func (e *Engine) noteDelayedFsync(start int64) {
	now := time.Now()
	if now.Sub(time.Unix(0, start)) < 2*time.Second {
		return
	}
	j := &e.j
	j.dmu.Lock()
	note := now.Sub(j.delayedAt) >= 2*time.Second
	if note {
		j.delayedFsync++
		j.delayedAt = now
	}
	j.dmu.Unlock()
	if note {
		e.opts.Logger.Warn().Str("file", j.path).Dur("fsync_running_ms", now.Sub(time.Unix(0, start))).
			Msg("background fsync is taking too long (disk is busy?): writing without waiting for it")
	}
}

// syncLog fsyncs the log and logs a slow fsync with its duration. It may run
// on the syncer while the flusher writes (aof.Writer allows Sync to).
func (e *Engine) syncLog() error {
	j := &e.j
	// smu is held through the fsync: a rewrite's switch closes the old log
	// under smu, and an fsync of a log closed under it would fail and be
	// taken for a disk error (the new log was fsynced before it was
	// installed). wmu only reads which log is current: the flusher's
	// writes go on during the fsync.
	j.smu.Lock()
	defer j.smu.Unlock()
	j.wmu.Lock()
	l := j.log
	j.wmu.Unlock()
	start := time.Now()
	err := l.Sync()
	took := time.Since(start)
	if took > 500*time.Millisecond {
		e.opts.Logger.Warn().Dur("took_ms", took).Str("file", j.path).Msg("slow fsync")
	}
	j.dmu.Lock()
	j.fsyncs.Observe(hist.FsyncUs[:], took.Microseconds())
	if err == nil {
		j.lastFsync, j.lastFsyncTook = time.Now(), took
	} else {
		j.lastErr = err
	}
	j.dmu.Unlock()
	if err != nil {
		e.opts.Logger.Error().Err(err).Str("file", j.path).Msg("fsync failed")
	}
	return err
}

// logFailure fails every ticket from first on and makes memory match the
// file again, so a write whose record did not reach the log is not applied.
// Writes are refused from then on. It reports whether that may end by
// itself: a write that aof rolled back (a full disk) may be retried; a
// failed fsync (fsyncErr, or a Writer failed for good) may not, as
// Postgres learned: the kernel may have dropped the dirty pages and
// cleared the error, so a later fsync that succeeds proves nothing.
func (e *Engine) logFailure(first uint64, err error, fsyncErr bool) bool {
	j := &e.j
	e.opts.Logger.Error().Err(err).Str("file", j.path).Msg("append-only log write failed: the writes in flight get an error and are undone; writes are refused")
	e.mu.Lock()
	last := j.ticket
	j.pend = j.pend[:0]
	j.broken = err
	j.retry = !fsyncErr && !errors.Is(err, aof.ErrWriterFailed)
	if j.rewriting {
		j.aborted = true // its tail holds the writes being undone
	}
	if rerr := e.reloadLocked(); rerr != nil {
		j.broken, j.retry = rerr, false
		e.opts.Logger.Error().Err(rerr).Msg("reloading the log after a failed write")
	}
	retry := j.retry
	e.mu.Unlock()
	j.dmu.Lock()
	j.failed = append(j.failed, [2]int64{int64(first), int64(last)})
	if len(j.failed) > 64 {
		j.failed = j.failed[1:]
	}
	j.durable = max(j.durable, last)
	j.lastErr = err
	j.dmu.Unlock()
	j.dcond.Broadcast()
	return retry
}

// reloadLocked rebuilds every job from the log file, keeping blocked clients
// in their queues' FIFO order. Called with mu held; rare (disk errors).
func (e *Engine) reloadLocked() error {
	waiting := e.parkedWaiters()
	e.resetState()
	_, err := e.replayFile(nil)
	e.changedAll()
	if e.wheel == nil {
		e.wheel = e.newJobWheel(e.nowMs())
	}
	e.repark(waiting)
	e.armSchedules(true)
	return err
}

// parked is the FIFO of blocked clients of one queue, kept across a reset
// of the engine's state (reloadLocked, FLUSHALL).
type parked struct {
	name  string
	links []*waitLink
}

// parkedWaiters lists every queue's waiters, in FIFO order. O(queues +
// waiters).
func (e *Engine) parkedWaiters() []parked {
	var waiting []parked
	for i := range e.queues {
		q := &e.queues[i]
		if !q.live || q.whead == nil {
			continue
		}
		p := parked{name: q.name}
		for l := q.whead; l != nil; l = l.next {
			p.links = append(p.links, l)
		}
		waiting = append(waiting, p)
	}
	return waiting
}

// repark puts the waiters parkedWaiters listed back in their queues, in the
// same order, after a reset; then jobs due by now fire and serve them, and
// the timer goroutine re-reads its deadline.
func (e *Engine) repark(waiting []parked) {
	e.parkAgain(waiting)
	e.advanceLocked(e.nowMs())
	for _, p := range waiting {
		if qi, ok := e.queueFor([]byte(p.name), false); ok {
			e.serve(qi)
		}
	}
	e.armed = 0
	e.poke(0)
}

// parkAgain is repark without serving anyone: for a replay, which moves
// time only to its records' times, and a follower, which serves no one.
func (e *Engine) parkAgain(waiting []parked) {
	for _, p := range waiting {
		qi, _ := e.queueFor([]byte(p.name), true)
		for _, l := range p.links {
			e.park(l, qi)
		}
	}
}

// WaitDurable blocks until the record with this ticket is in the log (and on
// disk under appendfsync always). It returns an error if its write failed,
// in which case the write was not applied. Ticket 0 returns at once.
func (e *Engine) WaitDurable(ticket uint64) error {
	if ticket == 0 {
		return nil
	}
	if e.mu.held {
		return ErrInTransaction // the flusher needs the lock this handle holds
	}
	j := &e.j
	j.dmu.Lock()
	defer j.dmu.Unlock()
	for j.durable < ticket {
		if j.inline {
			j.dmu.Unlock()
			e.writePending()
			j.dmu.Lock()
			if j.durable >= ticket {
				break
			}
		}
		j.dcond.Wait()
	}
	if traceOn {
		traceDurable(ticket)
	}
	for _, f := range j.failed {
		if int64(ticket) >= f[0] && int64(ticket) <= f[1] {
			if e.opts.Replicator != nil {
				return ErrNotCommitted
			}
			return fmt.Errorf("%w: %w", ErrLog, j.lastErr)
		}
	}
	return nil
}

// maybeAutoRewrite starts a rewrite when the log has grown past the
// configured multiple of its size after the last rewrite.
func (e *Engine) maybeAutoRewrite(size int64) {
	o := &e.opts
	j := &e.j
	if o.RewritePercent <= 0 || size < o.RewriteMinSize {
		return
	}
	j.dmu.Lock()
	base := j.baseSize
	j.dmu.Unlock()
	if size < base+base*int64(o.RewritePercent)/100 {
		return
	}
	if err := e.Rewrite(); err == nil {
		o.Logger.Info().Int64("size", size).Int64("base_size", base).Msg("automatic log rewrite started")
	}
}

var errRewriteAborted = errors.New("a log write failed during the rewrite; it was abandoned")

// ErrRewriteRunning is returned by Rewrite while one is in progress.
var ErrRewriteRunning = errors.New("Background append only file rewriting already in progress")

// Rewrite starts writing the live set to a new log in the background; writes
// go on meanwhile. The new log replaces the old one atomically.
func (e *Engine) Rewrite() error {
	if e.mu.held {
		return ErrInTransaction // its goroutine needs the lock this handle holds
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	j := &e.j
	if j.log == nil {
		return errors.New("the append-only log is off (appendonly no)")
	}
	if j.rewriting {
		return ErrRewriteRunning
	}
	if err := e.writable(); err != nil {
		return err
	}
	// The plan: every job, in the order replay must see it: each ready list
	// in order, then the rest. Each is written as it is when its chunk is
	// copied; records logged meanwhile go to the tail, and since every record
	// sets a state outright, the tail applied on top converges on the live
	// state. A job that became ready since the plan is still written as
	// delayed, so replay's wheel orders it by (due, add order).
	type entry struct {
		slot  uint32
		ready bool
	}
	plan := make([]entry, 0, e.njobs)
	for qi := range e.queues {
		if !e.queues[qi].live {
			continue // being freed (lazyfree.go): its DEL is logged
		}
		e.queues[qi].rd.each(&e.jobs.Slab, func(s uint32) bool {
			plan = append(plan, entry{s, true})
			return true
		})
	}
	for s := range e.jobs.Len() {
		if jb := e.jobs.At(s); (jb.State == jobs.StateDelayed || jb.State == jobs.StateReserved) && e.queues[jb.Queue].live {
			plan = append(plan, entry{uint32(s), false})
		}
	}
	snapTime := e.nowMs()
	meta := rec{op: opMeta, time: snapTime, sid: e.lastSID, seq: e.seq}
	// The state that is not jobs is small next to them (schedules, limits)
	// or simple to encode (tombstones): it is encoded here, under the lock.
	var state [][]byte
	for _, r := range e.stateRecs(snapTime) {
		state = append(state, r.encode(nil))
	}
	j.rewriting, j.rwTail, j.aborted = true, nil, false
	started := time.Now()

	go func() {
		err := func() error {
			w, tmp, err := aof.CreateTemp(j.fs, j.path)
			if err != nil {
				return err
			}
			fail := func(err error) error {
				w.Close()
				j.fs.Remove(tmp)
				return err
			}
			var buf []byte
			w.Append(meta.encode(nil))
			for _, b := range state {
				w.Append(b)
			}
			const chunk = 1024
			for i := 0; i < len(plan); i += chunk {
				e.mu.Lock()
				if j.aborted { // the engine was reloaded: the plan's slots mean nothing now
					e.mu.Unlock()
					break
				}
				for _, p := range plan[i:min(i+chunk, len(plan))] {
					jb := e.jobs.At(p.slot)
					if jb.State == jobs.StateFree || !e.queues[jb.Queue].live {
						continue // gone since the plan (or being freed): the tail says how
					}
					var flags byte
					var deadline int64
					switch {
					case jb.State == jobs.StateReserved:
						flags = flagReserved
						deadline, _ = e.wheel.Due(p.slot)
					case p.ready && jb.State == jobs.StateReady:
						flags = flagReady
					}
					r := e.addRecOf(p.slot, flags)
					r.time, r.deadline = snapTime, deadline
					buf = r.encode(buf[:0])
					w.Append(buf)
				}
				e.mu.Unlock()
				if w.Buffered() > 1<<20 {
					if err := w.Flush(); err != nil {
						return fail(err)
					}
				}
			}
			if err := w.Flush(); err != nil {
				return fail(err)
			}
			if err := w.Sync(); err != nil {
				return fail(err)
			}
			// Switch: the flusher is idle (wmu) and no write applies (mu).
			// Everything logged since the plan is in rwTail, including what
			// is still pending for the old log, so the new log covers it.
			j.wmu.Lock()
			e.mu.Lock()
			if j.aborted {
				j.rwTail, j.rewriting = nil, false
				e.mu.Unlock()
				j.wmu.Unlock()
				return fail(errRewriteAborted)
			}
			eachRecord(j.rwTail, w.Append)
			err = w.Flush()
			if err == nil {
				err = aof.Install(j.fs, tmp, j.path)
			}
			if err != nil && !errors.Is(err, aof.ErrRenameNotDurable) {
				j.rwTail = nil
				j.rewriting = false
				e.mu.Unlock()
				j.wmu.Unlock()
				return fail(err)
			}
			old := j.log
			j.log = w
			last, size := j.ticket, w.Size()
			j.pend, j.rwTail, j.rewriting = j.pend[:0], nil, false
			e.mu.Unlock()
			j.wmu.Unlock()
			j.dmu.Lock()
			j.durable = max(j.durable, last)
			j.baseSize, j.size = size, size
			j.dmu.Unlock()
			j.dcond.Broadcast() // before the close: the writes the new log took wait for no fsync
			j.smu.Lock()        // not while an fsync uses it (syncLog)
			old.Close()
			j.smu.Unlock()
			return err
		}()
		j.dmu.Lock()
		j.lastRewrite, j.rewriteTook, j.rewriteErr = time.Now(), time.Since(started), err
		if err == nil {
			j.rewrites++
		}
		j.dmu.Unlock()
		if err != nil {
			e.mu.Lock()
			j.rewriting, j.rwTail = false, nil
			e.mu.Unlock()
			e.opts.Logger.Error().Err(err).Msg("log rewrite failed")
			return
		}
		e.opts.Logger.Info().Int("jobs", len(plan)).Dur("took_ms", time.Since(started)).Msg("log rewritten")
	}()
	return nil
}

// Persistence returns the INFO persistence fields.
func (e *Engine) Persistence() [][2]string {
	j := &e.j
	if j.path == "" {
		return [][2]string{{"loading", "0"}, {"async_loading", "0"}, {"aof_enabled", "0"}}
	}
	e.mu.Lock()
	rewriting, broken := j.rewriting, j.broken
	e.mu.Unlock()
	j.dmu.Lock()
	defer j.dmu.Unlock()
	size := j.size // not j.log.Size(): inside a transaction mu is held, and wmu comes before mu
	b := func(v bool) string {
		if v {
			return "1"
		}
		return "0"
	}
	status := func(err error) string {
		if err != nil {
			return "err"
		}
		return "ok"
	}
	lastFsync := "0"
	if !j.lastFsync.IsZero() {
		lastFsync = strconv.FormatInt(j.lastFsync.Unix(), 10)
	}
	errText := ""
	if j.lastErr != nil {
		errText = j.lastErr.Error()
	}
	return [][2]string{
		{"loading", "0"},
		{"async_loading", "0"},
		{"aof_enabled", "1"},
		{"aof_filename", j.path},
		{"aof_fsync", e.opts.Fsync},
		{"aof_current_size", strconv.FormatInt(size, 10)},
		{"aof_base_size", strconv.FormatInt(j.baseSize, 10)},
		{"aof_replayed_records", strconv.Itoa(j.replayed)},
		{"aof_rewrite_in_progress", b(rewriting)},
		{"aof_last_rewrite_time_sec", strconv.FormatInt(int64(j.rewriteTook.Seconds()), 10)},
		{"aof_last_bgrewrite_status", status(j.rewriteErr)},
		{"aof_last_fsync_unix", lastFsync},
		{"aof_last_fsync_us", strconv.FormatInt(j.lastFsyncTook.Microseconds(), 10)},
		{"aof_delayed_fsync", strconv.FormatUint(j.delayedFsync, 10)},
		{"aof_last_write_status", status(broken)},
		{"aof_last_error", errText},
	}
}
