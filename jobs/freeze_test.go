package jobs

import (
	"bytes"
	"fmt"
	"testing"
)

// A frozen table reads as the table was at Freeze while the table goes on:
// records changed, jobs freed and their blocks wanted by new jobs of the
// same size, side tables changed. The freed blocks are reused only after
// Unpin.
func TestFreezeReadsTheInstant(t *testing.T) {
	tb := newTable(t)
	var slots []uint32
	for i := range 3*pageSize/2 + 7 { // a page and a half: the last page's copy is partial
		s := add(tb, nil, 0, nil, uint64(i+1), []byte{byte(i), byte(i >> 8), 'p'})
		tb.At(s).Due = int64(i)
		slots = append(slots, s)
	}
	tb.SetReason(slots[5], []byte("boom"))
	tb.DeadLetters[slots[6]] = []byte("dlq")
	buf := NewFreezeBuf(1) // one page short: Freeze maps the other
	defer buf.Release()
	f := tb.Freeze(buf)

	// The table moves on: jobs freed, their blocks taken by new jobs.
	for _, s := range slots[:100] {
		tb.Free(s)
	}
	for i := range 100 {
		add(tb, nil, 1, nil, uint64(1e6+i), []byte{'n', 'e', 'w'})
	}
	tb.At(slots[200]).Due = -1
	tb.SetReason(slots[5], []byte("other"))
	delete(tb.DeadLetters, slots[6])

	for i, s := range slots {
		j := f.At(s)
		if j.Due != int64(i) || j.SID != uint64(i+1) || j.Queue != 0 {
			t.Fatalf("slot %d: %+v, want the record at the freeze", s, *j)
		}
		if p := f.Payload(j); !bytes.Equal(p, []byte{byte(i), byte(i >> 8), 'p'}) {
			t.Fatalf("slot %d: payload %q: its block was reused while frozen", s, p)
		}
	}
	if f.Reason(slots[5]) != "boom" || string(f.DeadLetters[slots[6]]) != "dlq" {
		t.Fatal("the side tables moved with the table")
	}
	if f.Len() != uint32(len(slots)) {
		t.Fatalf("frozen Len %d, want %d", f.Len(), len(slots))
	}

	// After Unpin the 100 blocks held are on their free list.
	tb.Thaw()
	ci, _ := classOf(3)
	n := 0
	for _, b := range tb.Arena.classes[ci].free.blocks {
		n += len(b)
	}
	if len(tb.Arena.held.blocks) != 0 || n != 100 {
		t.Fatalf("after Unpin: %d blocks held, %d free, want 0 and 100", len(tb.Arena.held.blocks), n)
	}
}

// The copy is read on one goroutine while the owner changes every record
// on another: each page is copied once, by whichever comes first, and the
// reader sees every record as it was (run with -race).
func TestFreezeReadWhileWritten(t *testing.T) {
	tb := newTable(t)
	const n = 4*pageSize + 100
	for i := range n {
		tb.At(tb.Alloc()).Due = int64(i)
	}
	buf := NewFreezeBuf(tb.SlabPages())
	defer buf.Release()
	f := tb.Freeze(buf)
	done := make(chan error)
	go func() {
		for s := uint32(n - 1); int32(s) >= 0; s-- { // from the end: the writer comes from the start
			if d := f.At(s).Due; d != int64(s) {
				done <- fmt.Errorf("slot %d: due %d, want %d", s, d, s)
				return
			}
		}
		done <- nil
	}()
	for s := range uint32(n) {
		tb.At(s).Due = -1
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	tb.Thaw()
	if tb.At(7).Due != -1 {
		t.Fatal("the owner's write was lost")
	}
}
