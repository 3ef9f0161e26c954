package topn

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestKeepsTheNBest(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 7, 100, 1000} {
		vals := rng.Perm(500)
		k := New(n, len(vals), func(a, b int) bool { return a > b })
		for _, v := range vals {
			k.Offer(v)
		}
		got := k.Sorted()
		want := slices.Clone(vals)
		slices.Sort(want)
		slices.Reverse(want)
		want = want[:min(n, len(want))]
		if !slices.Equal(got, want) {
			t.Fatalf("n=%d: got %v, want %v", n, got, want)
		}
	}
}

// The heap's capacity is what can come, not n: a Keeper of a million over
// ten values allocates ten.
func TestRoomBoundsCapacity(t *testing.T) {
	k := New(1_000_000, 10, func(a, b int) bool { return a < b })
	if cap(k.heap) != 10 {
		t.Fatalf("capacity %d", cap(k.heap))
	}
	if k := New(-1, 10, func(a, b int) bool { return a < b }); cap(k.heap) != 0 {
		t.Fatal("a negative n made room")
	}
}
