package engine

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"
)

// BenchmarkRestore: a follower restoring a snapshot of N jobs (client ids,
// 16-byte payloads, an hour out, 8 queues: TestClusterWipedFollowerRejoins's
// jobs). DELAYD_BENCH_RESTORE_JOBS sets N (200000 by default).
//
//	DELAYD_BENCH_RESTORE_JOBS=3000000 go test ./engine -run '^$' -bench BenchmarkRestore -benchtime 3x
func BenchmarkRestore(b *testing.B) {
	src := benchSnapshotSource(b)
	n := src.njobs
	snap := src.Snapshot()
	src.Close()
	b.SetBytes(int64(len(snap)))
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		f, err := New(Options{Replicator: &fakeRepl{closed: true}, Follower: true})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := f.Restore(bytes.NewReader(snap)); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if got := f.njobs; got != n {
			b.Fatalf("restored %d jobs, want %d", got, n)
		}
		f.Close()
		b.StartTimer()
	}
}

// benchSnapshotSource is an engine of DELAYD_BENCH_RESTORE_JOBS jobs as
// BenchmarkRestore describes them.
func benchSnapshotSource(b *testing.B) *Engine {
	n := 200000
	if s := os.Getenv("DELAYD_BENCH_RESTORE_JOBS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	src, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		k := strconv.Itoa(i)
		if _, err := src.Add(AddArgs{Queue: []byte(fmt.Sprintf("{w}q%d", i%8)), Delay: 3600000,
			Payload: []byte("p" + k + "xxxxxxxxxxxxxxxx"[:16-len(k)]), ID: []byte("j" + k)}); err != nil {
			b.Fatal(err)
		}
	}
	return src
}

// BenchmarkCaptureHold: how long a capture holds the lock, the state
// written to a file as cluster.takeSnapshot writes it (a 1 MiB buffer),
// on an engine that is not replicating (the follower's path but for its
// role check, which a plain engine fails: so the lock is taken here).
// Besides the source's jobs, DELAYD_BENCH_CAPTURE_RESERVED (1,000 by
// default) are reserved: with any, the hold copies the wheel's deadlines.
// hold-us is the lock's hold, timed inside it (ns/op adds the timer's own
// stops and starts, a few ms); capture-ms is the whole capture, the
// encoding after the lock included (the buffers' mapping before it is not).
//
//	DELAYD_BENCH_RESTORE_JOBS=1000000 go test ./engine -run '^$' -bench BenchmarkCaptureHold -benchtime 5x
func BenchmarkCaptureHold(b *testing.B) {
	src := benchSnapshotSource(b)
	defer src.Close()
	reserved := 1000
	if s := os.Getenv("DELAYD_BENCH_CAPTURE_RESERVED"); s != "" {
		reserved, _ = strconv.Atoi(s)
	}
	benchReserve(b, src, reserved)
	dir := b.TempDir()
	var whole, held time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		f, err := os.Create(fmt.Sprintf("%s/capture-%d", dir, i))
		if err != nil {
			b.Fatal(err)
		}
		bw := bufio.NewWriterSize(f, 1<<20)
		bufs := src.captureBufs()
		t0 := time.Now()
		cw := newChunkWriter(bw, captureChunks, captureFlush+64<<10)
		b.StartTimer()
		src.mu.Lock()
		h0 := time.Now()
		fz := src.freeze(cw, bufs)
		held += time.Since(h0)
		src.mu.Unlock()
		b.StopTimer() // the hold only: the rest is encoded and written after the lock
		if fz != nil {
			if err := src.encodeFrozen(fz); err != nil {
				b.Fatal(err)
			}
		}
		if err := cw.close(); err != nil {
			b.Fatal(err)
		}
		whole += time.Since(t0)
		bufs.release()
		if err := bw.Flush(); err != nil {
			b.Fatal(err)
		}
		f.Close()
		os.Remove(f.Name())
		b.StartTimer()
	}
	b.ReportMetric(float64(whole.Milliseconds())/float64(b.N), "capture-ms")
	b.ReportMetric(float64(held.Microseconds())/float64(b.N), "hold-us")
}

// benchReserve adds n jobs due now and pops them: reservations in flight.
func benchReserve(b *testing.B, e *Engine, n int) {
	for range n {
		if _, err := e.Add(AddArgs{Queue: []byte("{w}r"), Payload: []byte("reserved"), AckTimeout: 3600000}); err != nil {
			b.Fatal(err)
		}
	}
	for range n {
		if _, ok := e.Pop([][]byte{[]byte("{w}r")}); !ok {
			b.Fatal("nothing to pop")
		}
	}
}
