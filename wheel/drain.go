package wheel

import (
	"math"
	"math/bits"
)

// Draining a coarse bucket ahead of its time.
//
// A bucket of level L > 0 holds every entry due in its 1024*64^(L-1)
// ticks that was added while its time was still far. When the clock
// reaches the bucket all of it must move to finer levels at once
// (cascade), in one Advance, under the owner's lock: with delays spread
// over minutes a level-2 bucket (65 s with 1 ms ticks) holds hundreds of
// thousands of entries, and moving them stalls every fire and every client
// for milliseconds, a list walk over nodes scattered across the slab.
//
// So each Advance also drains, for every level L > 0, the level's next
// bucket once the clock is within a sixteenth of level L-1's ring of its
// start (ahead: 64 ticks for level 1, whose finer level has 1,024
// buckets; 4 buckets of level L-1 above that, 4 s for level 2): a pass
// walks the bucket from its head, at most drainSlice entries per Advance,
// and moves every entry that already fits a finer level (levelOf, against
// the clock as it is: the placement Add would choose, so the wheel stays
// exact). An entry that does not fit yet, because its level-(L-1) bucket
// is still a whole ring away, stays where it is; at most a sixteenth of
// the bucket's entries are left that way, and a new pass may start once
// the clock reaches the next sub-bucket, when more of them fit. Whatever
// is left when the clock reaches the bucket cascades as before.
//
// While a pass is under way NextDeadline names the next tick, so the
// owner's timer calls Advance once per tick and the bucket moves in slices.
// At most drainSlice entries are visited per level per Advance: with 1 ms
// ticks a level-1 bucket can hold 64*1024 entries (64k adds/s aimed at
// that range) before the cascade at its start has any left to move, and
// a level-2 bucket 4096*1024.
//
// Nothing fires earlier or later than before: fire still sorts each
// level-0 bucket by (due, seq), and an entry moves only to the bucket Add
// would have put it in. Remove stays O(1): a removed cursor hands the pass
// to its successor (unhook).
const drainSlice = 1024

// ahead returns how many buckets of level lv-1 before the start of level
// lv's next bucket its drain may begin: a sixteenth of level lv-1's ring.
func ahead(lv int) int64 {
	if lv == 1 {
		return fineSize / 16
	}
	return wheelSize / 16
}

// drain advances the passes: for each level above 0, start a pass on the
// next bucket if its time is near and no pass began in this sub-bucket,
// then visit up to drainSlice of its entries. Called by Advance with the
// clock moved.
func (w *Wheel) drain() {
	for lv := 1; lv < len(w.levels); lv++ {
		l := &w.levels[lv]
		ps := &w.passes[lv]
		if l.occupied == 0 {
			w.endPass(lv)
			continue
		}
		sh, subSh := shiftOf(uint(lv)), shiftOf(uint(lv-1))
		c := w.cur >> sh
		b := c + int64(bits.TrailingZeros64(bits.RotateLeft64(l.occupied, -int(c&slotMask))))
		start := b << sh
		sub := w.cur >> subSh
		if w.draining&(1<<lv) != 0 && ps.b != b {
			w.endPass(lv) // cannot happen: a pass's bucket is the level's next until it cascades
		}
		if w.draining&(1<<lv) == 0 {
			if start-w.cur > ahead(lv)<<subSh || sub == ps.sub {
				continue
			}
			idx := 0
			if lv < arrLevels && ps.b == b {
				// A new pass over the same array resumes where the last
				// ended: behind it are marks of what moved down, and the
				// few entries that did not fit yet, which cascade at the
				// bucket's start. Restarting walked the marks each tick.
				idx = ps.idx
			}
			ps.b, ps.sub, ps.cur, ps.idx = b, sub, l.head[b&slotMask], idx
			w.draining |= 1 << lv
		}
		if lv < arrLevels {
			w.drainArr(lv, ps, start-w.cur)
			continue
		}
		for range drainSlice {
			h := ps.cur
			n := w.node(h)
			next, more := w.after(n)
			if more {
				ps.cur = next
			} else {
				w.endPass(lv)
			}
			w.work++
			if u := w.pos(n.due); w.levelOf(u) < uint(lv) {
				w.Remove(h)
				w.count++
				w.relink(h, n, u)
			}
			if !more {
				break
			}
		}
	}
}

// drainArr is drain's slice of a pass over an array bucket: its cursor is
// an index, which a removal leaves valid (a removed entry is marked gone,
// or was the last). A bucket emptied and refilled under the pass is
// walked from where the pass was, or not at all: what the pass does not
// move cascades at the bucket's start, as without draining.
//
// An array knows its length, so a slice here is at least drainSlice and
// at least what is left divided by the left ticks before the bucket's
// start (left): a crowded bucket moves in even slices over its window
// rather than mostly in its cascade. A second of delays all added at once,
// a million of them, is one level-1 bucket: with fixed slices the cascade
// at its start moved 935k entries in one Advance; now each of the 64
// ticks before it moves about 16k, and the cascade the few (about 3%) that
// did not fit level 0 yet when the pass reached them.
func (w *Wheel) drainArr(lv int, ps *pass, left int64) {
	b := w.arrBucket(uint(lv), uint32(ps.b))
	for range max(drainSlice, (len(b.dr)-ps.idx)/int(max(left, 1))+1) {
		if ps.idx >= len(b.dr) {
			break
		}
		h := b.dr[ps.idx]
		ps.idx++
		w.work++
		if h == gone {
			continue
		}
		n := w.node(h)
		if u := w.pos(n.due); w.levelOf(u) < uint(lv) {
			w.Remove(h)
			w.count++
			w.relink(h, n, u)
		}
	}
	if ps.idx >= len(b.dr) {
		w.endPass(lv)
	}
}

// nextDrain returns the clock position at which drain next has work: the
// next tick while a pass is under way, else the earliest moment a level's
// next bucket comes within reach (and a new sub-bucket has begun since the
// level's last pass); ok is false if no bucket can be drained before its
// own cascade.
func (w *Wheel) nextDrain() (q int64, ok bool) {
	if w.draining != 0 {
		return w.cur + 1, true
	}
	for lv := 1; lv < len(w.levels); lv++ {
		occ := w.levels[lv].occupied
		if occ == 0 {
			continue
		}
		sh, subSh := shiftOf(uint(lv)), shiftOf(uint(lv-1))
		c := w.cur >> sh
		b := c + int64(bits.TrailingZeros64(bits.RotateLeft64(occ, -int(c&slotMask))))
		start := b << sh
		at := max(start-ahead(lv)<<subSh, w.cur+1)
		if s := w.passes[lv].sub; s != math.MinInt64 {
			at = max(at, (s+1)<<subSh)
		}
		if at < start && (!ok || at < q) {
			q, ok = at, true
		}
	}
	return q, ok
}

// unhook keeps the passes' cursors on live entries: Remove calls it before
// unlinking h, whose successor is next.
func (w *Wheel) unhook(h, next uint32) {
	for m := w.draining &^ (1<<arrLevels - 1); m != 0; m &= m - 1 { // array levels' cursors are indexes
		lv := bits.TrailingZeros16(m)
		if ps := &w.passes[lv]; ps.cur == h {
			if next&endTag != 0 {
				w.endPass(lv)
			} else {
				ps.cur = next
			}
		}
	}
}

// endPass stops level lv's pass, if any.
func (w *Wheel) endPass(lv int) { w.draining &^= 1 << lv }

// after returns the handle after n in its bucket, and false at the tail.
func (w *Wheel) after(n *node) (uint32, bool) { return n.next, n.next&endTag == 0 }
