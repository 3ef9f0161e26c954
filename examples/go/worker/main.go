// Command worker runs jobs of a delayd queue with the worker library
// (github.com/delayd/delayd/worker): up to CONCURRENCY jobs at once, each
// acknowledged when its handler returns (the ACK goes with the worker's
// next fetch), given back with a backoff when it fails, kept reserved by a
// heartbeat when it runs long. examples/go/rawworker is the same loop
// without the library.
//
// Graceful stop: on SIGTERM or SIGINT the worker takes nothing more, lets
// the jobs in hand finish (up to 30 s), acknowledges them, and exits 0.
//
//	DELAYD_ADDR   server (default 127.0.0.1:6380)
//	QUEUE         queue to work on (default jobs:email)
//	WORK_MS       how long one job takes, to see a graceful stop (default 100)
//	MAX_JOBS      stop after this many jobs (default 0: never)
//	CONCURRENCY   jobs at once in this worker, and the queue's DELAY.LIMIT
//	              over every worker (default 10)
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayd/delayd/worker"
)

func main() {
	rdb := redis.NewClient(&redis.Options{Addr: env("DELAYD_ADDR", "127.0.0.1:6380")})
	defer rdb.Close()
	queue := env("QUEUE", "jobs:email")
	work := time.Duration(envInt("WORK_MS", 100)) * time.Millisecond
	maxJobs := int64(envInt("MAX_JOBS", 0))
	concurrency := envInt("CONCURRENCY", 10)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	// Flow control is the server's: at most this many jobs of the queue
	// reserved at once over the whole fleet. Every worker sets the same.
	if err := worker.NewClient(rdb).Limit(ctx, queue, concurrency, 0, 0); err != nil {
		log.Fatalf("DELAY.LIMIT: %v", err)
	}
	fmt.Printf("limit: at most %d jobs of %s in flight\n", concurrency, queue)

	var done atomic.Int64
	w := worker.New(rdb, worker.Options{
		Concurrency: concurrency,
		Acked: func(_ string, ids []string) {
			for _, id := range ids {
				fmt.Printf("acked %s\n", id)
			}
		},
	})
	w.HandleFunc(queue, func(ctx context.Context, job *worker.Job) error {
		fmt.Printf("processing %s %s\n", job.ID, job.Payload)
		time.Sleep(work) // the job's work; a real one would watch ctx
		if n := done.Add(1); maxJobs > 0 && n >= maxJobs {
			stop() // a graceful stop: this job is still acked
		}
		return nil
	})
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("worker stopped after %d jobs\n", done.Load())
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envInt(name string, def int) int {
	v, err := strconv.Atoi(env(name, strconv.Itoa(def)))
	if err != nil {
		log.Fatalf("%s: %v", name, err)
	}
	return v
}
