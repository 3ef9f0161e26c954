package jobs

import "github.com/delayd/delayd/offheap"

// Slab is the job table: fixed-size pages of pointer-free records, addressed
// by slot number. A single []job growing by doubling would, at 10M jobs, copy
// 700 MB while the engine lock is held (a pause every client would see) and
// keep up to twice the memory it needs; pages never move and waste at most
// one page.
//
// Pages are mapped outside the Go heap (package offheap): on the heap they
// counted as live heap, and GOGC let the heap grow by as much again before
// collecting. release gives them back; nothing may read the slab after.
type Slab struct {
	pages [][]Job
	// cow is set while a frozen copy of the records is filled page by
	// page (freeze.go): At copies a page before handing out its first
	// record. Every write of a record goes through At. Beside pages: At
	// reads both.
	cow *slabCOW
	// homes holds, beside each page, each slot's home: the log segment of
	// the record its job was last written whole in, for the segmented
	// log's compaction (docs/decisions/segmented-log.md). Two bytes a job,
	// outside the 64-byte record, which has no room.
	homes [][]uint16
	n     uint32 // slots handed out so far
}

const (
	pageBits = 14 // 16384 jobs, about 1.2 MB a page
	pageSize = 1 << pageBits
	pageMask = pageSize - 1
)

// At returns the job in slot s. O(1).
func (t *Slab) At(s uint32) *Job {
	if t.cow != nil {
		t.touch(s)
	}
	return &t.pages[s>>pageBits][s&pageMask]
}

// peek returns the job in slot s for reading only: the owner's reads
// need no copy (a capture's copy is taken from the live page before any
// write to it), so the index's probes and the small accessors below skip
// At's check. On a frozen copy (Slab.Freeze) a page must have been touched
// through At first: Whole reads the slot with At before its side tables.
func (t *Slab) peek(s uint32) *Job { return &t.pages[s>>pageBits][s&pageMask] }

// touch is At's copy-on-write, out of line: At stays within the inliner's
// budget, and costs one nil check but during a capture.
//
//go:noinline
func (t *Slab) touch(s uint32) { t.cow.touch(s >> pageBits) }

// Home is the log segment slot s's job was last written whole in (its id
// modulo 2^16). O(1).
func (t *Slab) Home(s uint32) uint16 { return t.homes[s>>pageBits][s&pageMask] }

// SetHome notes the log segment slot s's job was last written whole in.
func (t *Slab) SetHome(s uint32, seg uint16) { t.homes[s>>pageBits][s&pageMask] = seg }

// Add returns a new slot at the end. O(1), and never copies a job.
func (t *Slab) Add() uint32 {
	if t.addGrows() {
		p := offheap.Make[Job](pageSize)
		offheap.Populate(p) // one call, not 300 page faults (the engine's presize.go)
		t.pages = append(t.pages, p)
		t.homes = append(t.homes, offheap.Make[uint16](pageSize))
	}
	t.n++
	return t.n - 1
}

// Release unmaps every page and empties the slab. O(pages).
func (t *Slab) Release() {
	for _, p := range t.pages {
		offheap.Free(p)
	}
	for _, h := range t.homes {
		offheap.Free(h)
	}
	*t = Slab{}
}

// Bytes is the memory the slab holds.
func (t *Slab) Bytes() int64 { return int64(len(t.pages)) * pageSize * (int64(Size) + 2) }

// Len is the slots handed out so far, free or not: slots run from 0 to
// Len-1. O(1).
func (t *Slab) Len() uint32 { return t.n }

// addGrows says whether the next Add maps a page, changing the page table
// that another goroutine may be reading (Table.AllocGrows).
func (t *Slab) addGrows() bool { return int(t.n>>pageBits) == len(t.pages) }
