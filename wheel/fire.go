package wheel

import (
	"cmp"
	"slices"
)

// Firing and cascading: a level-0 bucket emptied in (due, seq) order when
// its tick completes, and a coarser bucket re-added to finer levels when the
// clock reaches it. Advance (wheel.go) calls both; drain.go moves a coarse
// bucket ahead of its time.

// fire empties level-0 bucket slot into dst in (due, seq) order. Only
// one tick lives in a level-0 bucket and buckets fire in tick order, so
// ordering each bucket orders the whole batch. The moved entries, then
// the direct adds, usually arrive in order; a bucket they leave unordered
// (see pushL0) is sorted.
func (w *Wheel) fire(slot uint32, dst []uint32) []uint32 {
	w.vacate(0, slot)
	b := &w.arr0[slot]
	start := len(dst)
	sorted := true
	var pd int64
	ph := uint32(0)
	for _, hs := range [2][]uint32{b.mv, b.dr} {
		for _, h := range hs {
			if h == gone {
				continue
			}
			n := w.node(h)
			// seq is asked for only between equal due times (with
			// NewOrdered it is a call into the owner).
			if len(dst) > start && (n.due < pd || n.due == pd && sorted && w.seq(h) < w.seq(ph)) {
				sorted = false
			}
			pd, ph = n.due, h
			dst = append(dst, h)
			n.next, n.prev = 0, 0
		}
	}
	w.count -= len(dst) - start
	b.mv, b.dr, b.live = keepArr(b.mv, maxKeptFine), keepArr(b.dr, maxKeptFine), 0
	if !sorted {
		w.sortFired(dst[start:])
	}
	return dst
}

// keepArr empties a walked bucket's array, keeping it for the slot's next
// turn unless a rare huge bucket made it larger than limit entries.
func keepArr(a []uint32, limit int) []uint32 {
	if cap(a) > limit {
		return nil
	}
	return a[:0]
}

// maxKeptFine and maxKeptArr bound the arrays a bucket keeps between
// turns: 1,024 level-0 buckets of two arrays, 16 MiB at most, and 64
// level-1 buckets of one, 4 MiB. Level 0's bound is above the 1,000
// entries a bucket gets at a million adds a second spread over a second,
// so such a load does not regrow them every turn.
const (
	maxKeptFine = 1 << 11
	maxKeptArr  = 1 << 14
)

// sortKey is a fired handle with what orders it, read once: a sort that
// asked the node and the owner at every comparison spent most of its time
// there (a bucket that took cascaded entries behind direct adds is the
// usual case under spread delays, BenchmarkSpreadDelays).
type sortKey struct {
	due int64
	seq uint64
	h   uint32
}

// maxKeptKeys bounds the sort buffer kept between fires (24 bytes a key):
// a rare huge bucket does not pin its buffer.
const maxKeptKeys = 1 << 16

// sortFired sorts fired handles by (due, seq).
func (w *Wheel) sortFired(hs []uint32) {
	w.sorts++
	keys := w.keys[:0]
	for _, h := range hs {
		keys = append(keys, sortKey{w.node(h).due, w.seq(h), h})
	}
	slices.SortFunc(keys, func(a, b sortKey) int {
		if c := cmp.Compare(a.due, b.due); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	for i := range keys {
		hs[i] = keys[i].h
	}
	if cap(keys) <= maxKeptKeys {
		w.keys = keys[:0]
	} else {
		w.keys = nil
	}
}

// cascade re-adds every entry of a coarser bucket whose start the clock
// has reached, Kafka's bucket.flush(reinsert). Each entry lands on a
// strictly finer level, since it is now less than one bucket of this level
// away, and none is due yet: its tick is at or after the clock.
func (w *Wheel) cascade(lv, slot int) {
	w.endPass(lv) // a pass on this bucket is overtaken: all of it moves now
	l := &w.levels[lv]
	l.occupied &^= 1 << slot
	if lv < arrLevels {
		// Each entry moves to level 0, never to this array.
		b := &w.arr1[slot]
		for _, h := range b.dr {
			if h != gone {
				w.relink(h, w.node(h), w.pos(w.node(h).due))
				w.work++
			}
		}
		b.mv, b.dr, b.live = keepArr(b.mv, maxKeptArr), keepArr(b.dr, maxKeptArr), 0
		return
	}
	for h := l.head[slot]; ; {
		n := w.node(h)
		next := n.next
		w.relink(h, n, w.pos(n.due))
		w.work++
		if next&endTag != 0 {
			break
		}
		h = next
	}
}
