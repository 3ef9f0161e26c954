package jobs

import (
	"maps"
	"slices"

	"github.com/delayd/delayd/offheap"
)

// A frozen table: what a cluster's capture encodes after letting the
// owner's lock go (docs/decisions/raft-snapshots.md, "The hold"). Under the
// lock the capture copies only what changes in place: the slab's records
// (a memcpy of its pages into pages mapped before the lock was taken) and
// the side tables (clones of small maps). The arena is not copied: an id
// or a payload never changes once stored, and a block freed while the
// copy is read goes back to its free list only when the reader is done
// (Pin, Unpin), so no later Alloc overwrites bytes the copy points at.

// FreezeBuf is the memory a Freeze copies the slab into, mapped outside
// the owner's lock (NewFreezeBuf) so that the lock is held for the copy
// alone, not for the page faults of fresh memory.
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

// Release unmaps the buffer: the table Freeze made from it must not be
// read after.
func (b *FreezeBuf) Release() {
	for _, p := range b.pages {
		offheap.Free(p)
	}
	b.pages = nil
}

// SlabPages is how many pages of records the slab holds.
func (t *Slab) SlabPages() int { return len(t.pages) }

// Freeze returns a copy of t as it is now, for reading only (At, Payload,
// IdentOf, Reason, the side tables) from any goroutine, while t goes on
// changing: its records copied into b (a page mapped here for each the
// slab gained since b was made), the arena's chunk list and big strings
// shared, the side tables cloned. t's arena is pinned until Unpin.
// O(slots) for a memcpy, plus O(entries) of the side tables; no lookup,
// no allocation a job. Payloads kept on disk (FlagOnDisk) read back as
// empty from the copy: the caller checks DiskInfo first.
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

// Freeze returns a copy of the slab's records as they are now, in b's
// pages (a page mapped here for each the slab gained since b was made),
// for reading only: its pages are b's, valid until b is released. O(slots),
// a memcpy.
func (t *Slab) Freeze(b *FreezeBuf) Slab {
	f := Slab{n: t.n, pages: make([][]Job, 0, len(t.pages))}
	for i, p := range t.pages {
		if i == len(b.pages) {
			b.pages = append(b.pages, offheap.Make[Job](pageSize))
		}
		used := min(pageSize, int(t.n)-i*pageSize)
		copy(b.pages[i][:used], p[:used])
		f.pages = append(f.pages, b.pages[i])
	}
	return f
}

// Unpin ends a Freeze's hold on the arena: the blocks freed since go back
// to their free lists. O(blocks freed since Freeze).
func (t *Table) Unpin() { t.Arena.unpin() }

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
