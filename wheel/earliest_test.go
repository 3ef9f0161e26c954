package wheel

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestEarliest checks Earliest against sorting every scheduled handle,
// over random adds (near and far, so every level holds some), removes and
// advances, with filters that accept all, some or none.
func TestEarliest(t *testing.T) {
	for _, tick := range []int64{1, 3, 16} {
		rng := rand.New(rand.NewPCG(uint64(tick), 7))
		now := int64(1_700_000_000_000)
		w := New(tick, now)
		ref := newReference(tick, now)
		var seq uint64
		for step := range 3000 {
			switch r := rng.IntN(10); {
			case r < 6:
				h := uint32(rng.IntN(2000))
				if _, ok := ref.due[h]; ok {
					break
				}
				spans := []int64{50, 5_000, 400_000, 50_000_000, 1 << 40}
				due := now + 1 + rng.Int64N(spans[rng.IntN(len(spans))])
				seq++
				if w.Add(h, due, seq) != ref.add(h, due, seq) {
					t.Fatalf("step %d: Add disagrees with the reference", step)
				}
			case r < 8:
				for h := range ref.due {
					w.Remove(h)
					ref.remove(h)
					break
				}
			default:
				now += rng.Int64N(3000)
				w.Advance(now, nil)
				ref.advance(now, nil)
			}
			if step%10 != 0 {
				continue
			}
			mod := uint32(1 + rng.IntN(5))
			keep := func(h uint32) bool { return h%mod == 0 }
			var want []uint32
			for _, e := range ref.entries {
				if keep(e.h) {
					want = append(want, e.h)
				}
			}
			for _, n := range []int{1, 3, 10, 1000} {
				exp := want[:min(n, len(want))]
				if got, ok := w.Earliest(nil, n, -1, 0, keep); !ok || !slices.Equal(got, exp) {
					t.Fatalf("step %d tick %d n %d: got %v want %v", step, tick, n, got, exp)
				}
				if got, ok := w.Earliest([]uint32{7}, n, len(want), 0, keep); !ok || !slices.Equal(got, append([]uint32{7}, exp...)) {
					t.Fatalf("step %d tick %d n %d with of: got %v want %v", step, tick, n, got, exp)
				}
			}
		}
	}
}

func TestEarliestEmpty(t *testing.T) {
	w := New(1, 0)
	all := func(uint32) bool { return true }
	if got, ok := w.Earliest(nil, 5, -1, 0, all); !ok || len(got) != 0 {
		t.Fatalf("empty wheel: %v", got)
	}
	w.Add(1, 10, 1)
	if got, ok := w.Earliest(nil, 0, -1, 0, all); !ok || len(got) != 0 {
		t.Fatalf("n 0: %v", got)
	}
	if got, ok := w.Earliest(nil, 5, -1, 0, func(uint32) bool { return false }); !ok || len(got) != 0 {
		t.Fatalf("none kept: %v", got)
	}
}

// TestEarliestBudget: past its budget of handles visited the walk gives
// up, and within it answers.
func TestEarliestBudget(t *testing.T) {
	w := New(1, 0)
	for h := range uint32(100) {
		w.Add(h, int64(1+h), uint64(h))
	}
	last := func(h uint32) bool { return h == 99 }
	if got, ok := w.Earliest([]uint32{5}, 1, -1, 50, last); ok || !slices.Equal(got, []uint32{5}) {
		t.Fatalf("over budget: %v %v", got, ok)
	}
	if got, ok := w.Earliest(nil, 1, -1, 100, last); !ok || !slices.Equal(got, []uint32{99}) {
		t.Fatalf("within budget: %v %v", got, ok)
	}
	if got, ok := w.Earliest(nil, 3, -1, 3, all(true)); !ok || !slices.Equal(got, []uint32{0, 1, 2}) {
		t.Fatalf("the first 3 within a budget of 3: %v %v", got, ok)
	}
}

func all(v bool) func(uint32) bool { return func(uint32) bool { return v } }
