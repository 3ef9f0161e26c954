package hist

import (
	"testing"
	"time"
)

func TestBoundsFit(t *testing.T) {
	var h Counts
	for _, bounds := range [][]int64{LatencyMs[:], FsyncUs[:]} {
		if len(bounds)+1 > len(h.n) {
			t.Fatalf("%d bounds do not fit a Counts of %d buckets", len(bounds), len(h.n))
		}
		for i := 1; i < len(bounds); i++ {
			if bounds[i] <= bounds[i-1] {
				t.Fatalf("bounds not increasing: %v", bounds)
			}
		}
	}
}

func TestObserveSnapshot(t *testing.T) {
	var h Counts
	for _, v := range []int64{-5, 0, 1, 2, 3, 3600000, 3600001} {
		h.Observe(LatencyMs[:], v)
	}
	s := h.Snapshot(LatencyMs[:], time.Millisecond)
	// -5 counts as 0; a value on a bound is in its bucket (le).
	if s.Counts[0] != 3 || s.Counts[1] != 4 || s.Counts[2] != 5 || s.Counts[len(s.Counts)-1] != 6 || s.Count != 7 {
		t.Fatalf("cumulative counts %v count %d", s.Counts, s.Count)
	}
	if s.Sum != time.Duration(0+1+2+3+3600000+3600001)*time.Millisecond || s.Bounds[0] != time.Millisecond {
		t.Fatalf("sum %v bounds %v", s.Sum, s.Bounds)
	}
}
