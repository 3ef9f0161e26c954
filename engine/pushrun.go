package engine

import "slices"

// A push run files the server ids of a queue's list-pushed jobs (LPUSH,
// RPUSH) in the order they were made, instead of in e.sids.
//
// Why: a list push files its job's id so that DELAY.GET, ACK, DELAY.CANCEL
// and the log's replay can find it, yet most list jobs are pushed and
// popped without their id ever being asked for, and Redis files nothing per
// list element. In e.sids each push writes a random cache line (the grouped
// table places a run of 16 ids per line, but the table also grows by
// moving every entry, reading each job's id), 10-12% of the server's CPU on
// a pipelined RPUSH, and each pop from one of many lists misses the cache
// on its cell again to unfile it. Server ids are made in increasing order,
// so appending them to a per-queue array keeps it sorted for free: a push
// is an append, a lookup is a search from the nearer end, and a list's pops
// (FIFO or LIFO, from either end) unfile from an end of its queue's run in
// O(1). A pop from the middle (LREM, a mix of LPUSH and RPUSH) leaves a
// hole that the run drops when the holes are half of it.
//
// The run only replaces e.sids for the jobs it holds (jobPushed): lookup
// asks both, so what the server answers, and what replay rebuilds (replay
// and followers file every id in e.sids), does not depend on where an id
// was filed.
type pushRun struct {
	sids  []uint64 // increasing; a removed entry keeps its id so the order stays searchable
	slots []uint32 // slot+1 of the job with sids[i]; 0: removed
	head  int      // entries before head are gone
	holes int      // removed entries in [head, len)
}

// last is the greatest id in the run, or 0 when it is empty: a new id can
// be appended only above it.
func (r *pushRun) last() uint64 {
	if len(r.sids) == r.head {
		return 0
	}
	return r.sids[len(r.sids)-1]
}

// add appends slot s under sid, which must be above last. O(1) amortized.
func (r *pushRun) add(sid uint64, s uint32) {
	if r.head > 0 && r.head*2 >= len(r.sids) {
		r.compact()
	}
	r.sids = append(r.sids, sid)
	r.slots = append(r.slots, s+1)
}

// locate returns the index of sid in the run, if it is there (removed or
// not). It searches outward from the end nearer in value, so that ids near
// either end, the ones a list's pops and a worker's acks ask for, take a
// few steps however long the run is.
func (r *pushRun) locate(sid uint64) (int, bool) {
	lo, hi := r.head, len(r.sids)
	if lo == hi || sid < r.sids[lo] || sid > r.sids[hi-1] {
		return 0, false
	}
	if sid-r.sids[lo] <= r.sids[hi-1]-sid {
		// Gallop up from the head; every index below lo holds a smaller id.
		b, step := lo, 1
		for ; b+step < hi && r.sids[b+step] < sid; step *= 2 {
			lo = b + step + 1
		}
		hi = min(hi, b+step+1)
	} else {
		// Gallop down from the tail; every index from hi up holds a greater id.
		t, step := hi-1, 1
		for ; t-step >= lo && r.sids[t-step] > sid; step *= 2 {
			hi = t - step
		}
		lo = max(lo, t-step)
	}
	i, ok := slices.BinarySearch(r.sids[lo:hi], sid)
	return lo + i, ok
}

// find returns the slot filed under sid. O(log distance from an end).
func (r *pushRun) find(sid uint64) (uint32, bool) {
	i, ok := r.locate(sid)
	if !ok || r.slots[i] == 0 {
		return 0, false
	}
	return r.slots[i] - 1, true
}

// remove unfiles slot s, filed under sid, and reports whether it was there.
// O(1) at either end, O(log distance) elsewhere, plus amortized compaction.
func (r *pushRun) remove(sid uint64, s uint32) bool {
	// A live slot is filed once, so an end holding s+1 is s's entry: the
	// ends' ids are not read (one cache line less per pop of many lists).
	var i int
	switch n := len(r.slots); {
	case n > r.head && r.slots[r.head] == s+1:
		i = r.head
	case n > r.head && r.slots[n-1] == s+1:
		i = n - 1
	default:
		var ok bool
		if i, ok = r.locate(sid); !ok || r.slots[i] != s+1 {
			return false
		}
	}
	r.slots[i] = 0
	switch {
	case i == r.head:
		r.head++
		for r.head < len(r.slots) && r.slots[r.head] == 0 {
			r.head++
			r.holes--
		}
	case i == len(r.slots)-1:
		n := i
		for n > r.head && r.slots[n-1] == 0 {
			n--
			r.holes--
		}
		r.sids, r.slots = r.sids[:n], r.slots[:n]
	default:
		r.holes++
		if r.holes >= 32 && r.holes*2 >= len(r.slots)-r.head {
			r.compact()
		}
	}
	if r.head == len(r.slots) {
		r.reset()
	}
	return true
}

// compact drops what is before head and every hole, in place, and gives
// back the arrays when the run holds a quarter of them or less. O(len).
func (r *pushRun) compact() {
	live := len(r.slots) - r.head - r.holes
	sids, slots := r.sids[:0], r.slots[:0]
	if cap(r.sids) > 64 && live*4 <= cap(r.sids) {
		sids, slots = make([]uint64, 0, live*2), make([]uint32, 0, live*2)
	}
	for i := r.head; i < len(r.slots); i++ {
		if r.slots[i] != 0 {
			sids = append(sids, r.sids[i])
			slots = append(slots, r.slots[i])
		}
	}
	r.sids, r.slots, r.head, r.holes = sids, slots, 0, 0
}

// reset empties the run, keeping small arrays for the next pushes.
func (r *pushRun) reset() {
	if cap(r.sids) > 1024 {
		*r = pushRun{}
		return
	}
	r.sids, r.slots, r.head, r.holes = r.sids[:0], r.slots[:0], 0, 0
}

// len is the ids filed. O(1).
func (r *pushRun) len() int { return len(r.slots) - r.head - r.holes }

// bytes is the memory the run holds.
func (r *pushRun) bytes() int64 { return int64(cap(r.sids))*8 + int64(cap(r.slots))*4 }
