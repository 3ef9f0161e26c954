package wheel

import "testing"

// A bucket fired out of seq order is sorted with its keys read once, in a
// buffer kept for the next fire, unless the bucket was huge: one burst
// must not pin its buffer for the wheel's life.
func TestSortBufferKeptOnlyWhenSmall(t *testing.T) {
	for _, n := range []int{100, maxKeptKeys + 1} {
		w := New(1, 0)
		// Added in falling seq for one due time: the bucket fires unsorted.
		for i := range n {
			w.Add(uint32(i), 5, uint64(n-i))
		}
		got := w.Advance(5, nil)
		if len(got) != n {
			t.Fatalf("n=%d: fired %d", n, len(got))
		}
		for i, h := range got {
			if h != uint32(n-1-i) {
				t.Fatalf("n=%d: position %d holds %d, want %d (seq order)", n, i, h, n-1-i)
			}
		}
		if kept := w.keys != nil; kept != (n <= maxKeptKeys) {
			t.Errorf("n=%d: buffer kept %v (cap %d)", n, kept, cap(w.keys))
		}
		w.Free()
	}
}
