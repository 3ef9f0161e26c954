package jobs

import (
	"cmp"
	"slices"
	"sort"
	"unsafe"

	"github.com/delayd/delayd/offheap"
)

// A PushRun files the server ids of a queue's jobs made live (LPUSH,
// RPUSH, DELAY.ADD without an id) in the order they were made, instead of
// in the sids table.
//
// Why: a job's id is filed so that DELAY.GET, ACK, DELAY.CANCEL and the
// log's replay can find it, yet most jobs are added and popped without
// their id ever being asked for, and Redis files nothing per list element.
// In the sids table each job writes a random cache line (the grouped table places a
// run of 16 ids per line, but the table also grows, or clears its
// tombstones, by moving every entry, reading each job's id): 10-12% of the
// server's CPU on a pipelined RPUSH, and as much on DELAY.ADD, whose engine
// work it was a third of. Server ids are made in increasing order, so
// appending them to a per-queue run keeps it sorted for free: an add is an
// append, a lookup a search from the nearer end, and a list's pops (FIFO
// or LIFO, from either end) unfile from an end of its queue's run in O(1).
// A job that leaves from the middle (delays that fire out of add order,
// LREM, a mix of LPUSH and RPUSH) leaves a hole, found by a binary search:
// a worse case than the sids table's one probe, paid once a job, where the
// appends saved the index's upkeep (docs/decisions/id-index.md).
//
// The run is a deque of blocks, not one array: an array that grows by
// copying, or drops its consumed head by copying, held the engine's lock
// for 12 ms at 4M ids (the copy, and the fresh pages it faults in), where
// a block is one small allocation. A block emptied is dropped; a block
// inside the run left sparse by holes merges with a neighbour it fits in,
// so the blocks stay about half full whatever is removed.
//
// The run only replaces the sids table for the jobs it holds (FlagInRun): lookup
// asks both, so what the server answers, and what replay rebuilds, does
// not depend on where an id was filed.
type PushRun struct {
	blocks []*runBlock // in id order; none is empty
	mem    int64       // bytes of its blocks (INFO's memory)
	// top is the greatest id ever filed (0: none): a new id can be appended
	// only above it. It is kept here, not read from the last block, because
	// the queue is at hand and the block is not: with a thousand queues,
	// reading the last block's last id was three cache misses an add.
	top uint64
	// tail is the last block (nil: none), for add: r.blocks[k-1] is a
	// load from another allocation, one more cache miss an add over many
	// queues.
	tail *runBlock
	// pages gives full-size blocks their entries (nil: from the heap, as
	// tests use it); Table.NewRun sets it.
	pages *RunPages
}

// runBlockLen is the most entries of a block: 4 KiB, one page mapped
// outside the Go heap (RunPages) per 512 ids, and a bounded merge. A run's
// first block holds runBlockMin and each new block twice the last, so that
// the many queues of a server with a job or two each pay under 200 bytes for
// their run; those small blocks are on the heap.
const (
	runBlockLen = 512
	runBlockMin = 8
)

// runBlock holds ids in increasing order in [lo, hi); a removed entry keeps
// its id, so the order stays searchable, and has slot 0. Entries outside
// [lo, hi) are never read.
type runBlock struct {
	lo, hi, live int
	base         uint64   // entry i files id base + ents[i].off
	ents         []runEnt // Len is the block's capacity
}

// runEnt is 8 bytes where an id and a slot take 12: ids are stored as an
// offset from their block's first, so a block spans ids less than 2^32
// apart (a server id counts 2^16 a millisecond: 65 s). Offheap, that is 8
// bytes a job in a run filled in order and emptied from an end, as much as
// the sids table's cells at their load, which the run replaces; holes from the
// middle can leave a block a quarter full (merge) before it is merged.
type runEnt struct{ off, slot uint32 } // slot+1; 0: removed

func (b *runBlock) sid(i int) uint64 { return b.base + uint64(b.ents[i].off) }

// RunPages recycles blocks. The entries of full-size blocks are one mapped
// page each, outside the Go heap, so GOGC's headroom does not double them
// (package offheap); a few freed pages are kept for the next block, as a
// FIFO frees one for each it starts. Smallest blocks and the block lists of
// emptied runs are kept too: a queue that empties and fills again (a
// worker keeping up) makes a run from nothing each time, three allocations.
type RunPages struct {
	free  [][]runEnt    // full-size blocks' entries
	small []*runBlock   // runBlockMin blocks
	lists [][]*runBlock // emptied runs' block lists, empty
}

const RunPagesKept = 32

func (p *RunPages) get() []runEnt {
	if n := len(p.free); n > 0 {
		ents := p.free[n-1]
		p.free = p.free[:n-1]
		return ents
	}
	return offheap.Make[runEnt](runBlockLen)
}

func (p *RunPages) put(ents []runEnt) {
	if len(p.free) < RunPagesKept {
		p.free = append(p.free, ents)
		return
	}
	offheap.Free(ents)
}

// Release unmaps the kept pages and forgets the rest.
func (p *RunPages) Release() {
	for _, ents := range p.free {
		offheap.Free(ents)
	}
	*p = RunPages{}
}

func (r *PushRun) newBlock(n int, base uint64) *runBlock {
	p := r.pages
	var b *runBlock
	switch {
	case p == nil: // tests: everything from the heap
		b = &runBlock{ents: make([]runEnt, n)}
	case n == runBlockLen:
		b = &runBlock{ents: p.get()}
	case n == runBlockMin && len(p.small) > 0:
		b = p.small[len(p.small)-1]
		p.small = p.small[:len(p.small)-1]
	default:
		b = &runBlock{ents: make([]runEnt, n)}
	}
	b.base = base
	if r.blocks == nil && p != nil && len(p.lists) > 0 {
		r.blocks = p.lists[len(p.lists)-1]
		p.lists = p.lists[:len(p.lists)-1]
	}
	r.mem += b.bytes()
	r.blocks = append(r.blocks, b)
	r.tail = b
	return b
}

func (b *runBlock) bytes() int64 { return int64(unsafe.Sizeof(*b)) + int64(len(b.ents))*8 }

// freeBlock gives a dropped block back.
func (r *PushRun) freeBlock(b *runBlock) {
	r.mem -= b.bytes()
	p := r.pages
	switch {
	case p == nil:
	case len(b.ents) == runBlockLen:
		p.put(b.ents)
	case len(b.ents) == runBlockMin && len(p.small) < RunPagesKept:
		*b = runBlock{ents: b.ents}
		p.small = append(p.small, b)
		return
	}
	b.ents = nil
}

// drop removes block bi from the run.
func (r *PushRun) drop(bi int) {
	r.freeBlock(r.blocks[bi])
	r.blocks[bi] = nil
	if len(r.blocks) == 1 {
		if r.pages != nil && len(r.pages.lists) < RunPagesKept {
			r.pages.lists = append(r.pages.lists, r.blocks[:0])
		}
		r.blocks, r.tail = nil, nil
		return
	}
	if bi == len(r.blocks)-1 {
		r.tail = r.blocks[bi-1]
	}
	if bi == 0 {
		// The usual end of a block of a FIFO: drop it without moving the
		// others (append moves them when it next grows the slice).
		r.blocks = r.blocks[1:]
		return
	}
	r.blocks = slices.Delete(r.blocks, bi, bi+1)
}

// Release gives back every block (the engine's state is being dropped).
func (r *PushRun) Release() {
	for _, b := range r.blocks {
		r.freeBlock(b)
	}
	r.blocks, r.tail = nil, nil
}

// Last is the greatest id ever filed, or 0: a new id can be appended only
// above it. O(1), and reads no block.
func (r *PushRun) Last() uint64 { return r.top }

// Add appends slot s under sid, which must be above last. O(1).
func (r *PushRun) Add(sid uint64, s uint32) {
	b := r.tail
	if b == nil {
		b = r.newBlock(runBlockMin, sid)
	} else if b.hi == len(b.ents) || sid-b.base > 1<<32-1 {
		b = r.newBlock(min(2*len(b.ents), runBlockLen), sid)
	}
	b.ents[b.hi] = runEnt{uint32(sid - b.base), s + 1}
	b.hi++
	b.live++
	r.top = sid
}

// locate returns the block and index of sid in the run, if it is there
// (removed or not). The end blocks, where a list's pops and a worker's acks
// go, are looked at first; other blocks by a binary search on their last id.
func (r *PushRun) locate(sid uint64) (int, int, bool) {
	k := len(r.blocks)
	if k == 0 {
		return 0, 0, false
	}
	bi := 0
	if first := r.blocks[0]; sid > first.sid(first.hi-1) {
		bi = k - 1
		if last := r.blocks[k-1]; sid < last.sid(last.lo) {
			bi = 1 + sort.Search(k-2, func(i int) bool {
				b := r.blocks[1+i]
				return b.sid(b.hi-1) >= sid
			})
		}
	}
	b := r.blocks[bi]
	if sid < b.base || sid-b.base > 1<<32-1 {
		return bi, b.lo, false
	}
	off := uint32(sid - b.base)
	i, ok := slices.BinarySearchFunc(b.ents[b.lo:b.hi], off, func(e runEnt, off uint32) int {
		return cmp.Compare(e.off, off)
	})
	return bi, b.lo + i, ok
}

// Find returns the slot filed under sid. O(1) in the end blocks, O(log
// blocks) elsewhere.
func (r *PushRun) Find(sid uint64) (uint32, bool) {
	bi, i, ok := r.locate(sid)
	if !ok || r.blocks[bi].ents[i].slot == 0 {
		return 0, false
	}
	return r.blocks[bi].ents[i].slot - 1, true
}

// Remove unfiles slot s, filed under sid, and reports whether it was there.
// O(1) at either end of the run, as find elsewhere.
func (r *PushRun) Remove(sid uint64, s uint32) bool {
	k := len(r.blocks)
	if k == 0 {
		return false
	}
	// A live slot is filed once, so an end holding s+1 is s's entry: the
	// ends' ids are not read (one cache line less per pop of many lists).
	var bi, i int
	if b := r.blocks[0]; b.ents[b.lo].slot == s+1 {
		bi, i = 0, b.lo
	} else if b := r.blocks[k-1]; b.ents[b.hi-1].slot == s+1 {
		bi, i = k-1, b.hi-1
	} else {
		var ok bool
		if bi, i, ok = r.locate(sid); !ok || r.blocks[bi].ents[i].slot != s+1 {
			return false
		}
	}
	b := r.blocks[bi]
	b.ents[i].slot = 0
	b.live--
	switch {
	case b.live == 0:
		r.drop(bi)
		return true
	case i == b.lo:
		for b.ents[b.lo].slot == 0 {
			b.lo++
		}
	case i == b.hi-1:
		for b.ents[b.hi-1].slot == 0 {
			b.hi--
		}
	}
	// A sparse block inside the run (removals from the middle) merges with
	// a neighbour it fits in. The end blocks, which a FIFO or a stack
	// drains one entry at a time, are left to empty: merging them would
	// copy a block every few hundred pops. Each merge drops a block, and
	// only adds make blocks, so merges cost O(1) a push amortized.
	if b.live <= len(b.ents)/4 && bi > 0 && bi < len(r.blocks)-1 {
		if !r.merge(bi) {
			r.merge(bi - 1)
		}
	}
	return true
}

// merge moves the live entries of blocks bi and bi+1 into the larger of
// the two, if they fit and their ids are close enough for one base, and
// drops the other. O(runBlockLen).
func (r *PushRun) merge(bi int) bool {
	a, b := r.blocks[bi], r.blocks[bi+1]
	dst, drop := b, bi
	if len(a.ents) > len(b.ents) {
		dst, drop = a, bi+1
	}
	base := a.sid(a.lo) // the ends of a block are live
	if a.live+b.live > len(dst.ents) || b.sid(b.hi-1)-base > 1<<32-1 {
		return false
	}
	var ents [runBlockLen]runEnt
	m := 0
	for _, x := range [2]*runBlock{a, b} {
		for i := x.lo; i < x.hi; i++ {
			if x.ents[i].slot != 0 {
				ents[m] = runEnt{uint32(x.sid(i) - base), x.ents[i].slot}
				m++
			}
		}
	}
	copy(dst.ents, ents[:m])
	dst.base, dst.lo, dst.hi, dst.live = base, 0, m, m
	r.drop(drop)
	return true
}

// Len is the ids filed. O(blocks): tests and checks only.
func (r *PushRun) Len() int {
	n := 0
	for _, b := range r.blocks {
		n += b.live
	}
	return n
}

// Bytes is the memory the run holds. O(1).
func (r *PushRun) Bytes() int64 { return r.mem + int64(cap(r.blocks))*8 }
