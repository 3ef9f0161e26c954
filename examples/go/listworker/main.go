// Command listworker is a stock Redis list worker: BLPOP on a delayd queue,
// unchanged from a worker of a Redis list. delayd moves each job to the
// queue's ready list when its time comes; BLPOP removes it (at-most-once:
// a list pop needs no ACK, whatever the job's ack timeout).
//
// go-redis's BLPop adds its timeout to the client's read timeout on its
// own, so no read timeout needs setting here.
//
//	DELAYD_ADDR   server (default 127.0.0.1:6380)
//	QUEUE         queue (default jobs:email)
//	MAX_JOBS      exit after this many jobs (default 0: never)
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	rdb := redis.NewClient(&redis.Options{Addr: env("DELAYD_ADDR", "127.0.0.1:6380")})
	defer rdb.Close()
	queue := env("QUEUE", "jobs:email")
	maxJobs, err := strconv.Atoi(env("MAX_JOBS", "0"))
	if err != nil {
		log.Fatalf("MAX_JOBS: %v", err)
	}

	var stopping atomic.Bool
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-sig; stopping.Store(true) }()

	ctx := context.Background()
	done := 0
	for !stopping.Load() && (maxJobs == 0 || done < maxJobs) {
		kv, err := rdb.BLPop(ctx, 2*time.Second, queue).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			log.Printf("BLPOP: %v; retrying in 1 s", err)
			time.Sleep(time.Second)
			continue
		}
		fmt.Printf("got %s\n", kv[1])
		done++
	}
	fmt.Printf("list worker stopped after %d jobs\n", done)
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
