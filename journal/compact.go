package journal

import (
	"errors"
	"sync/atomic"
	"time"
)

// Compaction of a segmented log (docs/decisions/segmented-log.md), its
// decisions: the live bytes each segment holds (Live), when a round starts
// (the automatic rewrite's growth rule, Grown), which segment it compacts
// next and when it stops (Compact: the oldest, while the log is over half
// again the live set, at most once per segment it began with, a lone
// segment rolled first), and that a segment leaves the manifest only once
// what it held is restated, written and fsynced with no write undone
// meanwhile (CompactSegment). The owner restates, under its lock, through
// the ordinary log (Compactor); the journal decides and drops. Rounds run
// on the owner's goroutine.

// RecOverhead is about what an add record costs in a segment beyond its
// id and payload (framing, queue name, times, counters): live bytes are an
// estimate, for choosing when to compact.
const RecOverhead = 48

// Live is the bytes of live jobs by home segment (the id modulo 65,536):
// about what compacting each would copy. The owner keeps it beside its
// jobs, under its own lock: a job placed, ended or restated moves its
// bytes with one add, on the hot paths.
type Live [1 << 16]int64

// Add counts a job of size bytes (id and payload) homed in home.
func (l *Live) Add(home uint16, size int64) { l[home] += size + RecOverhead }

// Sub uncounts it.
func (l *Live) Sub(home uint16, size int64) { l[home] -= size + RecOverhead }

// Of is the live bytes of segs.
func (l *Live) Of(segs []uint64) (n int64) {
	for _, id := range segs {
		n += l[uint16(id)]
	}
	return n
}

// SegSet is a set of segments by home (the id modulo 65,536).
type SegSet [1 << 10]uint64

// SegSetOf returns the set of segs.
func SegSetOf(segs []uint64) *SegSet {
	var s SegSet
	for _, id := range segs {
		s[uint16(id)>>6] |= 1 << (id & 63)
	}
	return &s
}

// Has says home names a segment of the set. A home that names none names
// a segment a rewrite's install dropped: the job's record is in the
// rewrite's file or later, so the oldest segment's compaction restates it.
func (s *SegSet) Has(home uint16) bool { return s[home>>6]&(1<<(home&63)) != 0 }

// HomedBy says a job homed in home may be homed in seg instead, its last
// whole record being there: home is seg, a segment of segs before it (the
// record was appended before a roll), or one a rewrite dropped; not one
// after it (the job was restated since, and seg may be about to go).
func HomedBy(home uint16, seg uint64, segs []uint64, cur *SegSet) bool {
	if home == uint16(seg) || !cur.Has(home) {
		return true
	}
	for _, id := range segs {
		if id < seg && uint16(id) == home {
			return true
		}
	}
	return false
}

// Compactor is what a round needs of the owner.
type Compactor interface {
	// Live returns the live bytes of segs (Live.Of, under the owner's
	// lock), or closed once the owner is closing: the round ends.
	Live(segs []uint64) (live int64, closed bool)
	// Restate appends, through the log, whatever of the owner's live state
	// segment id holds (a job's last whole record, the state that is not
	// jobs), each as a record that sets it outright, and returns the last
	// ticket.
	Restate(id uint64) (last uint64, err error)
}

// ErrCompactionClosed ends a round whose owner is closing.
var ErrCompactionClosed = errors.New("the log is closing")

// compState is a round's figures; its own atomics.
type compState struct {
	running atomic.Bool
	done    atomic.Uint64 // segments compacted since start
	copied  atomic.Int64  // bytes restated since start
	failed  atomic.Uint64 // rounds that ended in an error
	// hold is the longest the owner's lock was held for the running round
	// (Held), lastHold the last round's: what a client may have waited.
	hold, lastHold atomic.Int64 // ns
}

// Grown says the log of size bytes is due an automatic rewrite or
// compaction: past minSize and grown by percent over its size after the
// last rewrite or round (percent 0: never).
func (j *Journal) Grown(size int64, percent int, minSize int64) bool {
	if percent <= 0 || size < minSize {
		return false
	}
	base := j.Info().BaseSize
	return size >= base+base*int64(percent)/100
}

// ClaimCompaction claims the next round for the caller, unless one runs
// or the log is not segmented. A claim is run by Compact or let go by
// Unclaim.
func (j *Journal) ClaimCompaction() bool {
	return j.seg.active.Load() != 0 && j.comp.running.CompareAndSwap(false, true)
}

// Held counts a hold of the owner's lock for a round's step of d: INFO's
// aof_compaction_max_hold_us is the longest of the last round.
func (j *Journal) Held(d time.Duration) {
	for {
		old := j.comp.hold.Load()
		if int64(d) <= old || j.comp.hold.CompareAndSwap(old, int64(d)) {
			return
		}
	}
}

// Unclaim lets go of a claim that will not run.
func (j *Journal) Unclaim() { j.comp.running.Store(false) }

// Compacting says a round is claimed or running. One atomic load.
func (j *Journal) Compacting() bool { return j.comp.running.Load() }

// Copied counts bytes the owner restated (INFO's aof_compacted_bytes).
func (j *Journal) Copied(n int64) { j.comp.copied.Add(n) }

// Compact runs the claimed round: it compacts the oldest segment while
// the log is over half again the live set, at most once per segment it
// began with (plus the roll that seals a lone segment), and returns the
// segments it dropped. Its end, failed or not, is the base the next
// automatic start measures growth from: a round that cannot finish is not
// started again after every batch.
func (j *Journal) Compact(c Compactor) (n int, err error) {
	defer j.comp.running.Store(false)
	defer func() { j.comp.lastHold.Store(j.comp.hold.Swap(0)) }()
	defer j.Rebase()
	defer func() {
		if err != nil {
			j.comp.failed.Add(1)
		}
	}()
	for range len(j.Segments()) + 1 {
		segs := j.Segments()
		size, _ := j.Sizes()
		live, closed := c.Live(segs)
		if closed {
			return n, ErrCompactionClosed
		}
		if size <= live+live/2 {
			break
		}
		if len(segs) == 1 {
			if err := j.Roll(); err != nil {
				return n, err
			}
			continue
		}
		if err := j.CompactSegment(segs[0], c); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// CompactSegment has the owner restate what segment id, the oldest sealed
// one, holds, waits until that is on disk, and drops the segment.
func (j *Journal) CompactSegment(id uint64, c Compactor) error {
	// A failed write undoes the tickets of its batch: a restatement among
	// them is not in the log, whatever the later tickets say.
	fails := j.Failures()
	last, err := c.Restate(id)
	if err != nil {
		return err
	}
	// Only once the restatements are on disk may the segment go: under
	// everysec and no a write is not yet an fsync.
	if err := j.WaitDurable(last); err != nil {
		return err
	}
	if err := j.Sync(); err != nil {
		return err
	}
	if j.Failures() != fails {
		return errors.New("a log write failed during the compaction; it was abandoned")
	}
	if err := j.DropOldest(id); err != nil {
		return err
	}
	j.comp.done.Add(1)
	return nil
}

// CompactionInfo is what INFO and /metrics show of compaction.
type CompactionInfo struct {
	Running      bool
	Done, Failed uint64
	Copied       int64
	// MaxHold is the longest hold of the owner's lock by a step of the
	// last round (by the running one, while it runs).
	MaxHold time.Duration
}

// CompactionInfo returns the compaction figures.
func (j *Journal) CompactionInfo() CompactionInfo {
	ci := CompactionInfo{Running: j.comp.running.Load(), Done: j.comp.done.Load(),
		Failed: j.comp.failed.Load(), Copied: j.comp.copied.Load(), MaxHold: time.Duration(j.comp.lastHold.Load())}
	if ci.Running {
		ci.MaxHold = time.Duration(j.comp.hold.Load())
	}
	return ci
}
