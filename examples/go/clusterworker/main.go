// Command clusterworker runs jobs of a delayd cluster's queue with the
// worker library through go-redis's ClusterClient, going on through a
// failover: a fetch blocked on a leader that steps down is answered
// UNBLOCKED, and while a new leader is elected fetches and acks get
// CLUSTERDOWN, TRYAGAIN or a refused connection. The library retries each
// out of the handler's sight (100 ms doubling to 2 s) and keeps the acks
// that failed for its next fetch; worker.ClusterOptions sets what the
// client needs to find the new leader (ClusterStateReloadInterval, as in
// clusterproducer). A job whose ack never arrives is delivered again after
// its ack timeout.
//
// As examples/go/worker, on SIGTERM or SIGINT it finishes the jobs in
// hand, acknowledges them and exits.
//
//	DELAYD_CLUSTER  nodes, comma-separated (default 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003)
//	QUEUE           queue to work on (default {jobs}:orders)
//	WORK_MS         how long one job takes (default 100)
//	MAX_JOBS        exit after this many jobs (default 0: never)
package main

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayd/delayd/worker"
)

func main() {
	redis.SetLogger(quietDials{})
	rdb := redis.NewClusterClient(worker.ClusterOptions(
		strings.Split(env("DELAYD_CLUSTER", "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003"), ",")...))
	defer rdb.Close()
	queue := env("QUEUE", "{jobs}:orders")
	work := time.Duration(envInt("WORK_MS", 100)) * time.Millisecond
	maxJobs := int64(envInt("MAX_JOBS", 0))

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		fmt.Println("stopping: finishing the job in hand")
		stop()
	}()

	var done atomic.Int64
	// One job at a time, as the other languages' cluster workers; the
	// library's failover warnings go to stderr.
	w := worker.New(rdb, worker.Options{
		Concurrency: 1,
		Logger:      slog.New(slog.NewTextHandler(os.Stderr, nil)),
		Acked: func(_ string, ids []string) {
			for _, id := range ids {
				fmt.Printf("acked %s\n", id)
			}
		},
	})
	w.HandleFunc(queue, func(ctx context.Context, job *worker.Job) error {
		fmt.Printf("processing %s %s\n", job.ID, job.Payload)
		time.Sleep(work) // the job's work
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

// quietDials is go-redis's log without its "failed to dial" lines. While a
// node is down, go-redis logs one each time it tries that node, which it
// does on every reload of the slot map, whether or not a command fails,
// for as long as the node stays down; the library logs the failures that
// matter to the worker.
type quietDials struct{}

func (quietDials) Printf(_ context.Context, format string, v ...any) {
	if msg := fmt.Sprintf(format, v...); !strings.Contains(msg, "failed to dial") {
		log.Print(msg)
	}
}
