package engine

import (
	"github.com/delayd/delayd/offheap"
	"github.com/delayd/delayd/wheel"
)

// slab is the job table: fixed-size pages of pointer-free records, addressed
// by slot number. A single []job growing by doubling would, at 10M jobs, copy
// 700 MB while the engine lock is held (a pause every client would see) and
// keep up to twice the memory it needs; pages never move and waste at most
// one page.
//
// Pages are mapped outside the Go heap (package offheap): on the heap they
// counted as live heap, and GOGC let the heap grow by as much again before
// collecting. release gives them back; nothing may read the slab after.
type slab struct {
	pages [][]job
	n     uint32 // slots handed out so far
}

const (
	pageBits = 14 // 16384 jobs, about 1.2 MB a page
	pageSize = 1 << pageBits
	pageMask = pageSize - 1
)

// at returns the job in slot s. O(1).
func (t *slab) at(s uint32) *job { return &t.pages[s>>pageBits][s&pageMask] }

// add returns a new slot at the end. O(1), and never copies a job.
func (t *slab) add() uint32 {
	if int(t.n>>pageBits) == len(t.pages) {
		p := offheap.Make[job](pageSize)
		offheap.Populate(p) // one call, not 300 page faults (presize.go)
		t.pages = append(t.pages, p)
	}
	t.n++
	return t.n - 1
}

// release unmaps every page and empties the slab. O(pages).
func (t *slab) release() {
	for _, p := range t.pages {
		offheap.Free(p)
	}
	*t = slab{}
}

// bytes is the memory the slab holds.
func (t *slab) bytes() int64 { return int64(len(t.pages)) * pageSize * int64(jobSize) }

// MappedBytes is the memory every engine of the process holds outside the Go
// heap (job pages, arena chunks, index tables, wheel nodes): the runtime's
// statistics miss it, so --maxmemory and INFO's used_memory add it. O(1).
func MappedBytes() int64 { return offheap.Mapped() }

// newJobWheel returns the job wheel, empty, its clock at now. Its handles
// are slots, and it keeps no seq of its own: a job's add order is j.seq,
// which the engine changes only while the job is out of the wheel (detach
// comes first), so the wheel reads it from the job (wheel.NewOrdered) and
// each pending job costs 16 bytes of wheel instead of 24.
func (c *core) newJobWheel(now int64) *wheel.Wheel {
	if wheelKeepsSeqs {
		return wheel.New(c.opts.Tick, now)
	}
	return wheel.NewOrdered(c.opts.Tick, now, c.jobSeq)
}

// wheelKeepsSeqs makes job wheels store the seqs they are given, so that a
// test can compare them with the jobs' (TestJobSeqFixedWhileInWheel).
var wheelKeepsSeqs bool

// jobSeq is the job wheel's seq of slot s: the job's add order.
func (c *core) jobSeq(s uint32) uint64 { return c.jobs.at(s).seq }
