package engine

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// threadCPU is the calling thread's CPU time: on a shared machine the
// wall clock around a short critical section mostly measures the wait for
// a CPU.
func threadCPU() time.Duration {
	var ts syscall.Timespec
	const clockThreadCPUTimeID = 3
	syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0)
	return time.Duration(ts.Nano())
}

// BenchmarkAdvanceLockSpread is the rivals race's "delays spread over 0 to
// 10 s" inside the engine: 10k adds/s due 1 ms to 10 s later, the clock
// stepped by one millisecond at a time and moved with the lock held, as
// the timer goroutine does (advanceLocked: the wheel, then each fired job
// made ready). No client waits, so serving is a push to the ready list.
// It reports the thread CPU time the lock is held per advance: p50, p99,
// p99.9 and max over 30 s of simulated time per op.
func BenchmarkAdvanceLockSpread(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var took []time.Duration
	for range b.N {
		var clock atomic.Int64
		clock.Store(1_700_000_000_000)
		e, err := New(Options{Now: func() time.Time { return time.UnixMilli(clock.Load()) }})
		if err != nil {
			b.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		q, payload := []byte("q"), []byte("0123456789abcdef")
		for step := 0; step < 30_000; step++ {
			for range 10 {
				if _, err := e.Add(AddArgs{Queue: q, Payload: payload, Delay: 1 + rng.Int64N(10_000), Retry: -1}); err != nil {
					b.Fatal(err)
				}
			}
			// Keep the ready list short, as workers would.
			for range 10 {
				e.Pop([][]byte{q})
			}
			e.mu.Lock()
			now := clock.Add(1) // under the lock: the timer goroutine cannot move to it first
			t0 := threadCPU()
			e.advanceLocked(now)
			took = append(took, threadCPU()-t0)
			e.mu.Unlock()
		}
		e.Close()
	}
	slices.Sort(took)
	at := func(p float64) float64 { return float64(took[min(int(p*float64(len(took))), len(took)-1)]) }
	b.ReportMetric(at(0.5), "p50-ns/advance")
	b.ReportMetric(at(0.99), "p99-ns/advance")
	b.ReportMetric(at(0.999), "p99.9-ns/advance")
	b.ReportMetric(float64(took[len(took)-1]), "max-ns/advance")
}
