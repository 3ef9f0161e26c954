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
	"time"

	"github.com/delayd/delayd/engine"
)

func main() {
	n := flag.Int("n", 1_000_000, "jobs")
	dir := flag.String("dir", "/tmp/delayd-replay", "data directory (the log is replaced)")
	payload := flag.Int("payload", 16, "payload bytes")
	flag.Parse()
	os.Remove(*dir + "/" + engine.LogFile)
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
	st, _ := os.Stat(*dir + "/" + engine.LogFile)
	fmt.Printf("jobs=%d log_bytes=%d bytes_per_job=%.1f took=%v\n", *n, st.Size(), float64(st.Size())/float64(*n), time.Since(start).Round(time.Millisecond))
}
