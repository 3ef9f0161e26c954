package engine

import (
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayd/delayd/finetimer"
)

// BenchmarkRewriteStall is the "no stalls from compaction" inside
// one process: 500k jobs pending and one P, as a server pinned to one CPU
// runs; a client adds a job and waits for its write every 100 µs while a
// rewrite copies the jobs. It reports the client's wait over the ops that
// began during the rewrite (p99, p99.9, max) and the rewrite's time.
// Sub-benchmarks with and without the yield between chunks, run in turns:
//
//	taskset -c 0 go test ./engine -run '^$' -bench RewriteStall -benchtime 3x
func BenchmarkRewriteStall(b *testing.B) {
	for _, yield := range []bool{true, false} {
		name := "yield"
		if !yield {
			name = "noyield"
		}
		b.Run(name, func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			if !yield {
				defer func(f func(*finetimer.Timer)) { rewriteYield = f }(rewriteYield)
				rewriteYield = func(*finetimer.Timer) {}
			}
			var waits, took []time.Duration
			for range b.N {
				w, t := rewriteStall(b, 500_000, false)
				waits, took = append(waits, w...), append(took, t)
			}
			slices.Sort(waits)
			at := func(p float64) float64 { return float64(waits[min(int(p*float64(len(waits))), len(waits)-1)]) }
			b.ReportMetric(at(0.99), "p99-ns/op-in-rewrite")
			b.ReportMetric(at(0.999), "p99.9-ns/op-in-rewrite")
			b.ReportMetric(float64(waits[len(waits)-1]), "max-ns/op-in-rewrite")
			b.ReportMetric(float64(slices.Max(took)), "max-ns/rewrite")
		})
	}
}

// BenchmarkCompactionStall is BenchmarkRewriteStall for the segmented
// log: the same 500k jobs in one sealed segment, compacted (every job
// restated at the head in chunks, then the segment dropped) against the
// whole rewrite, in turns:
//
//	taskset -c 0 go test ./engine -run '^$' -bench CompactionStall -benchtime 3x
func BenchmarkCompactionStall(b *testing.B) {
	for _, compact := range []bool{true, false} {
		name := "compact"
		if !compact {
			name = "rewrite"
		}
		b.Run(name, func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			var waits, took []time.Duration
			for range b.N {
				w, t := rewriteStall(b, 500_000, compact)
				waits, took = append(waits, w...), append(took, t)
			}
			slices.Sort(waits)
			at := func(p float64) float64 { return float64(waits[min(int(p*float64(len(waits))), len(waits)-1)]) }
			b.ReportMetric(at(0.99), "p99-ns/op-in-compaction")
			b.ReportMetric(at(0.999), "p99.9-ns/op-in-compaction")
			b.ReportMetric(float64(waits[len(waits)-1]), "max-ns/op-in-compaction")
			b.ReportMetric(float64(slices.Max(took)), "max-ns/compaction")
		})
	}
}

// rewriteStall fills a logged engine with n jobs, rewrites its log (or,
// with compact, compacts the segment that holds them) while a client
// writes, and returns the client's waits that began during the
// rewrite and the rewrite's time.
func rewriteStall(b *testing.B, n int, compact bool) ([]time.Duration, time.Duration) {
	b.StopTimer()
	defer b.StartTimer()
	e, err := New(Options{AppendOnly: true, Dir: b.TempDir(), Fsync: FsyncEverySec})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	q, payload := []byte("q"), []byte("0123456789abcdef")
	var last uint64
	for i := range n {
		r, err := e.Add(AddArgs{Queue: q, Payload: payload, Delay: 3_600_000 + int64(i%1000), AckTimeout: 30_000, Retry: -1})
		if err != nil {
			b.Fatal(err)
		}
		last = r.Ticket
	}
	if err := e.WaitDurable(last); err != nil {
		b.Fatal(err)
	}
	runtime.GC()

	type op struct {
		at   time.Time
		wait time.Duration
	}
	var (
		ops  []op
		stop atomic.Bool
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		for !stop.Load() {
			t0 := time.Now()
			r, err := e.Add(AddArgs{Queue: []byte("w"), Payload: payload, Delay: 100_000, Retry: -1})
			if err == nil {
				err = e.WaitDurable(r.Ticket)
			}
			if err != nil {
				return
			}
			ops = append(ops, op{t0, time.Since(t0)})
			time.Sleep(100 * time.Microsecond)
		}
	}()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	if compact {
		// The worst case for a segment: every job in it live, so all are
		// restated (the roll seals the segment that holds them).
		if err := e.journal.Roll(); err != nil {
			b.Fatal(err)
		}
		if err := e.compactSegment(e.journal.Segments()[0]); err != nil {
			b.Fatal(err)
		}
	} else {
		if err := e.Rewrite(); err != nil {
			b.Fatal(err)
		}
		for {
			e.mu.Lock()
			running := e.journal.Rewriting()
			e.mu.Unlock()
			if !running {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	end := time.Now()
	time.Sleep(50 * time.Millisecond)
	stop.Store(true)
	<-done
	var waits []time.Duration
	for _, o := range ops {
		if !o.at.Before(start) && o.at.Before(end) {
			waits = append(waits, o.wait)
		}
	}
	return waits, end.Sub(start)
}

// BenchmarkCompactionSpillStall is BenchmarkCompactionStall as a server
// runs it (bench/loadgen's 500k pending are due in one to two hours, past
// the horizon): the 500k jobs' payloads are on disk, the compaction reads
// each back to restate it, and the spiller then spills them all again
// from the head. The client's waits are taken from the compaction's start
// until the spiller has put every payload back on disk. "paced" is the
// build as it is; "unpaced" takes out the compaction step's 1 ms budget
// and the spiller's pauses (the build before them):
//
//	taskset -c 0 go test ./engine -run '^$' -bench CompactionSpillStall -benchtime 2x
func BenchmarkCompactionSpillStall(b *testing.B) {
	for _, paced := range []bool{true, false} {
		name := "paced"
		if !paced {
			name = "unpaced"
		}
		b.Run(name, func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			if !paced {
				defer func(d time.Duration, f func(*finetimer.Timer)) { compactHold, spillYield = d, f }(compactHold, spillYield)
				compactHold, spillYield = time.Hour, func(*finetimer.Timer) {}
			}
			var waits, took []time.Duration
			for range b.N {
				w, t := spillStall(b, 500_000)
				waits, took = append(waits, w...), append(took, t)
			}
			slices.Sort(waits)
			at := func(p float64) float64 { return float64(waits[min(int(p*float64(len(waits))), len(waits)-1)]) }
			b.ReportMetric(at(0.99), "p99-ns/op")
			b.ReportMetric(at(0.999), "p99.9-ns/op")
			b.ReportMetric(float64(waits[len(waits)-1]), "max-ns/op")
			b.ReportMetric(float64(slices.Max(took)), "max-ns/compaction+spill")
		})
	}
}

// spillStall fills an engine with n jobs whose payloads go to disk,
// compacts the segment that holds them while a client writes, waits for
// the spiller to put them back on disk, and returns the client's waits
// over that time and its length.
func spillStall(b *testing.B, n int) ([]time.Duration, time.Duration) {
	b.StopTimer()
	defer b.StartTimer()
	e, err := New(Options{AppendOnly: true, Dir: b.TempDir(), Fsync: FsyncEverySec, FineTimer: true, Horizon: 3_600_000})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	q, payload := []byte("q"), []byte("0123456789abcdef")
	var last uint64
	for i := range n {
		r, err := e.Add(AddArgs{Queue: q, Payload: payload, Delay: 7_200_000 + int64(i), AckTimeout: 30_000, Retry: -1})
		if err != nil {
			b.Fatal(err)
		}
		last = r.Ticket
	}
	if err := e.WaitDurable(last); err != nil {
		b.Fatal(err)
	}
	onDisk := func() int64 { return e.Info().DiskJobs }
	for deadline := time.Now().Add(time.Minute); onDisk() < int64(n); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d payloads on disk after a minute", onDisk(), n)
		}
	}
	runtime.GC()

	type op struct {
		at   time.Time
		wait time.Duration
	}
	var (
		ops  []op
		stop atomic.Bool
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		for !stop.Load() {
			t0 := time.Now()
			r, err := e.Add(AddArgs{Queue: []byte("w"), Payload: payload, Delay: 100_000, Retry: -1})
			if err == nil {
				err = e.WaitDurable(r.Ticket)
			}
			if err != nil {
				return
			}
			ops = append(ops, op{t0, time.Since(t0)})
			time.Sleep(100 * time.Microsecond)
		}
	}()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	if err := e.journal.Roll(); err != nil {
		b.Fatal(err)
	}
	if err := e.compactSegment(e.journal.Segments()[0]); err != nil {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); onDisk() < int64(n); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d payloads back on disk a minute after the compaction", onDisk(), n)
		}
	}
	end := time.Now()
	time.Sleep(50 * time.Millisecond)
	stop.Store(true)
	<-done
	var waits []time.Duration
	for _, o := range ops {
		if !o.at.Before(start) && o.at.Before(end) {
			waits = append(waits, o.wait)
		}
	}
	return waits, end.Sub(start)
}
