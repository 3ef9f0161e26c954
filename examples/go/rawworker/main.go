// Command rawworker takes jobs of a delayd queue with DELAY.POP and
// acknowledges each with DELAY.ACK once it is done: at-least-once delivery
// for jobs added with ACKTIMEOUT. It is the loop without the worker library
// (examples/go/worker uses it), for those who want nothing but a Redis
// client: one job at a time, two round trips a job, no heartbeat, no
// retry policy.
//
// The read timeout rule: go-redis waits at most ReadTimeout (5 s by default)
// for a reply. Its own blocking helpers (BLPop, ...) add their timeout to
// it, but DELAY.POP goes through the generic Do, so the client cannot know
// the command blocks: a DELAY.POP 10 with the default read timeout is cut
// after 5 s, the connection is dropped, and a job handed over at that moment
// waits for its ack timeout before it is delivered again. So the worker pops
// with a short timeout (popTimeout) in a loop and sets ReadTimeout longer
// than it. The short pop is also how a stop request is noticed.
//
// Graceful stop: on SIGTERM or SIGINT the job in hand is finished and acked,
// then the worker exits 0 (after at most popTimeout when it is waiting).
//
//	DELAYD_ADDR   server (default 127.0.0.1:6380)
//	QUEUE         queue to work on (default jobs:email)
//	WORK_MS       how long one job takes, to see a graceful stop (default 100)
//	MAX_JOBS      exit after this many jobs (default 0: never)
//	CONCURRENCY   most jobs of the queue in flight at once, across every worker (default 10)
//
// Flow control is the server's: DELAY.LIMIT sets how many jobs of the queue
// may be reserved at once over the whole fleet; a worker's pop waits while
// the queue is at its limit. Every worker sets the same value at start.
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

const popTimeout = 2 * time.Second

func main() {
	addr := env("DELAYD_ADDR", "127.0.0.1:6380")
	queue := env("QUEUE", "jobs:email")
	work := time.Duration(envInt("WORK_MS", 100)) * time.Millisecond
	maxJobs := envInt("MAX_JOBS", 0)

	rdb := redis.NewClient(&redis.Options{
		Addr:        addr,
		ReadTimeout: popTimeout + 3*time.Second, // longer than the pop, see above
		// No retries: a retried DELAY.POP could take a second job while the
		// first one's reply was lost.
		MaxRetries: -1,
	})
	defer rdb.Close()

	var stopping atomic.Bool
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		log.Print("stopping: finishing the job in hand")
		stopping.Store(true)
	}()

	// The pops get a context that is never cancelled by a stop request: a
	// cancelled pop closes the connection, and a job handed over just then
	// would wait for its ack timeout.
	ctx := context.Background()
	concurrency := envInt("CONCURRENCY", 10)
	if err := rdb.Do(ctx, "DELAY.LIMIT", queue, "CONCURRENCY", concurrency).Err(); err != nil {
		log.Fatalf("DELAY.LIMIT: %v", err)
	}
	fmt.Printf("limit: at most %d jobs of %s in flight\n", concurrency, queue)
	done := 0
	for !stopping.Load() && (maxJobs == 0 || done < maxJobs) {
		reply, err := rdb.Do(ctx, "DELAY.POP", queue, popTimeout.Seconds()).StringSlice()
		if errors.Is(err, redis.Nil) {
			continue // nothing within popTimeout: pop again
		}
		if err != nil {
			log.Printf("DELAY.POP: %v; retrying in 1 s", err)
			time.Sleep(time.Second)
			continue
		}
		id, payload := reply[1], reply[2]
		fmt.Printf("processing %s %s\n", id, payload)
		time.Sleep(work) // the job's work
		// ACK replies 0 when the job was not reserved (added without
		// ACKTIMEOUT: the pop removed it already).
		if err := rdb.Do(ctx, "DELAY.ACK", queue, id).Err(); err != nil {
			log.Printf("DELAY.ACK %s: %v (it will be delivered again after its ack timeout)", id, err)
		} else {
			fmt.Printf("acked %s\n", id)
		}
		done++
	}
	fmt.Printf("worker stopped after %d jobs\n", done)
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
