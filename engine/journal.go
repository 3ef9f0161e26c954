package engine

import (
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/bucket"
	"github.com/delayd/delayd/finetimer"
	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/journal"
	"github.com/delayd/delayd/record"
)

// The engine's side of the log (docs/decisions/journal-leaf.md): it appends
// each record in apply order under its lock (logRec), runs the journal's
// loops on its goroutines, and does what only it can: replay the log into
// its state, reload it when a write failed (logFailed), and walk it for a
// rewrite or a snapshot.

// LogFile is the log's name inside the data directory: the manifest of
// its segments, which are LogFile.<id> beside it (aof.OpenSegments).
const LogFile = "delayd.aof"

// DefaultSegmentSize is where a log segment rolls unless Options say.
const DefaultSegmentSize = 64 << 20

// Fsync policies.
const (
	FsyncAlways   = journal.FsyncAlways
	FsyncEverySec = journal.FsyncEverySec
	FsyncNo       = journal.FsyncNo
)

// logState is what the engine keeps of the log: replay's state and the
// encoding buffers, guarded by Engine.mu, except what says otherwise.
type logState struct {
	fs   aof.FS
	path string   // the manifest
	segs []uint64 // the segments replayFile reads, oldest first

	// home is the segment a job placed now is noted in (jobs.Slab.Home):
	// the one being replayed, else the journal's active one. live is the
	// bytes of live jobs by home, about what compacting it would copy.
	home uint16
	live journal.Live

	replaying bool
	// keepBy, while the start-up replays the log, is the time beyond which
	// a replayed add's job keeps its payload on disk (payloads on disk:
	// spill.go's keepOnDisk), 0 otherwise; rec is the record being replayed
	// and recOff where it lies in its segment.
	keepBy int64
	rec    []byte
	recOff int64
	// build, while a log file replays, takes the server-id index's inserts
	// of new adds to another goroutine (replay.go); deferIdx says the add
	// being placed is one of them.
	build        *jobs.SIDBuilder
	deferIdx     bool
	presizeFor   int64 // log bytes to size the start-up replay's index for
	sidsDeferred int   // server-id inserts the last replay left to the builder (tests)
	replayed     int   // records the start-up replay applied (INFO)
	scratch      []byte

	unit   journal.Unit   // a transaction's records while Atomic runs (tx.go)
	gather journal.Gather // replay's gathering of a unit logged in parts

	linger    *finetimer.Timer // the commit leaders' pause (lingerFunc), closed by Close
	tailPause *finetimer.Timer // the spiller's tail's pause (tailPauseFunc), closed by Close
}

// newJournal makes the journal, its sink the log file or the Replicator,
// with the engine as its environment.
func (e *Engine) newJournal() *journal.Journal {
	o := &e.opts
	return journal.New(journal.Options{
		FS: e.j.fs, Path: e.j.path, Fsync: o.Fsync, Logger: o.Logger,
		Replicator: o.Replicator, Window: o.ReplicaWindow, SegmentSize: o.SegmentSize,
	}, journal.Env{Failed: e.logFailed, Written: e.maybeAutoRewrite, Linger: e.lingerFunc(), Pause: e.tailPauseFunc()})
}

// tailPauseFunc is the journal's Pause, between the slices of the
// spiller's tail (journal.Tail): finetimer.Pause on a timer of its own,
// closed by Close. Without payloads on disk there is no tail; without a
// fine timer the tail only yields (nil).
func (e *Engine) tailPauseFunc() func() {
	if e.opts.Horizon <= 0 || e.opts.Replicator != nil {
		return nil
	}
	ft := e.pauseTimer()
	if ft == nil {
		return nil
	}
	e.j.tailPause = ft
	return func() { finetimer.Pause(ft) }
}

// lingerFunc is the journal's Linger under appendfsync always with a fine
// timer (finetimer.Linger); without one the leader only yields (nil).
func (e *Engine) lingerFunc() func() {
	if !e.opts.FineTimer || e.opts.Fsync != journal.FsyncAlways || e.opts.Replicator != nil {
		return nil
	}
	ft, err := finetimer.New()
	if err != nil {
		return nil
	}
	e.j.linger = ft
	return func() { finetimer.Linger(ft, e.logQuit) }
}

// openLog replays the log into the engine and opens it for appending,
// reporting its progress to o.Loading. Called by New before any goroutine
// starts, so no lock is needed.
func (e *Engine) openLog() error {
	o := &e.opts
	j := &e.j
	if o.SegmentSize <= 0 {
		o.SegmentSize = DefaultSegmentSize
	}
	l, err := journal.FindLog(o.FS, o.Dir, LogFile)
	j.fs, j.path, j.segs = l.FS, l.Path, l.Segs
	if err != nil {
		return err
	}
	j.presizeFor = l.Size // presize.go
	if o.FarBuckets {
		if err := e.openFar(); err != nil {
			return err
		}
		if e.far.set.Len() > 0 {
			j.presizeFor = 0 // the log's adds are mostly of jobs its runs hold: the index grows as it must
		}
	}
	if o.Loading != nil {
		o.Loading.Begin(l.Size)
	}
	if o.Horizon > 0 {
		// Payloads replay keeps on disk are read from here until the log is
		// open (a replayed dead-lettering reads one).
		r := journal.NewSegReader(l)
		defer r.Close()
		e.jobs.SetDisk(r)
		j.keepBy = e.clk.Now() + o.Horizon
		defer func() { j.keepBy = 0 }()
	}
	res, err := e.replayFile(o.Loading)
	if err != nil && o.Repair {
		if ok, rerr := journal.Repair(j.fs, err, o.Logger); rerr != nil {
			return rerr
		} else if ok {
			e.resetState()
			res, err = e.replayFile(o.Loading)
		}
	}
	if err != nil {
		return err
	}
	if e.far.before {
		o.Logger.Warn().Uint64("mark", e.far.mark).Msg("the log holds no mark of the far-future buckets' checkpoint")
		e.countOpened()
	}
	e.journal = e.newJournal()
	if err := e.journal.OpenLog(l.Segs, res); err != nil {
		return err
	}
	if e.far.set != nil && e.journal.Active() == 0 {
		// A log of a release before segments: no spiller, so no buckets
		// (its Set is empty: that release wrote none).
		e.far.set.Close()
		e.far.set = nil
	}
	if j.keepBy != 0 {
		e.jobs.SetDisk(e.journal)
		e.journal.TailFromEnd() // replay decided for every record there is
	}
	j.replayed = res.Records
	if res.Records > 100_000 {
		// Replay grew the slabs and the index by doubling; give the copies
		// left behind back to the OS now rather than at some later GC.
		debug.FreeOSMemory()
	}
	return nil
}

// homeSeg is the segment a job placed now is written in, or a later one:
// the one replay is reading, else the journal's active segment. A home
// never names a segment before the record's, so compacting a segment
// restates every job whose last whole record is in it.
func (e *Engine) homeSeg() uint16 {
	if !e.j.replaying {
		if jn := e.journal; jn != nil {
			return uint16(jn.Active())
		}
	}
	return e.j.home
}

// replayFile applies every record of the log's segments in order, at the
// time it was applied, reporting its progress to l (at start-up; nil for a
// reload), which may also abort it.
func (e *Engine) replayFile(l *Loading) (journal.Replayed, error) {
	j := &e.j
	j.replaying = true
	defer func() { j.replaying = false }()
	j.gather.Reset()
	defer e.dropTornUnit()
	e.startSidBuilder(j.presizeFor)
	j.presizeFor = 0 // a reload's index grows as it must
	defer e.stopSidBuilder()
	if jn := e.journal; jn != nil {
		j.segs = jn.Segments() // a reload: the segments as they are now
	}
	n := 0
	return journal.Replay(j.fs, j.path, j.segs, l, e.opts.Logger, func() int { return e.njobs },
		func(id uint64) { j.home = uint16(id) },
		func(off int64, p []byte) error {
			j.rec, j.recOff = p, off
			if err := e.replayRecord(p); err != nil {
				return fmt.Errorf("record %d: %w", n+1, err)
			}
			n++
			return nil
		})
}

// apply replays one record: time first moves to when it was applied.
func (e *Engine) apply(p []byte) error {
	var r record.Rec
	if err := r.Decode(p); err != nil {
		return err
	}
	if e.far.set != nil && e.farSkips(&r) {
		return nil
	}
	if e.wheel == nil {
		e.wheel = e.newJobWheel(r.Time)
	}
	// A plain new add leaves its index insert to the builder (replay.go);
	// any other record needs the index whole, before time moves.
	deferred := e.deferrable(&r)
	if !deferred {
		e.syncSids()
		defer e.raiseSidCeil(r.Op)
	}
	e.advanceLocked(r.Time)
	e.repl.lastTime = max(e.repl.lastTime, r.Time)
	switch r.Op {
	case record.Add:
		if r.ID != nil && e.far.before && e.farSkipsID(&r) {
			break // after time moved: an earlier job of its id may end by it (far.go)
		}
		// A server id above every one seen cannot be in the index yet (a
		// client id could read as it only once jobs.Table.SIDLike is set).
		e.j.deferIdx = deferred
		e.put(&r, deferred || (r.ID == nil && r.SID > e.lastSID && !e.jobs.SIDLike))
		e.j.deferIdx = false
	case record.Cancel, record.Pop:
		e.del(&r)
	case record.Reserve:
		e.applyReserve(&r)
	case record.Move:
		e.applyMove(&r)
	case record.LMove:
		e.applyLMove(&r)
	default:
		e.applyRegistered(r) // every other kind, by its registration (features.go)
	}
	return nil
}

// resetState drops every job and queue, keeping ids and add order counters
// so nothing is ever reused. Waiters are the caller's business.
func (e *Engine) resetState() {
	e.dropPages()
	e.wheel = nil
	e.resetTimers()
	for _, reset := range resetOf {
		reset(e) // each feature's state (features.go): FLUSHALL drops tombstones too
	}
	e.jobs.Reset() // side tables by slot: slots are reused from 0
	e.j.live = journal.Live{}
	e.queues, e.qfree = nil, nil
	e.byName = make(map[string]uint32)
	e.njobs = 0
	e.resetLazy()
	// Queue indices mean nothing after a reset (a FLUSHALL inside a
	// transaction): whoever reparks waiters asks to serve them again.
	e.txServe = e.txServe[:0]
}

// writing is a write operation under way: the one path every write
// takes. begin takes the lock, refuses the write if writes are refused,
// reads the clock once and advances the wheel to it, as replay does before
// it applies a record, so that live and replayed orders agree; end lets
// the lock go. A value on the caller's stack, with a deferred end: no
// closure, no allocation.
//
//	wr, err := e.begin(at)
//	if err != nil {
//		return err
//	}
//	defer wr.end()
type writing struct {
	e *Engine
	// now is the operation's time, which its records carry; up is now
	// rounded up to a whole millisecond, what relative times add to
	// (laterMs).
	now, up int64
}

// begin starts a write at at, a Mono reading its caller took when the
// command arrived (0: read the clock now; see clockAt). On an error the
// lock is not held.
func (e *Engine) begin(at time.Duration) (writing, error) {
	e.mu.Lock()
	if err := e.writable(); err != nil {
		e.mu.Unlock()
		return writing{}, err
	}
	now, up := e.clockAt(at)
	e.advanceLocked(now)
	return writing{e, now, up}, nil
}

// end ends the write begun by begin.
func (w writing) end() { w.e.mu.Unlock() }

// writable says whether a write may be applied now. Called with mu held.
func (e *Engine) writable() error {
	if e.closed {
		return ErrClosed
	}
	if jn := e.journal; jn != nil {
		if err := jn.Err(); err != nil {
			return fmt.Errorf("%w: %w", ErrLog, err)
		}
	}
	return e.replWritable()
}

// logRec appends r to the pending batch and returns its ticket (0 when the
// log is off or broken). Called with mu held, in apply order.
func (e *Engine) logRec(r *record.Rec) uint64 {
	jn := e.journal
	if jn == nil || e.j.replaying || jn.Broken() {
		return 0
	}
	e.j.scratch = r.Encode(e.j.scratch[:0])
	if e.inTx {
		return e.unitRec(e.j.scratch)
	}
	return jn.Append(e.j.scratch)
}

// Settle is called by the command layer after each command. willWait says
// its caller waits for the command's ticket (Dispatcher.Durable), and so
// writes what is pending itself (WaitDurable); otherwise records the
// command made (a read that fired expiries, say) wake the flusher.
func (e *Engine) Settle(willWait bool) {
	if jn := e.journal; jn != nil {
		jn.Settle(willWait)
	}
}

// writeOwed writes what the timer goroutine's round logged (inline only).
func (e *Engine) writeOwed() {
	if jn := e.journal; jn != nil {
		jn.WriteOwed()
	}
}

// flusher is the goroutine of the journal's group commit loop
// (journal.RunFlusher), and under everysec it starts the syncer's. It
// exits when the engine closes, after writing and fsyncing everything.
func (e *Engine) flusher() {
	defer close(e.logDone)
	var syncReq, syncDone chan struct{} // to and from the syncer (everysec)
	if e.opts.Fsync == FsyncEverySec {
		syncReq, syncDone = make(chan struct{}, 1), make(chan struct{})
		go e.journal.RunSyncer(syncReq, syncDone, e.fsyncFailed)
	}
	e.journal.RunFlusher(e.logQuit, syncReq, syncDone, e.probeLog)
}

// logFailed makes memory match the file again after a write of the batch
// from ticket first on failed (journal.Env.Failed), so a write whose record
// did not reach the log is not applied: the journal fails its tickets and
// refuses writes, and the engine reloads. It reports whether the failure
// may end by itself (a full disk), for the flusher to probe.
func (e *Engine) logFailed(first uint64, err error, fsyncErr bool) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.journal.Undo(first, err, fsyncErr)
	if rerr := e.reloadLocked(); rerr != nil {
		e.journal.Break(rerr)
		e.opts.Logger.Error().Err(rerr).Msg("reloading the log after a failed write")
	}
	return e.journal.Retrying()
}

// reloadLocked rebuilds every job from the log file, keeping blocked clients
// in their queues' FIFO order. Called with mu held; rare (disk errors).
func (e *Engine) reloadLocked() error {
	waiting := e.parkedWaiters()
	e.resetState()
	if e.far.set != nil {
		if err := e.reopenFar(); err != nil {
			return err
		}
	}
	_, err := e.replayFile(nil)
	if e.far.before {
		e.countOpened() // the log lost the checkpoint's mark (openLog warns)
	}
	e.journal.RetailFrom() // every payload is in memory again
	e.changedAll()
	if e.wheel == nil {
		e.wheel = e.newJobWheel(e.nowMs())
	}
	e.repark(waiting)
	e.armSchedules(true)
	return err
}

// WaitDurable blocks until the record with this ticket is in the log (and on
// disk under appendfsync always). It returns an error if its write failed,
// in which case the write was not applied. Ticket 0 returns at once.
func (e *Engine) WaitDurable(ticket uint64) error {
	if ticket == 0 {
		return nil
	}
	if e.mu.held {
		return ErrInTransaction // writing the batch inline, a failure's reload needs the lock this handle holds
	}
	err := e.journal.WaitDurable(ticket)
	if traceOn {
		traceDurable(ticket)
	}
	if err != nil && err != ErrNotCommitted {
		return fmt.Errorf("%w: %w", ErrLog, err)
	}
	return err
}

// maybeAutoRewrite starts a rewrite when the log has grown past the
// configured multiple of its size after the last rewrite
// (journal.Env.Written).
func (e *Engine) maybeAutoRewrite(size int64) {
	o := &e.opts
	if jn := e.journal; jn.WantNext() {
		// The next segment is made off the writers' path (its fsyncs),
		// so that the roll is a switch of files.
		e.mu.Lock()
		if !e.closed {
			e.bg.Add(1)
			go func() {
				defer e.bg.Done()
				jn.PrepareNext()
			}()
		}
		e.mu.Unlock()
	}
	if !e.journal.Grown(size, o.RewritePercent, o.RewriteMinSize) {
		return
	}
	what := "rewrite"
	if e.journal.Active() != 0 {
		// A segmented log compacts its oldest segments, a step at a time,
		// rather than rewriting everything (compact.go).
		what = "compaction"
		if !e.startCompaction("auto") {
			return
		}
	} else if e.Rewrite() != nil {
		return
	}
	o.Logger.Info().Int64("size", size).Int64("base_size", e.journal.Info().BaseSize).Msg("automatic log " + what + " started")
}

// ErrRewriteRunning is returned by Rewrite while one is in progress.
var ErrRewriteRunning = journal.ErrRewriteRunning

// Rewrite starts writing the live set to a new log in the background; writes
// go on meanwhile. The new log replaces the old one atomically.
func (e *Engine) Rewrite() error {
	if e.mu.held {
		return ErrInTransaction // its goroutine needs the lock this handle holds
	}
	held := e.far.set != nil // far.work, which the rewrite's goroutine lets go once its checkpoint is written
	if held {
		e.far.work.Lock()
		defer func() {
			if held {
				e.far.work.Unlock()
			}
		}()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	jn := e.journal
	if jn == nil || !jn.HasLog() {
		return errors.New("the append-only log is off (appendonly no)")
	}
	if jn.Rewriting() || jn.Compacting() {
		return ErrRewriteRunning
	}
	if err := e.writable(); err != nil {
		return err
	}
	// The plan: every job, in the order replay must see it (eachJob). Each
	// is written as it is when its chunk is copied; records logged meanwhile
	// go to the tail, and since every record sets a state outright, the
	// tail applied on top converges on the live state. A job that became
	// ready since the plan is still written as delayed, so replay's wheel
	// orders it by (due, add order).
	type entry struct {
		slot  uint32
		ready bool
	}
	plan := make([]entry, 0, e.njobs)
	e.eachJob(func(s uint32, ready bool) { plan = append(plan, entry{s, ready}) })
	snapTime := e.nowMs()
	meta := record.Rec{Op: record.Meta, Time: snapTime, SID: e.lastSID, Seq: e.seq}
	// The state that is not jobs is small next to them (schedules, limits)
	// or simple to encode (tombstones): it is encoded here, under the lock.
	var state [][]byte
	for _, r := range e.stateRecs(snapTime) {
		state = append(state, r.Encode(nil))
	}
	// The far jobs are not rewritten: a checkpoint of them, captured with
	// the plan, is written before the rewrite, whose first record is its
	// mark (far.go).
	var cp *bucket.Checkpoint
	var cpAt uint64
	if e.far.set != nil {
		cp, cpAt = e.captureFar(snapTime)
		meta = *e.farMark(snapTime)
	}
	if err := jn.BeginRewrite(); err != nil {
		return err
	}
	started := time.Now()
	held = false

	go func() {
		ft := e.pauseTimer()
		if ft != nil {
			defer ft.Close()
		}
		if cp != nil {
			err := e.finishCheckpoint(cp, cpAt, e.farPacer(ft, true))
			e.far.work.Unlock()
			if err != nil {
				jn.Finish(started, err)
				e.opts.Logger.Error().Err(err).Msg("log rewrite failed: the far-future buckets' checkpoint")
				return
			}
		}
		var buf []byte
		head := append([][]byte{meta.Encode(nil)}, state...)
		err := jn.WriteRewrite(started, head, (len(plan)+rewriteChunk-1)/rewriteChunk, func(i int, add func([]byte)) bool {
			e.mu.Lock()
			defer e.mu.Unlock()
			if jn.Aborted() { // the engine was reloaded: the plan's slots mean nothing now
				return false
			}
			for _, p := range plan[i*rewriteChunk : min((i+1)*rewriteChunk, len(plan))] {
				jb := e.jobs.At(p.slot)
				if jb.State == jobs.StateFree || !e.queues[jb.Queue].live {
					continue // gone since the plan (or being freed): the tail says how
				}
				r := e.wholeRec(p.slot, p.ready, snapTime)
				buf = r.Encode(buf[:0])
				if jb.Flags&jobs.FlagOnDisk != 0 {
					e.jobs.Unspill(jb, r.Payload) // the install drops every segment
				}
				add(buf)
			}
			return true
		}, func() { rewriteYield(ft) })
		if err != nil {
			e.opts.Logger.Error().Err(err).Msg("log rewrite failed")
			return
		}
		e.opts.Logger.Info().Int("jobs", len(plan)).Dur("took_ms", time.Since(started)).Msg("log rewritten")
	}()
	return nil
}

// rewriteChunk is how many jobs a rewrite copies per hold of the lock:
// about 100 µs of encoding.
const rewriteChunk = 1024

// rewriteYield is called by a rewrite or a compaction between its chunks,
// without the lock (finetimer.Pause says why it sleeps). A variable for
// its tests.
var rewriteYield = finetimer.Pause

// pauseTimer is the timer a rewrite or a compaction pauses on between its
// chunks (rewriteYield): nil without a fine timer, or where one is
// refused, and then the pause is a Gosched alone.
func (e *Engine) pauseTimer() *finetimer.Timer {
	if !e.opts.FineTimer {
		return nil
	}
	ft, _ := finetimer.New()
	return ft
}

// Persistence returns the INFO persistence fields.
func (e *Engine) Persistence() [][2]string {
	if e.j.path == "" {
		return [][2]string{{"loading", "0"}, {"async_loading", "0"}, {"aof_enabled", "0"}}
	}
	return e.journal.Persistence(e.j.replayed, e.liveBytes())
}

// liveBytes is the live jobs' bytes in the log's segments (an estimate).
func (e *Engine) liveBytes() int64 {
	segs := e.journal.Segments()
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.j.live.Of(segs)
}
