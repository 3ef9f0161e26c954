package jobs

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/delayd/delayd/offheap"
)

// A frozen table: what a cluster's capture encodes after letting the
// owner's lock go (docs/decisions/raft-snapshots.md, "The hold"). Under the
// lock the capture takes O(pages) and the side tables: the slab's pages
// are copied later, each once, by whoever comes first: the capture as it
// reads it, or the owner as it is about to touch it (At, copy-on-write),
// so the copy is every record as it was at the freeze. The side tables
// are cloned (small maps). The arena is not copied: an id or a payload
// never changes once stored, and a block freed while the copy is read goes
// back to its free list only at Thaw, so no later Alloc overwrites bytes
// the copy points at.

// FreezeBuf is the memory a Freeze copies the slab into, mapped outside
// the owner's lock (NewFreezeBuf) so that neither the lock nor a touch
// pays the page faults of fresh memory.
type FreezeBuf struct{ pages [][]Job }

// NewFreezeBuf maps room for n pages of records (SlabPages says how many
// a Freeze copies now).
func NewFreezeBuf(n int) *FreezeBuf {
	b := &FreezeBuf{}
	for range n {
		p := offheap.Make[Job](pageSize)
		offheap.Populate(p)
		b.pages = append(b.pages, p)
	}
	return b
}

// Release unmaps the buffer: the slab Freeze made from it must not be
// read after.
func (b *FreezeBuf) Release() {
	for _, p := range b.pages {
		offheap.Free(p)
	}
	b.pages = nil
}

// Bytes is the memory the buffer maps.
func (b *FreezeBuf) Bytes() int64 { return int64(len(b.pages)) * pageSize * int64(Size) }

// SlabPages is how many pages of records the slab holds.
func (t *Slab) SlabPages() int { return len(t.pages) }

// slabCOW is a frozen slab being copied page by page: dst[p] holds page
// p as it was at the freeze once copied[p] is set; until then src[p] (the
// live page) still is that, and nobody writes it before copying it.
type slabCOW struct {
	src, dst [][]Job
	n        uint32 // slots at the freeze
	copied   []atomic.Bool
	mu       []sync.Mutex // page p is copied under mu[p]
}

// touch makes sure page p is copied before its records are read from the
// copy or changed in the live slab. One atomic load once it is.
func (c *slabCOW) touch(p uint32) {
	if int(p) < len(c.copied) && !c.copied[p].Load() {
		c.copyPage(p)
	}
}

// copyPage copies page p, unless another goroutine just did. A page is
// 1 MiB: about 0.2 ms of memcpy, paid once a freeze by its first toucher.
//
//go:noinline
func (c *slabCOW) copyPage(p uint32) {
	c.mu[p].Lock()
	if !c.copied[p].Load() {
		used := min(pageSize, int(c.n)-int(p)*pageSize)
		copy(c.dst[p][:used], c.src[p][:used])
		c.copied[p].Store(true)
	}
	c.mu[p].Unlock()
}

// Freeze returns a copy of the slab's records as they are now, for
// reading only (At, from any goroutine) while the slab goes on changing:
// its pages are b's (a page mapped here for each the slab gained since b
// was made), each filled on the first touch of either. O(pages); the
// copying, O(slots) of memcpy, comes later. Thaw ends it; the copy must
// not be read after, nor b released before.
func (t *Slab) Freeze(b *FreezeBuf) Slab {
	np := len(t.pages)
	for len(b.pages) < np {
		b.pages = append(b.pages, offheap.Make[Job](pageSize))
	}
	c := &slabCOW{src: slices.Clone(t.pages), dst: b.pages[:np:np], n: t.n,
		copied: make([]atomic.Bool, np), mu: make([]sync.Mutex, np)}
	t.cow = c
	return Slab{pages: c.dst, n: t.n, cow: c}
}

// Thaw ends the slab's Freeze: its writes no longer copy a page first.
func (t *Slab) Thaw() { t.cow = nil }

// Freeze returns a copy of t as it is now, for reading only (At, Payload,
// IdentOf, Reason, the side tables) from any goroutine, while t goes on
// changing: its records as Slab.Freeze copies them, the arena's chunk
// list and big strings shared, the side tables cloned. The arena's freed
// blocks are held until Thaw. O(pages), plus O(entries) of the side
// tables; no lookup, nothing a job. Payloads kept on disk (FlagOnDisk)
// read back as empty from the copy: the caller checks DiskInfo first.
func (t *Table) Freeze(b *FreezeBuf) *Table {
	f := &Table{Slab: t.Slab.Freeze(b)}
	f.Arena.chunks = slices.Clone(t.Arena.chunks)
	f.Arena.big = maps.Clone(t.Arena.big) // its strings are never changed: a delete leaves the clone's
	f.DeadLetters = maps.Clone(t.DeadLetters)
	f.Idents = maps.Clone(t.Idents)
	f.Origins = maps.Clone(t.Origins) // each *Origin is replaced, never changed
	f.Reasons = maps.Clone(t.Reasons)
	t.Arena.pinned++
	return f
}

// Thaw ends a Freeze: the slab's writes copy nothing more, and the arena's
// blocks freed since go back to their free lists (O(blocks freed since)).
// The frozen table must not be read after.
func (t *Table) Thaw() {
	t.Slab.Thaw()
	t.Arena.unpin()
}

// unpin gives back, once the last pin is gone, the blocks Free kept aside.
func (a *Arena) unpin() {
	if a.pinned == 0 {
		return // released since: nothing kept
	}
	if a.pinned--; a.pinned > 0 {
		return
	}
	for {
		h, ok := a.held.pop()
		if !ok {
			return
		}
		a.classes[h>>heldClassOff].free.push(h & (1<<smallRefBits - 1))
	}
}
