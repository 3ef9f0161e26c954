package engine

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/record"
)

// Compaction of the segmented log (docs/decisions/segmented-log.md): the
// oldest sealed segment is emptied of everything the live state needs by
// restating it at the head, through the live log, then dropped. A job's
// home (jobs.Slab.Home) is the segment its last whole record went to, or
// an earlier one; restating a job writes it whole again (the add record a
// rewrite writes) and moves its home to the head. The state that is not
// jobs (schedules, tombstones, limits, pauses, the counters) is restated
// whole, as a rewrite writes it. Each step holds the lock for a chunk, as
// a write does, and its records are ordinary records: a crash anywhere
// leaves the old segment and some restatements of what it holds, which
// replay applies on top of it (every record sets a state outright; an add
// of an id that exists replaces it), so nothing is lost or doubled.
//
// Ready jobs keep their place in line: a ready job restated alone would be
// replayed at the tail of its lane, behind jobs that were behind it. So a
// ready job is restated with every job after it in its lane, in order,
// from the first of its lane whose home is the segment, as one unit.

// compactChunk bounds the jobs restated per hold of the lock (about as
// long as a rewrite's chunk), compactScan the slots looked at. Variables
// for the tests, which crash between chunks.
var (
	compactChunk        = 1024
	compactScan  uint32 = 16 << 10
)

// compaction is the engine's side of it; guarded by its own atomics.
type compaction struct {
	wg      sync.WaitGroup // the round's goroutine: Close waits for it
	running atomic.Bool
	done    atomic.Uint64 // segments compacted since start
	copied  atomic.Int64  // bytes of jobs restated by compactions since start
	failed  atomic.Uint64 // rounds that ended in an error
}

// startCompaction starts a compaction round in the background unless one,
// or a rewrite, is running. It reports whether it started one.
func (e *Engine) startCompaction(reason string) bool {
	jn := e.journal
	if jn == nil || jn.Active() == 0 || !e.comp.running.CompareAndSwap(false, true) {
		return false
	}
	// Rewrite checks running and begins under the lock: either it began
	// first and is seen here, or it sees running and refuses.
	e.mu.Lock()
	busy := jn.Rewriting() || e.closed
	if !busy {
		e.comp.wg.Add(1)
	}
	e.mu.Unlock()
	if busy {
		e.comp.running.Store(false)
		return false
	}
	go func() {
		defer e.comp.wg.Done()
		defer e.comp.running.Store(false)
		start := time.Now()
		n, err := e.compactRound()
		if err != nil {
			e.comp.failed.Add(1)
		}
		ev := e.opts.Logger.Info()
		if err != nil && !errors.Is(err, ErrClosed) {
			ev = e.opts.Logger.Error().Err(err)
		}
		ev.Str("reason", reason).Int("segments", n).Dur("took_ms", time.Since(start)).Msg("log compaction")
	}()
	return true
}

// compactRound compacts the oldest segments while the log is over half
// again the live set, at most once per segment it began with (plus the
// roll that seals a lone segment). Its end, failed or not, is the base the
// next automatic start measures growth from: a round that cannot finish is
// not started again after every batch.
func (e *Engine) compactRound() (int, error) {
	jn := e.journal
	defer jn.Rebase()
	steps := len(jn.Segments()) + 1
	n := 0
	for range steps {
		segs := jn.Segments()
		size, _ := jn.Sizes()
		e.mu.Lock()
		var live int64
		for _, id := range segs {
			live += e.j.live[uint16(id)]
		}
		closed := e.closed
		e.mu.Unlock()
		if closed {
			return n, ErrClosed
		}
		if size <= live+live/2 {
			break
		}
		if len(segs) == 1 {
			if err := jn.Roll(); err != nil {
				return n, err
			}
			continue
		}
		if err := e.compactSegment(segs[0]); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// compactSegment restates at the head what segment id, the oldest, holds
// of the live state, waits until that is on disk, and drops it.
func (e *Engine) compactSegment(id uint64) error {
	jn := e.journal
	victim := uint16(id)
	ft := e.pauseTimer() // the pause between chunks, as a rewrite's
	if ft != nil {
		defer ft.Close()
	}
	// A failed write undoes the tickets of its batch: a restatement among
	// them is not in the log, whatever the later tickets say.
	fails := jn.Failures()
	wr, err := e.begin(0)
	if err != nil {
		return err
	}
	meta := record.Rec{Op: record.Meta, Time: wr.now, SID: e.lastSID, Seq: e.seq}
	last := e.logRec(&meta)
	for _, r := range e.stateRecs(wr.now) {
		last = max(last, e.logRec(&r))
	}
	wr.end()
	for s := uint32(0); ; {
		wr, err := e.begin(0)
		if err != nil {
			return err
		}
		n := e.jobs.Len()
		if s >= n {
			wr.end()
			break
		}
		restated := 0
		for end := min(s+compactScan, n); s < end && restated < compactChunk; s++ {
			if e.jobs.Home(s) != victim {
				continue
			}
			j := e.jobs.At(s)
			if j.State == jobs.StateFree || !e.queues[j.Queue].live {
				continue // gone, or going with its deleted queue
			}
			var t uint64
			var k int
			if j.State == jobs.StateReady {
				t, k = e.restateLane(s, victim, wr.now)
			} else {
				t, k = e.restate(s, wr.now), 1
			}
			last, restated = max(last, t), restated+k
		}
		wr.end()
		rewriteYield(ft)
	}
	// Only once the restatements are on disk may the segment go: under
	// everysec and no a write is not yet an fsync.
	if err := jn.WaitDurable(last); err != nil {
		return err
	}
	if err := jn.Sync(); err != nil {
		return err
	}
	if jn.Failures() != fails {
		return errors.New("a log write failed during the compaction; it was abandoned")
	}
	if err := jn.DropOldest(id); err != nil {
		return err
	}
	e.comp.done.Add(1)
	if compactDropped != nil {
		compactDropped()
	}
	return nil
}

// compactDropped, when set (tests), is called once a segment is dropped,
// for a test to crash there.
var compactDropped func()

// restate logs the job in slot s whole, as it is, and makes the head its
// home. Called with mu held. It returns the record's ticket.
func (e *Engine) restate(s uint32, now int64) uint64 {
	j := e.jobs.At(s)
	var flags byte
	var deadline int64
	switch j.State {
	case jobs.StateReserved:
		flags = record.FlagReserved
		deadline, _ = e.wheel.Due(s)
	case jobs.StateReady:
		flags = record.FlagReady
	}
	r := e.addRec(s, flags)
	r.Time, r.Deadline = now, deadline
	t := e.logRec(&r)
	size := jobs.DataSize(j) + recOverhead
	h := e.homeSeg()
	e.j.live[e.jobs.Home(s)] -= size
	e.j.live[h] += size
	e.jobs.SetHome(s, h)
	e.comp.copied.Add(size)
	return t
}

// restateLane restates the ready job in slot s with its lane from the
// first job whose home is victim to the tail, in order, so that replay
// puts them back in line as they are. Called with mu held. It returns the
// last ticket and the jobs restated.
func (e *Engine) restateLane(s uint32, victim uint16, now int64) (uint64, int) {
	from := s
	for p := e.jobs.At(s).Prev; p != 0; p = e.jobs.At(p - 1).Prev {
		if e.jobs.Home(p-1) == victim {
			from = p - 1
		}
	}
	// One unit: a batch may be written in two parts, and a crash between
	// them must not leave part of the line restated, behind jobs that
	// were behind it. Replay applies a unit whole or not at all.
	e.inTx = true
	n := 0
	for x := from + 1; x != 0; x = e.jobs.At(x - 1).Next {
		e.restate(x-1, now)
		n++
	}
	e.inTx = false
	return e.endUnit(), n
}
