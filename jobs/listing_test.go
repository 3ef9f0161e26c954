package jobs

import (
	"slices"
	"testing"
)

// TestListingScanAndCursor: the scan returns the queue's delayed jobs in
// (due, add order); a cursor on a job still there goes strictly after it,
// and one on a job gone starts at its millisecond.
func TestListingScanAndCursor(t *testing.T) {
	tb := newTable(t)
	run := tb.NewRun()
	mk := func(q uint32, id string, due int64, seq uint64, state uint8) uint32 {
		s := add(tb, &run, q, []byte(id), 0, nil)
		j := tb.At(s)
		j.Due, j.Seq, j.State = due, seq, state
		return s
	}
	c := mk(0, "c", 20, 3, StateDelayed)
	a := mk(0, "a", 10, 1, StateDelayed)
	mk(1, "x", 5, 4, StateDelayed)  // another queue
	mk(0, "r", 1, 5, StateReserved) // another state
	b := mk(0, "b", 20, 2, StateDelayed)
	l := Listing{T: tb, Queue: 0, State: StateDelayed}
	if got := l.Scan(10, 3, nil); !slices.Equal(got, []uint32{a, b, c}) {
		t.Fatalf("scan %v, want %v", got, []uint32{a, b, c})
	}
	if got := l.Scan(2, 3, nil); !slices.Equal(got, []uint32{a, b}) {
		t.Fatalf("scan of 2: %v", got)
	}
	if got := l.Scan(10, 3, l.After(&run, &Cursor{Time: 20, ID: []byte("b")})); !slices.Equal(got, []uint32{c}) {
		t.Fatalf("after b: %v, want [c]", got)
	}
	// The cursor's job is gone: the page starts at its millisecond, b included.
	if got := l.Scan(10, 3, l.After(&run, &Cursor{Time: 20, ID: []byte("gone")})); !slices.Equal(got, []uint32{b, c}) {
		t.Fatalf("after a job gone: %v, want [b c]", got)
	}
	// A reserved listing orders by the deadline it is given.
	r := Listing{T: tb, Queue: 0, State: StateDelayed, Deadline: func(s uint32) int64 { return -tb.At(s).Due }}
	if got := r.Scan(10, 3, nil); !slices.Equal(got, []uint32{b, c, a}) {
		t.Fatalf("by deadline %v, want %v", got, []uint32{b, c, a})
	}
}
