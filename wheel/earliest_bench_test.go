package wheel

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkEarliest: 1M scheduled handles due over an hour; the first 10
// of one handle in 1000 (a queue among many), and the worst case: a queue
// of 5 whose handles are all due last, so every bucket is visited.
func BenchmarkEarliest(b *testing.B) {
	w := New(1, 0)
	rng := rand.New(rand.NewPCG(1, 1))
	const n = 1 << 20
	for h := range uint32(n) {
		w.Add(h, 1+rng.Int64N(3_600_000), uint64(h))
	}
	b.Run("1in1000", func(b *testing.B) {
		for b.Loop() {
			w.Earliest(nil, 10, n/1000, 0, func(h uint32) bool { return h%1000 == 0 })
		}
	})
	late := New(1, 0)
	for h := range uint32(n) {
		late.Add(h, 1+rng.Int64N(3_600_000), uint64(h))
	}
	for h := uint32(n); h < n+5; h++ {
		late.Add(h, 3_700_000, uint64(h))
	}
	b.Run("worst", func(b *testing.B) {
		for b.Loop() {
			late.Earliest(nil, 10, 5, 0, func(h uint32) bool { return h >= n })
		}
	})
}
