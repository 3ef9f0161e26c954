package engine

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"testing"
)

// BenchmarkRestore: a follower restoring a snapshot of N jobs (client ids,
// 16-byte payloads, an hour out, 8 queues: TestClusterWipedFollowerRejoins's
// jobs). DELAYD_BENCH_RESTORE_JOBS sets N (200000 by default).
//
//	DELAYD_BENCH_RESTORE_JOBS=3000000 go test ./engine -run '^$' -bench BenchmarkRestore -benchtime 3x
func BenchmarkRestore(b *testing.B) {
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
