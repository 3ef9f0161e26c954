// Command drainprof drains a queue of ready jobs with the worker library
// and prints the rate and the jobs a fetch took: the client side of the
// rivals race's burst case, without the race. It adds -jobs ready jobs
// (ACKTIMEOUT 30 s) to queue "drain" of the delayd at -addr, then runs -w
// workers of concurrency -c until every job ran; -prof writes a CPU
// profile of the drain. -batch runs the library's batch mode (HandleBatch,
// -bs jobs a batch);
// -raw runs no library, the floor the library is measured against.
//
//	taskset -c 0 delayd --port 16999 --appendonly yes &
//	taskset -c 1 go run ./worker/internal/drainprof -c 16
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayd/delayd/worker"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:16999", "")
	jobs := flag.Int("jobs", 100000, "")
	conc := flag.Int("c", 16, "")
	workers := flag.Int("w", 8, "")
	prof := flag.String("prof", "", "")
	proto := flag.Int("proto", 3, "RESP version of the workers' clients")
	raw := flag.Bool("raw", false, "no library: each worker pipelines DELAY.ACK of its last batch with DELAY.MPOP COUNT -c on go-redis and handles the jobs in its own goroutine")
	batch := flag.Bool("batch", false, "the library's batch mode: HandleBatch, a fetch's jobs in one call")
	batchSize := flag.Int("bs", 0, "the batch mode's BatchSize (0: the library's default)")
	lead := flag.Duration("lead", 0, "all jobs due this long after the adds begin (0: ready at once)")
	spread := flag.Duration("spread", 0, "due times spread evenly over this span from the lead on (give a -lead longer than the adds take); prints the handlers' lateness")
	flag.Parse()
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: *addr, Protocol: *proto})
	rdb.Del(ctx, "drain")
	pipe := rdb.Pipeline()
	due := time.Now().Add(*lead)
	dueMs := func(i int) int64 { return due.Add(time.Duration(i) * *spread / time.Duration(*jobs)).UnixMilli() }
	for i := 0; i < *jobs; i++ {
		pipe.Do(ctx, "DELAY.ADDAT", "drain", dueMs(i), strconv.Itoa(i), "ACKTIMEOUT", 30000)
		if i%1000 == 999 {
			pipe.Exec(ctx)
		}
	}
	pipe.Exec(ctx)
	if *prof != "" {
		f, _ := os.Create(*prof)
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if *lead > 0 && time.Now().After(due) {
		fmt.Println("the adds took longer than -lead: lateness and rates are off")
	}
	var n atomic.Int64
	all := make(chan struct{})
	late := make([]time.Duration, *jobs)
	note := func(payload string) {
		if i, err := strconv.Atoi(payload); err == nil && i < len(late) {
			late[i] = time.Since(time.UnixMilli(dueMs(i)))
		}
	}
	start := time.Now()
	if start.Before(due) {
		start = due
	}
	cpu0 := cpuTime()
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := 0; i < *workers && *raw; i++ {
		c := redis.NewClient(&redis.Options{Addr: *addr, Protocol: *proto})
		c.AddHook(counter{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			var acks []any
			for rctx.Err() == nil {
				pipe := c.Pipeline()
				if len(acks) > 0 {
					pipe.Do(rctx, append([]any{"DELAY.ACK", "drain"}, acks...)...)
				}
				pop := pipe.Do(rctx, "DELAY.MPOP", 1, 1, "drain", "COUNT", *conc)
				pipe.Exec(rctx)
				acks = acks[:0]
				v, _ := pop.Slice()
				if len(v) != 2 {
					continue
				}
				for _, e := range v[1].([]any) {
					acks = append(acks, e.([]any)[0])
					note(e.([]any)[1].(string))
					if n.Add(1) == int64(*jobs) {
						close(all)
					}
				}
			}
		}()
	}
	for i := 0; i < *workers && !*raw; i++ {
		c := redis.NewClient(&redis.Options{Addr: *addr, Protocol: *proto})
		c.AddHook(counter{})
		w := worker.New(c, worker.Options{Concurrency: *conc, BatchSize: *batchSize, Logger: slog.New(slog.DiscardHandler)})
		if *batch {
			w.HandleBatchFunc("drain", func(_ context.Context, js []*worker.Job) error {
				for _, j := range js {
					note(string(j.Payload))
				}
				if n.Add(int64(len(js))) == int64(*jobs) {
					close(all)
				}
				return nil
			})
		} else {
			w.HandleFunc("drain", func(_ context.Context, j *worker.Job) error {
				note(string(j.Payload))
				if n.Add(1) == int64(*jobs) {
					close(all)
				}
				return nil
			})
		}
		wg.Add(1)
		go func() { defer wg.Done(); w.Run(rctx) }()
	}
	<-all
	took := time.Since(start)
	cpu := cpuTime() - cpu0
	fmt.Printf("%d jobs in %v: %.0f jobs/s, %.2f µs of this process's CPU a job; %d fetches (%.1f jobs each), %d without acks; %d acks sent alone\n",
		*jobs, took, float64(*jobs)/took.Seconds(), float64(cpu.Microseconds())/float64(*jobs),
		fetches.Load(), float64(*jobs)/float64(fetches.Load()), alone.Load(), acksAlone.Load())
	if *spread > 0 {
		slices.Sort(late)
		q := func(f float64) float64 { return float64(late[int(f*float64(len(late)-1))].Microseconds()) / 1000 }
		fmt.Printf("lateness (handler time minus due ms) p50 %.2f p99 %.2f p99.9 %.2f max %.2f ms\n", q(0.5), q(0.99), q(0.999), q(1))
	}
	cancel()
	wg.Wait()
}

// cpuTime is the process's user and system CPU so far: the workers' cost
// (the server runs in its own process).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var fetches, alone, acksAlone atomic.Int64

type counter struct{}

func (counter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch cmd.Name() {
		case "delay.mpop":
			fetches.Add(1)
			alone.Add(1)
		case "delay.ack":
			acksAlone.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		fetches.Add(1)
		return next(ctx, cmds)
	}
}
