// Command mklog writes an append-only log holding n pending jobs, through the
// real engine, for measuring start-up replay (bench/replay.sh).
//
//	go run ./bench/mklog -n 10000000 -dir /tmp/delayd-replay
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/delayd/delayd/engine"
)

func main() {
	n := flag.Int("n", 1_000_000, "jobs")
	dir := flag.String("dir", "/tmp/delayd-replay", "data directory (the log is replaced)")
	payload := flag.Int("payload", 16, "payload bytes")
	flag.Parse()
	// The log is a manifest and its segments (delayd.aof, delayd.aof.N).
	old, _ := filepath.Glob(filepath.Join(*dir, engine.LogFile+"*"))
	for _, f := range old {
		os.Remove(f)
	}
	e, err := engine.New(engine.Options{AppendOnly: true, Dir: *dir, Fsync: engine.FsyncNo})
	if err != nil {
		fmt.Fprintln(os.Stderr, "mklog:", err)
		os.Exit(1)
	}
	p := make([]byte, *payload)
	start := time.Now()
	var last uint64
	for i := range *n {
		res, err := e.Add(engine.AddArgs{Queue: []byte(fmt.Sprint("q", i%16)), Delay: 3_600_000 + rand.Int64N(3_600_000),
			Payload: p, AckTimeout: -1, Retry: -1})
		if err != nil {
			fmt.Fprintln(os.Stderr, "mklog:", err)
			os.Exit(1)
		}
		last = res.Ticket
	}
	if err := e.WaitDurable(last); err != nil {
		fmt.Fprintln(os.Stderr, "mklog:", err)
		os.Exit(1)
	}
	if err := e.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "mklog:", err)
		os.Exit(1)
	}
	var size int64
	segs, _ := filepath.Glob(filepath.Join(*dir, engine.LogFile+".*"))
	for _, f := range segs {
		if st, err := os.Stat(f); err == nil {
			size += st.Size()
		}
	}
	fmt.Printf("jobs=%d log_bytes=%d bytes_per_job=%.1f took=%v\n", *n, size, float64(size)/float64(*n), time.Since(start).Round(time.Millisecond))
}
