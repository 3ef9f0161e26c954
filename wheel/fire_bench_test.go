package wheel

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkSpreadDelays is the job wheel under the pinned DELAY.ADD row
// (bench/pinned.sh, add-lpush): 760 adds a millisecond, each due 0 to 999
// ms later, the clock advanced every millisecond. Most jobs start on level
// 1 and cascade; the rest go straight to level 0 for the same ticks, so a
// fired bucket usually holds both, not in seq order. The owner keeps the
// seqs in 64-byte records, as the engine's jobs do. One op is one add and,
// in steady state, one fire.
func BenchmarkSpreadDelays(b *testing.B) {
	const perMs, handles = 760, 1 << 21 // every handle has fired before it comes round again
	type rec struct {
		seq uint64
		_   [56]byte
	}
	recs := make([]rec, handles)
	w := NewOrdered(1, 0, func(h uint32) uint64 { return recs[h].seq })
	defer w.Free()
	rng := rand.New(rand.NewPCG(1, 2))
	var (
		now int64
		seq uint64
		buf []uint32
	)
	step := func() {
		for range perMs {
			seq++
			h := uint32(seq % handles)
			recs[h].seq = seq
			if !w.Add(h, now+rng.Int64N(1000), seq) {
				buf = append(buf, h)
			}
		}
		now++
		buf = w.Advance(now, buf[:0])
	}
	for range 2000 { // steady state: a full second of pending jobs
		step()
	}
	b.ResetTimer()
	for i := 0; i < b.N; i += perMs {
		step()
	}
}
