package engine

import (
	"slices"
	"sort"
	"unsafe"
)

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
// so appending them to a per-queue run keeps it sorted for free: a push is
// an append, a lookup a search from the nearer end, and a list's pops (FIFO
// or LIFO, from either end) unfile from an end of its queue's run in O(1).
// A pop from the middle (LREM, a mix of LPUSH and RPUSH) leaves a hole.
//
// The run is a deque of blocks, not one array: an array that grows by
// copying, or drops its consumed head by copying, held the engine's lock
// for 12 ms at 4M ids (the copy, and the fresh pages it faults in), where
// a block is one small allocation. A block emptied is dropped; a block
// inside the run left sparse by holes merges with a neighbour it fits in,
// so the blocks stay about half full whatever is removed.
//
// The run only replaces e.sids for the jobs it holds (jobPushed): lookup
// asks both, so what the server answers, and what replay rebuilds (replay
// and followers file every id in e.sids), does not depend on where an id
// was filed.
type pushRun struct {
	blocks []*runBlock // in id order; none is empty
	mem    int64       // bytes of its blocks (INFO's memory)
}

// runBlockLen is the most entries of a block: 6 KiB, one allocation per
// 512 pushes, and a bounded merge. A run's first block holds runBlockMin
// and each new block twice the last, so that the many queues of a server
// with a job or two each pay under 200 bytes for their run.
const (
	runBlockLen = 512
	runBlockMin = 8
)

// runBlock holds ids in increasing order in [lo, hi); a removed entry keeps
// its id, so the order stays searchable, and has slot 0.
type runBlock struct {
	lo, hi, live int
	sids         []uint64 // len is the block's capacity
	slots        []uint32 // slot+1
}

func (r *pushRun) newBlock(n int) *runBlock {
	b := &runBlock{sids: make([]uint64, n), slots: make([]uint32, n)}
	r.mem += b.bytes()
	r.blocks = append(r.blocks, b)
	return b
}

func (b *runBlock) bytes() int64 { return int64(unsafe.Sizeof(*b)) + int64(len(b.sids))*12 }

// drop removes block bi from the run.
func (r *pushRun) drop(bi int) {
	r.mem -= r.blocks[bi].bytes()
	if bi == 0 {
		// The usual end of a block of a FIFO: drop it without moving the
		// others (append moves them when it next grows the slice).
		r.blocks[0] = nil
		r.blocks = r.blocks[1:]
		return
	}
	r.blocks = slices.Delete(r.blocks, bi, bi+1)
}

// last is the greatest id in the run, or 0 when it is empty: a new id can
// be appended only above it.
func (r *pushRun) last() uint64 {
	if len(r.blocks) == 0 {
		return 0
	}
	b := r.blocks[len(r.blocks)-1]
	return b.sids[b.hi-1]
}

// add appends slot s under sid, which must be above last. O(1).
func (r *pushRun) add(sid uint64, s uint32) {
	var b *runBlock
	if k := len(r.blocks); k == 0 {
		b = r.newBlock(runBlockMin)
	} else if b = r.blocks[k-1]; b.hi == len(b.sids) {
		b = r.newBlock(min(2*len(b.sids), runBlockLen))
	}
	b.sids[b.hi], b.slots[b.hi] = sid, s+1
	b.hi++
	b.live++
}

// locate returns the block and index of sid in the run, if it is there
// (removed or not). The end blocks, where a list's pops and a worker's acks
// go, are looked at first; other blocks by a binary search on their last id.
func (r *pushRun) locate(sid uint64) (int, int, bool) {
	k := len(r.blocks)
	if k == 0 {
		return 0, 0, false
	}
	bi := 0
	if first := r.blocks[0]; sid > first.sids[first.hi-1] {
		bi = k - 1
		if last := r.blocks[k-1]; sid < last.sids[last.lo] {
			bi = 1 + sort.Search(k-2, func(i int) bool {
				b := r.blocks[1+i]
				return b.sids[b.hi-1] >= sid
			})
		}
	}
	b := r.blocks[bi]
	i, ok := slices.BinarySearch(b.sids[b.lo:b.hi], sid)
	return bi, b.lo + i, ok
}

// find returns the slot filed under sid. O(1) in the end blocks, O(log
// blocks) elsewhere.
func (r *pushRun) find(sid uint64) (uint32, bool) {
	bi, i, ok := r.locate(sid)
	if !ok || r.blocks[bi].slots[i] == 0 {
		return 0, false
	}
	return r.blocks[bi].slots[i] - 1, true
}

// remove unfiles slot s, filed under sid, and reports whether it was there.
// O(1) at either end of the run, as find elsewhere.
func (r *pushRun) remove(sid uint64, s uint32) bool {
	k := len(r.blocks)
	if k == 0 {
		return false
	}
	// A live slot is filed once, so an end holding s+1 is s's entry: the
	// ends' ids are not read (one cache line less per pop of many lists).
	var bi, i int
	if b := r.blocks[0]; b.slots[b.lo] == s+1 {
		bi, i = 0, b.lo
	} else if b := r.blocks[k-1]; b.slots[b.hi-1] == s+1 {
		bi, i = k-1, b.hi-1
	} else {
		var ok bool
		if bi, i, ok = r.locate(sid); !ok || r.blocks[bi].slots[i] != s+1 {
			return false
		}
	}
	b := r.blocks[bi]
	b.slots[i] = 0
	b.live--
	switch {
	case b.live == 0:
		r.drop(bi)
		return true
	case i == b.lo:
		for b.slots[b.lo] == 0 {
			b.lo++
		}
	case i == b.hi-1:
		for b.slots[b.hi-1] == 0 {
			b.hi--
		}
	}
	// A sparse block inside the run (removals from the middle) merges with
	// a neighbour it fits in. The end blocks, which a FIFO or a stack
	// drains one entry at a time, are left to empty: merging them would
	// copy a block every few hundred pops. Each merge drops a block, and
	// only adds make blocks, so merges cost O(1) a push amortized.
	if b.live <= len(b.sids)/4 && bi > 0 && bi < len(r.blocks)-1 {
		if !r.merge(bi) {
			r.merge(bi - 1)
		}
	}
	return true
}

// merge moves the live entries of blocks bi and bi+1 into the larger of
// the two, if they fit, and drops the other. O(runBlockLen).
func (r *pushRun) merge(bi int) bool {
	a, b := r.blocks[bi], r.blocks[bi+1]
	dst, drop := b, bi
	if len(a.sids) > len(b.sids) {
		dst, drop = a, bi+1
	}
	if a.live+b.live > len(dst.sids) {
		return false
	}
	var sids [runBlockLen]uint64
	var slots [runBlockLen]uint32
	m := 0
	for _, x := range [2]*runBlock{a, b} {
		for i := x.lo; i < x.hi; i++ {
			if x.slots[i] != 0 {
				sids[m], slots[m] = x.sids[i], x.slots[i]
				m++
			}
		}
	}
	copy(dst.sids, sids[:m])
	copy(dst.slots, slots[:m])
	clear(dst.slots[m:])
	dst.lo, dst.hi, dst.live = 0, m, m
	r.drop(drop)
	return true
}

// len is the ids filed. O(blocks): tests and checks only.
func (r *pushRun) len() int {
	n := 0
	for _, b := range r.blocks {
		n += b.live
	}
	return n
}

// bytes is the memory the run holds. O(1).
func (r *pushRun) bytes() int64 { return r.mem + int64(cap(r.blocks))*8 }
