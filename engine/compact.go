package engine

import (
	"errors"
	"time"

	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/journal"
	"github.com/delayd/delayd/record"
)

// Compaction of the segmented log (docs/decisions/segmented-log.md). The
// journal decides a round (which segment, when it starts and ends, the drop
// once its restatements are durable: journal/compact.go); the engine
// restates under its lock. The
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
// long as a rewrite's chunk), compactScan the slots looked at, and
// compactHold the hold itself: a job whose payload is on disk is read back
// to be restated (a pread each), so 1,024 of them hold the lock longer
// than 1,024 in memory, the more so on a busy machine. Variables for the
// tests, which crash between chunks.
var (
	compactChunk        = 1024
	compactScan  uint32 = 16 << 10
	compactHold         = time.Millisecond
)

// startCompaction starts a compaction round in the background unless one,
// or a rewrite, is running. It reports whether it started one.
func (e *Engine) startCompaction(reason string) bool {
	jn := e.journal
	if jn == nil || !jn.ClaimCompaction() {
		return false
	}
	// Rewrite checks the claim and begins under the lock: either it began
	// first and is seen here, or it sees the claim and refuses.
	e.mu.Lock()
	busy := jn.Rewriting() || e.closed
	if !busy {
		e.bg.Add(1)
	}
	e.mu.Unlock()
	if busy {
		jn.Unclaim()
		return false
	}
	go func() {
		defer e.bg.Done()
		start := time.Now()
		n, err := jn.Compact(compactor{e})
		ev := e.opts.Logger.Info()
		if err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, journal.ErrCompactionClosed) {
			ev = e.opts.Logger.Error().Err(err)
		}
		ev.Str("reason", reason).Int("segments", n).Dur("took_ms", time.Since(start)).
			Dur("max_hold_ms", jn.CompactionInfo().MaxHold).Msg("log compaction")
	}()
	return true
}

// compactor is the engine as a round's journal.Compactor.
type compactor struct{ e *Engine }

func (c compactor) Live(segs []uint64) (int64, bool) {
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	return c.e.j.live.Of(segs), c.e.closed
}

func (c compactor) Restate(id uint64) (uint64, error) { return c.e.restateSegment(id) }

// restateSegment restates at the head what segment id, the oldest, holds
// of the live state, and returns the last ticket.
func (e *Engine) restateSegment(id uint64) (uint64, error) {
	victim, cur := uint16(id), journal.SegSetOf(e.journal.Segments())
	ft := e.pauseTimer() // the pause between chunks, as a rewrite's
	if ft != nil {
		defer ft.Close()
	}
	if e.opts.Horizon > 0 {
		// Its payloads on disk are read back (readVictims) from the page
		// cache.
		e.journal.Warm(id, func() { rewriteYield(ft) })
	}
	if e.far.set != nil {
		if err := e.checkpoint(id, e.farPacer(ft, true)); err != nil { // far jobs' records in it are covered first (far.go)
			return 0, err
		}
	}
	wr, err := e.begin(0)
	if err != nil {
		return 0, err
	}
	held := time.Now()
	meta := record.Rec{Op: record.Meta, Time: wr.now, SID: e.lastSID, Seq: e.seq}
	last := e.logRec(&meta)
	for _, r := range e.stateRecs(wr.now) {
		last = max(last, e.logRec(&r))
	}
	e.journal.Held(time.Since(held))
	wr.end()
	var backs []jobs.Back
	for s := uint32(0); ; {
		backs = e.readVictims(s, victim, cur, backs[:0])
		wr, err := e.begin(0)
		if err != nil {
			return 0, err
		}
		held := time.Now()
		for i := range backs {
			e.jobs.PutBack(&backs[i]) // unless the job changed meanwhile: then it is read under the lock
		}
		n := e.jobs.Len()
		if s >= n {
			wr.end()
			return last, nil
		}
		restated, timed := 0, 0
		for end := min(s+compactScan, n); s < end && restated < compactChunk; s++ {
			if restated-timed >= 64 {
				if timed = restated; time.Since(held) >= compactHold {
					break // the next chunk starts at s
				}
			}
			if h := e.jobs.Home(s); h != victim && cur.Has(h) {
				continue // homed in a later segment
			}
			j := e.jobs.At(s)
			if j.State == jobs.StateFree || !e.queues[j.Queue].live {
				continue // gone, or going with its deleted queue
			}
			var t uint64
			var k int
			if j.State == jobs.StateReady {
				t, k = e.restateLane(s, victim, cur, wr.now)
			} else {
				t, k = e.restate(s, wr.now), 1
			}
			last, restated = max(last, t), restated+k
		}
		e.journal.Held(time.Since(held))
		wr.end()
		rewriteYield(ft)
	}
}

// readVictims reads back, without the lock, the payloads on disk of the
// jobs the step from slot s may restate (homed in victim, or in a segment
// gone: as the step picks them), into out, for the step to put back
// (jobs.Table.PutBack) before it restates them. Under the lock each would
// be a pread: a page-cache miss there (the segment read through by Warm
// evicted since, a busy disk) held the lock for milliseconds a read, and
// every client with it. As readAhead does: found under the lock, read
// without it.
func (e *Engine) readVictims(s uint32, victim uint16, cur *journal.SegSet, out []jobs.Back) []jobs.Back {
	e.mu.Lock()
	for end := min(s+compactScan, e.jobs.Len()); s < end && len(out) < compactChunk; s++ {
		if h := e.jobs.Home(s); h != victim && cur.Has(h) {
			continue
		}
		if j := e.jobs.At(s); j.Flags&jobs.FlagOnDisk != 0 && j.State != jobs.StateFree && e.queues[j.Queue].live {
			out = append(out, jobs.BackOf(s, j))
		}
	}
	e.mu.Unlock()
	for i := range out {
		e.jobs.ReadBack(&out[i])
	}
	return out
}

// restate is a compaction's rehome, counted as bytes it copied.
func (e *Engine) restate(s uint32, now int64) uint64 {
	t := e.rehome(s, now)
	e.journal.Copied(jobs.DataSize(e.jobs.At(s)) + journal.RecOverhead)
	return t
}

// rehome logs the job in slot s whole, as it is, and makes the head its
// home. Called with mu held. It returns the record's ticket.
func (e *Engine) rehome(s uint32, now int64) uint64 {
	r := e.wholeRec(s, true, now)
	t := e.logRec(&r)
	if j := e.jobs.At(s); j.Flags&jobs.FlagOnDisk != 0 {
		e.jobs.Unspill(j, r.Payload) // its segment goes; the tail spills it again from the head
	}
	size := jobs.DataSize(e.jobs.At(s))
	h := e.homeSeg()
	e.j.live.Sub(e.jobs.Home(s), size)
	e.j.live.Add(h, size)
	e.jobs.SetHome(s, h)
	return t
}

// restateLane restates the ready job in slot s with its lane from the
// first job whose home is victim (or a segment gone: SegSet.Has) to the
// tail, in order, so that replay puts them back in line as they are.
// Called with mu held. It returns the last ticket and the jobs restated.
func (e *Engine) restateLane(s uint32, victim uint16, cur *journal.SegSet, now int64) (uint64, int) {
	from := s
	for p := e.jobs.At(s).Prev; p != 0; p = e.jobs.At(p - 1).Prev {
		if h := e.jobs.Home(p - 1); h == victim || !cur.Has(h) {
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
