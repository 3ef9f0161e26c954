package wheel

import (
	"cmp"
	"math/bits"
	"slices"
)

// Earliest appends to dst the first n scheduled handles that keep accepts,
// in (due, seq) order, and returns dst and true. It only reads the wheel:
// keep is called at most once per handle visited and must not change the
// wheel. of, when not negative, is how many scheduled handles keep accepts
// in all (the caller often knows: a queue counts its delayed jobs); the
// walk stops once it has seen that many, instead of visiting every bucket.
// budget, when positive, bounds the handles visited: past it Earliest
// gives up and returns dst unchanged and false.
//
// Why a budget: a bucket list is a chain through nodes scattered over the
// slab, so each handle visited is a cache miss; a caller that can scan its
// own records sequentially instead does that about 60 times faster per
// record, and should when the walk would visit more than a small fraction
// of them (a filter that keeps few handles, all due late).
//
// The wheel keeps no total order: a bucket of level L holds 64^L ticks'
// handles unordered, and a finer level may hold handles due inside the
// next bucket of a coarser one. So the walk visits the non-empty buckets in
// order of their first tick and keeps the n best accepted handles so far in
// a bounded max-heap; it stops at the first bucket whose first tick comes
// after the tick of the n-th best: nothing in it, or after it, can come
// earlier. Sorting every handle would cost O(N log N) for all N scheduled.
//
// Cost: O(B log B) to order the B non-empty buckets (at most 64 per
// level), plus O(log n) per handle in the buckets visited: those that start
// before the n-th accepted handle's tick or, with fewer than n accepted
// (or of not yet reached), all of them; at most budget. The heap is one
// allocation of n handles.
func (w *Wheel) Earliest(dst []uint32, n, of, budget int, keep func(h uint32) bool) ([]uint32, bool) {
	if n <= 0 || of == 0 || w.count == 0 {
		return dst, true
	}
	type bucket struct {
		start    int64 // first tick position the bucket can hold
		lv, slot int
	}
	var buckets []bucket
	for i, occ := range w.fine {
		for occ != 0 {
			s := i<<6 + bits.TrailingZeros64(occ)
			occ &= occ - 1
			// The tick: within the 1,024 from the clock (see nextFine).
			buckets = append(buckets, bucket{start: w.cur + (int64(s)-w.cur)&fineMask, lv: 0, slot: s})
		}
	}
	for i := 1; i < len(w.levels); i++ {
		occ := w.levels[i].occupied
		sh := shiftOf(uint(i))
		c := w.cur >> sh
		for occ != 0 {
			s := bits.TrailingZeros64(occ)
			occ &= occ - 1
			// The bucket's index in its level: within the 64 from the
			// clock's (see levelOf, and nextEvent which computes the same).
			b := c + (int64(s)-c)&slotMask
			buckets = append(buckets, bucket{start: b << sh, lv: i, slot: s})
		}
	}
	slices.SortFunc(buckets, func(a, b bucket) int { return cmp.Compare(a.start, b.start) })

	less := func(a, b uint32) bool { // a before b in (due, seq)
		na, nb := w.node(a), w.node(b)
		return na.due < nb.due || na.due == nb.due && w.seq(a) < w.seq(b)
	}
	// heap is a max-heap: heap[0] is the latest of the best n so far.
	size := min(n, w.count)
	if of > 0 {
		size = min(size, of)
	}
	heap := make([]uint32, 0, size)
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= len(heap) {
				return
			}
			if r := l + 1; r < len(heap) && less(heap[l], heap[r]) {
				l = r
			}
			if !less(heap[i], heap[l]) {
				return
			}
			heap[i], heap[l] = heap[l], heap[i]
			i = l
		}
	}
	up := func(i int) {
		for i > 0 {
			p := (i - 1) / 2
			if !less(heap[p], heap[i]) {
				return
			}
			heap[i], heap[p] = heap[p], heap[i]
			i = p
		}
	}
	seen, visited := 0, 0
	// take weighs one handle; it reports whether the walk is over (of
	// handles seen) and whether the budget ran out.
	take := func(h uint32) (done, over bool) {
		if visited++; budget > 0 && visited > budget {
			return true, true
		}
		if !keep(h) {
			return false, false
		}
		seen++
		switch {
		case len(heap) < n:
			heap = append(heap, h)
			up(len(heap) - 1)
		case less(h, heap[0]):
			heap[0] = h
			down(0)
		}
		return seen == of, false
	}
walk:
	for _, b := range buckets {
		if len(heap) == n && w.pos(w.node(heap[0]).due) < b.start {
			break // every handle here and after is due in a later tick
		}
		if b.lv < arrLevels {
			ab := w.arrBucket(uint(b.lv), uint32(b.slot))
			for _, hs := range [2][]uint32{ab.mv, ab.dr} {
				for _, h := range hs {
					if h == gone {
						continue
					}
					if done, over := take(h); over {
						return dst, false
					} else if done {
						break walk
					}
				}
			}
			continue
		}
		l := &w.levels[b.lv]
		for h, more := l.head[b.slot], true; more; h = w.node(h).next {
			more = w.node(h).next&endTag == 0
			if done, over := take(h); over {
				return dst, false
			} else if done {
				break walk
			}
		}
	}
	start := len(dst)
	dst = append(dst, heap...)
	slices.SortFunc(dst[start:], func(a, b uint32) int {
		if less(a, b) {
			return -1
		}
		if less(b, a) {
			return 1
		}
		return 0
	})
	return dst, true
}
