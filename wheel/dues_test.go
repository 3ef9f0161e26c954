package wheel

import "testing"

// A copy of the dues answers as the wheel did when it was taken, whatever
// the wheel does after: handles removed, added again, added new beyond the
// copy's pages.
func TestCopyDuesKeepsTheInstant(t *testing.T) {
	w := New(1, 0)
	defer w.Free()
	for h := range uint32(nodePage + 10) {
		if h%3 != 0 {
			w.Add(h, int64(h)+1000, uint64(h))
		}
	}
	d := NewDues(1) // one page short: CopyDues maps the other
	defer d.Release()
	w.CopyDues(d)
	for h := range uint32(nodePage + 10) {
		w.Remove(h)
		if h%2 == 0 {
			w.Add(h, 5, 0)
		}
	}
	w.Add(3*nodePage, 7, 0)
	for h := range uint32(nodePage + 10) {
		due, ok := d.Due(h)
		if want := h%3 != 0; ok != want || ok && due != int64(h)+1000 {
			t.Fatalf("handle %d: %d %v, want %d %v", h, due, ok, int64(h)+1000, want)
		}
	}
	if _, ok := d.Due(3 * nodePage); ok {
		t.Fatal("a handle added after the copy is in it")
	}
}
