package bucket

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/delayd/delayd/offheap"
)

// The id index: a server id -> where its job is (a bucket slot and the
// job's index in it), 12 bytes a cell, open addressing with linear
// probing, in shards by the id's hash that grow one at a time.
//
// Why shards: one table of 100M jobs doubles by copying 1.6 GB and holds
// old and new at once; a shard is 1/1,024 of it, so a growth copies about
// 100k cells (well under a millisecond) and the transient double is a
// thousandth of the index. Why the id in the cell: a run's entries are on
// disk, and a lookup that read the key back from there would cost a pread
// for every probe of every miss.
const (
	shardBits = 10
	// A loc is slot<<entryBits | entry.
	entryBits  = 20
	maxEntries = 1 << entryBits // jobs a bucket holds at most
	maxSlots   = 1 << (32 - entryBits)
	tombLoc    = ^uint32(0) // a deleted cell: id 0, loc tombLoc; an empty one is all zero
	minShard   = 256        // 3 KiB: a mapping is a page at least
)

type cell struct{ lo, hi, loc uint32 }

type shard struct {
	cells []cell // len 0 or a power of two, mapped (offheap)
	n     int    // live cells
	tombs int
}

type index struct {
	sh [1 << shardBits]shard
	n  int
}

func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

func packLoc(slot int, entry uint32) uint32 { return uint32(slot)<<entryBits | entry }
func unpackLoc(l uint32) (slot int, entry uint32) {
	return int(l >> entryBits), l & (maxEntries - 1)
}

// find returns the cell of sid in sh, or the first free cell (tomb or empty)
// where it would go and false. h is mix(sid).
func (sh *shard) find(sid, h uint64) (int, bool) {
	mask := len(sh.cells) - 1
	lo, hi := uint32(sid), uint32(sid>>32)
	free := -1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		c := &sh.cells[i]
		switch {
		case c.lo == lo && c.hi == hi && lo|hi != 0:
			return i, true // a live cell's id is never 0, so its loc may be any value
		case c.lo|c.hi == 0 && c.loc == 0:
			if free < 0 {
				free = i
			}
			return free, false
		case c.lo|c.hi == 0 && free < 0:
			free = i // a tombstone
		}
	}
}

// get returns where sid's job is. O(1).
func (x *index) get(sid uint64) (uint32, bool) {
	if sid == 0 {
		return 0, false
	}
	h := mix(sid)
	sh := &x.sh[h>>(64-shardBits)]
	if sh.n == 0 {
		return 0, false
	}
	i, ok := sh.find(sid, h)
	if !ok {
		return 0, false
	}
	return sh.cells[i].loc, true
}

// put files sid at loc, replacing where it was. sid must not be 0. O(1)
// amortized; a growth rebuilds one shard.
func (x *index) put(sid uint64, loc uint32) {
	h := mix(sid)
	if x.sh[h>>(64-shardBits)].put(sid, h, loc) {
		x.n++
	}
}

// put files sid (h = mix(sid)) in sh and says whether it is new there.
func (sh *shard) put(sid, h uint64, loc uint32) bool {
	if (sh.n+sh.tombs+1)*4 > len(sh.cells)*3 {
		sh.rebuild(sh.n + 1)
	}
	i, ok := sh.find(sid, h)
	c := &sh.cells[i]
	if !ok {
		if c.loc == tombLoc {
			sh.tombs--
		}
		sh.n++
	}
	*c = cell{uint32(sid), uint32(sid >> 32), loc}
	return !ok
}

// fileBatch is how many ids fileAll looks up at once: about the misses a
// core keeps in flight (its line fill buffers), with room to spare.
const fileBatch = 32

// fileParallel is the fewest ids fileAll shares out between CPUs.
const fileParallel = 1 << 15

// touched keeps fileAll's reads ahead from being optimized away.
var touched atomic.Uint32

// filer files many ids at once (fileAll); its buffers are kept between
// calls.
type filer struct {
	hs, sids []uint64
	locs     []uint32
}

// fileAll files sids[i] at locs[i], as put does each, in an order chosen
// for the memory: grouped by shard, so that a shard's pages and their
// page-table entries stay cached while its ids go in, 32 ids at a time
// whose first cells are read before any is filed (those reads do not
// depend on one another, so the CPU has them all in flight instead of one
// DRAM and TLB miss after another), and the shards shared out between the
// CPUs (disjoint: no lock). At 100M ids the index is 3.2 GB: a start
// filing them one at a time spent 43 s of CPU in find, 430 ns an id
// (BenchmarkIndexFileMany). len(locs) must be len(sids).
func (x *index) fileAll(f *filer, sids []uint64, locs []uint32) {
	n := len(sids)
	if cap(f.hs) < n {
		f.hs, f.sids, f.locs = make([]uint64, n), make([]uint64, n), make([]uint32, n)
	}
	hs, ss, ls := f.hs[:n], f.sids[:n], f.locs[:n]
	var at [1<<shardBits + 1]int
	for _, sid := range sids {
		at[mix(sid)>>(64-shardBits)+1]++
	}
	for i := 1; i < len(at); i++ {
		at[i] += at[i-1]
	}
	ends := at // at[k] is where shard k's ids start; ends[k+1] where they end
	for i, sid := range sids {
		h := mix(sid)
		k := &at[h>>(64-shardBits)]
		hs[*k], ss[*k], ls[*k] = h, sid, locs[i]
		*k++
	}
	file := func(from, to int) (added int) { // ids from..to, whole shards
		t := uint32(0)
		defer func() { touched.Add(t) }()
		for i := from; i < to; i += fileBatch {
			j := min(to, i+fileBatch)
			for _, h := range hs[i:j] {
				if cs := x.sh[h>>(64-shardBits)].cells; len(cs) > 0 {
					t ^= cs[int(h)&(len(cs)-1)].lo
				}
			}
			for k := i; k < j; k++ {
				if x.sh[hs[k]>>(64-shardBits)].put(ss[k], hs[k], ls[k]) {
					added++
				}
			}
		}
		return added
	}
	cpus := runtime.GOMAXPROCS(0)
	if n < fileParallel || cpus < 2 {
		x.n += file(0, n)
		return
	}
	var wg sync.WaitGroup
	added := make([]int, cpus)
	for w := range cpus {
		// Worker w takes the shards from w/cpus to (w+1)/cpus of them.
		from, to := ends[w*(1<<shardBits)/cpus], ends[(w+1)*(1<<shardBits)/cpus]
		wg.Add(1)
		go func() { defer wg.Done(); added[w] = file(from, to) }()
	}
	wg.Wait()
	for _, a := range added {
		x.n += a
	}
}

// del unfiles sid and says whether it was filed. O(1).
func (x *index) del(sid uint64) bool {
	if sid == 0 {
		return false
	}
	h := mix(sid)
	sh := &x.sh[h>>(64-shardBits)]
	if sh.n == 0 {
		return false
	}
	i, ok := sh.find(sid, h)
	if !ok {
		return false
	}
	sh.cells[i] = cell{0, 0, tombLoc}
	sh.n--
	sh.tombs++
	x.n--
	return true
}

// rebuild replaces sh's cells with a table about twice as big as need
// (at most 1/2 full after it), dropping tombstones.
func (sh *shard) rebuild(need int) {
	size := minShard
	for size < 2*need {
		size <<= 1
	}
	old := sh.cells
	sh.cells = offheap.Make[cell](size)
	// It will be written up to 3/4 before it grows again: one call maps
	// its pages in, not a fault per 4 KiB (which was half of a start's
	// filing of ids, measured).
	offheap.Populate(sh.cells)
	sh.tombs = 0
	mask := size - 1
	for _, c := range old {
		if c.lo|c.hi == 0 {
			continue
		}
		sid := uint64(c.hi)<<32 | uint64(c.lo)
		i := int(mix(sid)) & mask
		for sh.cells[i].lo|sh.cells[i].hi != 0 {
			i = (i + 1) & mask
		}
		sh.cells[i] = c
	}
	offheap.Free(old)
}

// presize sizes every empty shard for n ids in all, so that a start that
// files them does not grow each shard several times.
func (x *index) presize(n int) {
	per := n>>shardBits + 1
	for i := range x.sh {
		if sh := &x.sh[i]; len(sh.cells) == 0 && per*2 > minShard {
			sh.rebuild(per)
		}
	}
}

// bytes is the memory the index maps.
func (x *index) bytes() int64 {
	var n int64
	for i := range x.sh {
		n += int64(len(x.sh[i].cells)) * 12
	}
	return n
}

// reset frees every shard.
func (x *index) reset() {
	for i := range x.sh {
		offheap.Free(x.sh[i].cells)
		x.sh[i] = shard{}
	}
	x.n = 0
}

// each calls f for every filed id (tests and checks).
func (x *index) each(f func(sid uint64, loc uint32)) {
	for i := range x.sh {
		for _, c := range x.sh[i].cells {
			if c.lo|c.hi != 0 {
				f(uint64(c.hi)<<32|uint64(c.lo), c.loc)
			}
		}
	}
}
