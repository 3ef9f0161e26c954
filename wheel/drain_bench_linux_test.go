package wheel

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// threadCPU is the calling thread's CPU time: unlike the wall clock it
// does not count the time the thread waited for a CPU, which on a shared
// machine is most of an Advance's worst case.
func threadCPU() time.Duration {
	var ts syscall.Timespec
	const clockThreadCPUTimeID = 3
	syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0)
	return time.Duration(ts.Nano())
}

// BenchmarkAdvanceSpread is the rivals race's "delays spread over 0 to
// 10 s" at the wheel alone: 10k adds/s due 1 ms to 10 s later, the clock
// moving every millisecond, 30 s of it per op. It reports the CPU time one
// Advance takes (what the engine holds its lock for, less serving the
// jobs; thread CPU time, so that waiting for a CPU on a shared machine is
// not counted): p50, p99, p99.9 and max, with the cascade at the bucket's
// start (as before draining) and with draining.
func BenchmarkAdvanceSpread(b *testing.B) {
	for _, c := range []struct {
		name    string
		noDrain bool
	}{{"cascade", true}, {"drain", false}} {
		b.Run(c.name, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var took []time.Duration
			var worst time.Duration
			var worstWork int
			var worstAt int64
			for range b.N {
				rng := rand.New(rand.NewPCG(1, 2))
				w := New(1, 0)
				w.noDrain = c.noDrain
				var free []uint32
				var h uint32
				var buf []uint32
				for now := int64(1); now <= 30_000; now++ {
					for range 10 {
						var hh uint32
						if n := len(free); n > 0 {
							hh, free = free[n-1], free[:n-1]
						} else {
							hh = h
							h++
						}
						w.Add(hh, now+1+int64(rng.IntN(10_000)), uint64(now))
					}
					wk := w.work
					t0 := threadCPU()
					buf = w.Advance(now, buf[:0])
					d := threadCPU() - t0
					took = append(took, d)
					if d > worst {
						worst, worstWork, worstAt = d, w.work-wk, now
					}
					free = append(free, buf...)
				}
			}
			slices.Sort(took)
			q := func(p float64) float64 { return float64(took[min(int(p*float64(len(took))), len(took)-1)]) }
			b.ReportMetric(q(0.5), "p50-ns/advance")
			b.ReportMetric(q(0.99), "p99-ns/advance")
			b.ReportMetric(q(0.999), "p99.9-ns/advance")
			b.ReportMetric(float64(took[len(took)-1]), "max-ns/advance")
			b.Logf("worst Advance: %v at %d ms, %d entries moved", worst, worstAt, worstWork)
		})
	}
}
