// Command loadgen drives a running delayd the way a worker fleet does and
// measures what users feel: how late a blocked worker gets a job after its
// due time, and whether any job comes early.
//
//	go run ./bench/loadgen -pending 1000000 -rate 50000 -duration 20s
//
// It first fills the server with -pending jobs due far in the future (so the
// wheel holds them), then adds -rate jobs per second with delays spread over
// -delay, each with DELAY.ADDAT and an absolute due time it chose, while
// -workers workers wait in DELAY.POP. Lateness is the worker's receive time
// minus that due time, on the same clock. It stops by itself.
//
// -mode picks what a worker does: pop (DELAY.POP key 0, the job removed),
// ack (jobs carry ACKTIMEOUT; DELAY.POP then DELAY.ACK, lateness taken when
// the ACK's reply arrives: a job's completion) or blpop (BLPOP key 0).
// For the rivals race's shapes:
//
//	go run ./bench/loadgen -pending 0 -rate 1000 -delay 1s -producers 4 -workers 8 -mode ack
//	go run ./bench/loadgen -pending 0 -rate 10000 -delay 10s -producers 4 -workers 8 -mode ack
package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6380", "delayd address")
	pending := flag.Int("pending", 1_000_000, "jobs to hold in the wheel while measuring (due in an hour or more)")
	rate := flag.Int("rate", 50_000, "adds per second while measuring")
	duration := flag.Duration("duration", 20*time.Second, "how long to measure")
	delay := flag.Duration("delay", time.Second, "measured jobs are due 1 ms to this far after they are added")
	workers := flag.Int("workers", 16, "workers blocked in DELAY.POP")
	producers := flag.Int("producers", 8, "producer connections")
	queue := flag.String("queue", "loadgen", "queue name")
	lateLog := flag.Duration("late-log", 0, "if set, print by second of due time the jobs later than this (where a stall was)")
	mode := flag.String("mode", "pop", "what a worker does: pop (DELAY.POP), ack (DELAY.POP then DELAY.ACK) or blpop (BLPOP)")
	flag.Parse()
	if *mode != "pop" && *mode != "ack" && *mode != "blpop" {
		fmt.Fprintln(os.Stderr, "loadgen: -mode is pop, ack or blpop")
		os.Exit(2)
	}

	ctx := context.Background()
	// No read timeout: workers block in pops with timeout 0, as the workers
	// measured do; closing the client ends them.
	rdb := redis.NewClient(&redis.Options{Addr: *addr, PoolSize: *workers + *producers + 4, Protocol: 2, ReadTimeout: -1})
	if err := rdb.Ping(ctx).Err(); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
	if err := prefill(ctx, rdb, *queue+":pending", *pending); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen: prefill:", err)
		os.Exit(1)
	}

	var (
		mu      sync.Mutex
		late    []time.Duration
		lateAt  = map[int64][2]int64{} // due second -> (count, max ms) of jobs later than -late-log
		early   atomic.Int64
		added   atomic.Int64
		wg      sync.WaitGroup
		workerW sync.WaitGroup
	)
	for range *workers {
		workerW.Add(1)
		go func() {
			defer workerW.Done()
			for {
				var due int64
				switch *mode {
				case "blpop":
					res, err := rdb.BLPop(ctx, 0, *queue).Result()
					if err != nil {
						return // the client was closed: the run is over
					}
					due, _ = strconv.ParseInt(res[1], 10, 64)
				default:
					res, err := rdb.Do(ctx, "DELAY.POP", *queue, "0").Slice()
					if err != nil {
						return
					}
					due, _ = strconv.ParseInt(res[2].(string), 10, 64)
					if *mode == "ack" {
						if err := rdb.Do(ctx, "DELAY.ACK", *queue, res[1]).Err(); err != nil {
							return
						}
					}
				}
				now := time.Now()
				d := now.Sub(time.UnixMilli(due))
				if d < 0 {
					early.Add(1)
				}
				mu.Lock()
				late = append(late, d)
				if *lateLog > 0 && d > *lateLog {
					c := lateAt[due/1000]
					lateAt[due/1000] = [2]int64{c[0] + 1, max(c[1], d.Milliseconds())}
				}
				mu.Unlock()
			}
		}()
	}

	start := time.Now()
	for p := range *producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			// This producer's share of -rate, spread over the ticks so that
			// small rates come out right (1000/s over 8 producers is 125/s
			// each: 1 or 2 a tick).
			var share float64
			if p < *rate%*producers {
				share = float64(*rate / *producers + 1)
			} else {
				share = float64(*rate / *producers)
			}
			sent := 0
			for time.Since(start) < *duration {
				<-tick.C
				n := int(share*time.Since(start).Seconds()) - sent
				if n <= 0 {
					continue
				}
				pipe := rdb.Pipeline()
				for range n {
					due := time.Now().Add(time.Millisecond + rand.N(*delay)).UnixMilli()
					s := strconv.FormatInt(due, 10)
					if *mode == "ack" {
						pipe.Do(ctx, "DELAY.ADDAT", *queue, s, s, "ACKTIMEOUT", 30000)
					} else {
						pipe.Do(ctx, "DELAY.ADDAT", *queue, s, s)
					}
				}
				sent += n
				if _, err := pipe.Exec(ctx); err == nil {
					added.Add(int64(n))
				}
			}
		}()
	}
	wg.Wait()
	time.Sleep(*delay + 500*time.Millisecond) // let the last jobs come due
	rdb.Close()
	workerW.Wait()

	mu.Lock()
	defer mu.Unlock()
	slices.Sort(late)
	if *lateLog > 0 {
		secs := slices.Sorted(maps.Keys(lateAt))
		for _, sec := range secs {
			fmt.Printf("late over %v due at %s (+%ds): %d jobs, max %d ms\n", *lateLog, time.Unix(sec, 0).UTC().Format("15:04:05"), sec-start.Unix(), lateAt[sec][0], lateAt[sec][1])
		}
	}
	q := func(p float64) time.Duration {
		if len(late) == 0 {
			return 0
		}
		return late[min(int(p*float64(len(late))), len(late)-1)]
	}
	fmt.Printf("mode=%s pending=%d rate=%d/s added=%d received=%d early=%d\n", *mode, *pending, *rate, added.Load(), len(late), early.Load())
	fmt.Printf("lateness after due: p50=%v p90=%v p99=%v p99.9=%v max=%v\n", q(0.50), q(0.90), q(0.99), q(0.999), q(1))
	if early.Load() > 0 {
		os.Exit(3)
	}
}

// prefill adds n jobs due an hour or more from now, pipelined.
func prefill(ctx context.Context, rdb *redis.Client, queue string, n int) error {
	const batch = 1000
	for i := 0; i < n; i += batch {
		pipe := rdb.Pipeline()
		for j := i; j < min(i+batch, n); j++ {
			pipe.Do(ctx, "DELAY.ADD", queue, 3_600_000+rand.IntN(3_600_000), "0123456789abcdef")
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
	}
	return nil
}
