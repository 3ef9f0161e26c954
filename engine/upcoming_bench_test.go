package engine

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkUpcoming: DELAY.UPCOMING q 10 with 1M delayed jobs of another
// queue due over an hour. "early": q's 1000 jobs spread among them (the
// wheel walk stops after the first buckets); "late": q's 5 jobs all due
// after the rest (the walk gives up at its budget and the slab is scanned).
func BenchmarkUpcoming(b *testing.B) {
	for _, c := range []struct {
		name  string
		n     int
		delay func(rng *rand.Rand) int64
	}{
		{"early", 1000, func(rng *rand.Rand) int64 { return 1000 + rng.Int64N(3_600_000) }},
		{"late", 5, func(*rand.Rand) int64 { return 3_700_000 }},
	} {
		b.Run(c.name, func(b *testing.B) {
			e, err := New(Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			rng := rand.New(rand.NewPCG(1, 1))
			for range 1 << 20 {
				e.Add(AddArgs{Queue: []byte("noise"), Payload: []byte("0123456789abcdef"), Delay: 1000 + rng.Int64N(3_600_000), Retry: -1})
			}
			for range c.n {
				e.Add(AddArgs{Queue: []byte("q"), Payload: []byte("x"), Delay: c.delay(rng), Retry: -1})
			}
			for b.Loop() {
				if got := e.Upcoming([]byte("q"), 10); len(got) != min(10, c.n) {
					b.Fatalf("%d jobs", len(got))
				}
			}
		})
	}
}
