package engine

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// BenchmarkReplay measures New replaying a log of pending jobs, as a server
// does at start-up. The log is made once per run through the engine, like
// bench/mklog's (16 queues, 16-byte payloads, due 1 to 2 hours ahead);
// DELAYD_REPLAY_DIR names a directory holding one already (bench/mklog -dir),
// DELAYD_REPLAY_JOBS its size when the benchmark makes it (default 200k).
//
//	go run ./bench/mklog -n 10000000 -dir /tmp/d10m
//	DELAYD_REPLAY_DIR=/tmp/d10m go test -run '^$' -bench 'Replay$' -benchtime 3x -cpuprofile cpu.out ./engine/
func BenchmarkReplay(b *testing.B) {
	dir := os.Getenv("DELAYD_REPLAY_DIR")
	if dir == "" {
		n := 200_000
		if s := os.Getenv("DELAYD_REPLAY_JOBS"); s != "" {
			n, _ = strconv.Atoi(s)
		}
		dir = b.TempDir()
		e, err := New(Options{AppendOnly: true, Dir: dir, Fsync: FsyncNo})
		if err != nil {
			b.Fatal(err)
		}
		p := make([]byte, 16)
		var last uint64
		for i := range n {
			res, err := e.Add(AddArgs{Queue: []byte("q" + strconv.Itoa(i%16)), Delay: 3_600_000 + int64(i*7919%3_600_000),
				Payload: p, AckTimeout: -1, Retry: -1})
			if err != nil {
				b.Fatal(err)
			}
			last = res.Ticket
		}
		if err := e.WaitDurable(last); err != nil {
			b.Fatal(err)
		}
		if err := e.Close(); err != nil {
			b.Fatal(err)
		}
	}
	st, err := os.Stat(filepath.Join(dir, LogFile))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(st.Size())
	b.ReportAllocs()
	jobs := 0
	for b.Loop() {
		e, err := New(Options{AppendOnly: true, Dir: dir, Fsync: FsyncNo})
		if err != nil {
			b.Fatal(err)
		}
		jobs = e.njobs
		b.StopTimer()
		if err := e.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(jobs), "jobs")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(max(jobs, 1)), "ns/job")
}
