package wheel

import (
	"math/bits"
)

// Placement: which level and bucket a tick position belongs to, the buckets
// themselves (arrays of handles for levels 0 and 1, intrusive lists through
// the nodes above), and the occupancy bitmaps that find the next non-empty
// one without scanning.

// pos returns the tick that contains time t.
func (w *Wheel) pos(t int64) int64 {
	if uint64(t-minTime) > maxTime-minTime { // one predictable branch for both bounds
		t = min(max(t, minTime), maxTime)
	}
	if w.pow2 {
		return t >> (w.shift & 63)
	}
	q := t / w.tick
	if t%w.tick < 0 {
		q--
	}
	return q
}

// levelOf returns the finest level with room for tick position u >= w.cur,
// Kafka's TimingWheel.add: level L takes u if u is within 64 of its
// buckets from the clock's bucket. Level L>0 never holds the clock's own
// bucket (that range belongs to the finer level), so its 63 usable
// buckets never alias.
//
// With k = 6L, (u>>k) - (cur>>k) is floor(d/2^k) or one more, so the level
// whose span first exceeds d = u-cur is right or one too fine. (A loop
// trying each level in turn was the top of Add's profile.)
func (w *Wheel) levelOf(u int64) uint {
	d := uint64(u - w.cur)
	if d < fineSize {
		return 0
	}
	lv := (uint(bits.Len64(d))-1-fineBits)/slotBits + 1
	if sh := shiftOf(lv); uint64(u>>sh-w.cur>>sh) >= wheelSize {
		lv++
	}
	return lv
}

// shiftOf returns log2 of the width of level lv's buckets in ticks: 0 for
// level 0, then fineBits, and slotBits more for each level above 1.
func shiftOf(lv uint) uint {
	if lv == 0 {
		return 0
	}
	return fineBits + slotBits*(lv-1)
}

// slotAt returns the bucket of level lv that holds tick position u.
func slotAt(u int64, lv uint) uint32 {
	if lv == 0 {
		return uint32(u) & fineMask
	}
	return uint32(u>>(shiftOf(lv)&63)) & slotMask
}

// arrBucket returns bucket slot of array level lv.
func (w *Wheel) arrBucket(lv uint, slot uint32) *abucket {
	if lv == 0 {
		return &w.arr0[slot&fineMask]
	}
	return &w.arr1[slot&slotMask]
}

// vacate marks bucket slot of level lv empty.
func (w *Wheel) vacate(lv uint, slot uint32) {
	if lv != 0 {
		w.levels[lv].occupied &^= 1 << (slot & slotMask)
		return
	}
	i := slot >> 6 & (fineWords - 1)
	if w.fine[i] &^= 1 << (slot & 63); w.fine[i] == 0 {
		w.fineSum &^= 1 << i
	}
}

// occupy marks bucket slot of level lv non-empty.
func (w *Wheel) occupy(lv uint, slot uint32) {
	if lv != 0 {
		w.levels[lv].occupied |= 1 << (slot & slotMask)
		return
	}
	i := slot >> 6 & (fineWords - 1)
	w.fine[i] |= 1 << (slot & 63)
	w.fineSum |= 1 << i
}

// nextFine returns the first non-empty level-0 tick at or after the clock
// (level 0 holds the 1,024 ticks from there). It looks at the clock's own
// word from the clock's bucket on; failing that, fineSum rotated so that
// the next word is bit 0 names the next non-empty word. If that is the
// clock's own word again, its buckets before the clock's are a whole turn
// ahead.
func (w *Wheel) nextFine() (int64, bool) {
	if w.fineSum == 0 {
		return 0, false
	}
	s := uint32(w.cur) & fineMask
	i := s >> 6
	if m := w.fine[i] >> (s & 63); m != 0 {
		return w.cur + int64(bits.TrailingZeros64(m)), true
	}
	j := (i + 1 + uint32(bits.TrailingZeros16(bits.RotateLeft16(w.fineSum, -int(i+1))))) & (fineWords - 1)
	t := j<<6 + uint32(bits.TrailingZeros64(w.fine[j]))
	return w.cur + int64((t-s)&fineMask), true
}

// relink appends h, due at tick position u >= w.cur, to the tail of its
// bucket during a cascade. Unlike Add it never needs a new level: a
// cascaded entry always moves to a finer one.
func (w *Wheel) relink(h uint32, n *node, u int64) {
	lv := w.levelOf(u)
	if slot := slotAt(u, lv); lv < arrLevels {
		w.pushArr(h, n, lv, slot, movedBit)
	} else {
		w.push(h, n, lv, slot)
	}
}

// pushArr appends n (handle h) to bucket slot of array level lv. On level
// 0, an entry moved down (moved is movedBit) goes behind the entries moved
// before it, ahead of the direct adds. An entry waits on a coarser level
// only while its tick is 64 or more ticks away, and Add files every later
// entry for that tick on level 0 directly, so what moves down came first:
// behind the direct adds, nearly every bucket fired out of seq order under
// spread delays and had to be sorted (BenchmarkSpreadDelays). fire still
// checks the order, so a bucket this leaves unsorted (an entry from two
// levels up behind one from one level up, or a drain pass that moved a
// later entry of the tick before an earlier one) is sorted as before. On
// level 1 every entry goes to one array, in the order it came, as to a
// list's tail.
func (w *Wheel) pushArr(h uint32, n *node, lv uint, slot uint32, moved uint32) {
	b := w.arrBucket(lv, slot)
	if b.live == 0 { // an array bucket is occupied iff it has live entries
		w.occupy(lv, slot)
		b.mv, b.dr = b.mv[:0], b.dr[:0]
	}
	a := &b.dr
	if lv != 0 {
		moved = 0
	} else if moved != 0 {
		a = &b.mv
	}
	if len(*a) >= movedBit-1 {
		panic("wheel: more than 2^30 entries in one bucket")
	}
	n.next, n.prev = arrTag|uint32(lv), uint32(len(*a)+1)|moved
	*a = append(*a, h)
	b.live++
}

// removeArr takes the entry of node n, whose links are next and prev, out
// of its array bucket: it leaves a gone mark, or drops the array's last
// entry. The bucket is freed when its last entry goes. O(1).
func (w *Wheel) removeArr(n *node, next, prev uint32) {
	lv := uint(next &^ arrTag)
	slot := slotAt(w.pos(n.due), lv)
	b := w.arrBucket(lv, slot)
	a := &b.dr
	if prev&movedBit != 0 {
		a = &b.mv
	}
	i := int(prev&^movedBit) - 1
	if i == len(*a)-1 {
		*a = (*a)[:i]
	} else {
		(*a)[i] = gone
	}
	if b.live--; b.live == 0 {
		w.vacate(lv, slot)
	}
}

// push links n (handle h) at the tail of bucket slot of level lv > 0.
func (w *Wheel) push(h uint32, n *node, lv uint, slot uint32) {
	l := &w.levels[lv]
	mark := endTag | ((uint32(lv)<<slotBits | slot) + 1)
	if l.occupied&(1<<slot) == 0 {
		l.occupied |= 1 << slot
		l.head[slot] = h
		n.prev = mark
	} else {
		t := l.tail[slot]
		w.node(t).next = h
		n.prev = t
	}
	l.tail[slot] = h
	n.next = mark
}

// addLevels creates the overflow levels up to lv, Kafka's addOverflowWheel.
//
//go:noinline
func (w *Wheel) addLevels(lv uint) {
	for lv >= uint(len(w.levels)) {
		w.levels = append(w.levels, level{})
	}
}

// nextEvent returns the clock position of the earliest pending work and
// its level: for level 0, p = t+1 where t is the earliest non-empty tick
// (it fires once tick t completes); for level L > 0, p is the first tick of
// the earliest non-empty bucket, where it must cascade. Rotating each
// level's occupancy word so the clock's bucket is bit 0 turns "next
// non-empty bucket" into one count-trailing-zeros, as the Linux timer
// wheel's bitmaps do.
func (w *Wheel) nextEvent() (p int64, lv int, ok bool) {
	if t, ok0 := w.nextFine(); ok0 {
		p, ok = t+1, true
	}
	for i := 1; i < len(w.levels); i++ {
		occ := w.levels[i].occupied
		if occ == 0 {
			continue
		}
		sh := shiftOf(uint(i))
		c := w.cur >> sh
		b := c + int64(bits.TrailingZeros64(bits.RotateLeft64(occ, -int(c&slotMask))))
		if q := b << sh; !ok || q < p {
			p, lv, ok = q, i, true
		}
	}
	return p, lv, ok
}
