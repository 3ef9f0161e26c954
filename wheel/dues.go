package wheel

import (
	"unsafe"

	"github.com/delayd/delayd/offheap"
)

// Dues is a copy of a wheel's due times at an instant, read after the
// wheel has moved on (a cluster's capture encodes reservations' deadlines
// from it outside the owner's lock). The node pages are copied whole, 16
// bytes a handle, into pages mapped beforehand (NewDues), so the owner's
// lock is held for the memcpy alone.
type Dues struct {
	pages [][]node
	cap   uint32
}

// NewDues maps room for a copy of n node pages (Pages says how many a
// copy of w takes now).
func NewDues(n int) *Dues {
	d := &Dues{}
	for range n {
		p := offheap.Make[node](nodePage)
		offheap.Populate(p)
		d.pages = append(d.pages, p)
	}
	return d
}

// Bytes is the memory the copy maps.
func (d *Dues) Bytes() int64 { return int64(len(d.pages)) * nodePage * int64(unsafe.Sizeof(node{})) }

// Pages is how many node pages the wheel holds.
func (w *Wheel) Pages() int { return len(w.pages) }

// CopyDues copies into d every handle's due time as it is now (a page
// mapped here for each the wheel gained since d was made). O(handles), a
// memcpy.
func (w *Wheel) CopyDues(d *Dues) {
	for i, p := range w.pages {
		if i == len(d.pages) {
			d.pages = append(d.pages, offheap.Make[node](nodePage))
		}
		copy(d.pages[i], p)
	}
	d.cap = w.cap
}

// Due is Wheel.Due at the copy's instant.
func (d *Dues) Due(h uint32) (int64, bool) {
	if h >= d.cap {
		return 0, false
	}
	n := &d.pages[h>>nodePageBits][h&(nodePage-1)]
	if !n.linked() {
		return 0, false
	}
	return n.due, true
}

// Release unmaps the copy.
func (d *Dues) Release() {
	for _, p := range d.pages {
		offheap.Free(p)
	}
	d.pages, d.cap = nil, 0
}
