// Command clusterworker takes jobs of a delayd cluster's queue with
// DELAY.POP through go-redis's ClusterClient and acknowledges each with
// DELAY.ACK, going on through a failover: a pop blocked on a leader that
// steps down is answered UNBLOCKED, and while a new leader is elected pops
// and acks get CLUSTERDOWN, TRYAGAIN or a refused connection. The worker
// treats each as an empty pop and pops again; the client finds the new
// leader (ClusterStateReloadInterval, as in clusterproducer). An ACK that
// fails is sent again: acking a job twice is harmless, and a job whose ACK
// never arrives is delivered again after its ack timeout.
//
// As examples/go/worker, it pops with a short timeout in a loop under a
// longer read timeout, and on SIGTERM or SIGINT finishes the job in hand.
//
//	DELAYD_CLUSTER  nodes, comma-separated (default 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003)
//	QUEUE           queue to work on (default {jobs}:orders)
//	WORK_MS         how long one job takes (default 100)
//	MAX_JOBS        exit after this many jobs (default 0: never)
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

const popTimeout = 2 * time.Second

func main() {
	redis.SetLogger(quietDials{})
	rdb := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                      strings.Split(env("DELAYD_CLUSTER", "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003"), ","),
		ClusterStateReloadInterval: time.Second,
		ReadTimeout:                popTimeout + 3*time.Second, // longer than the pop
	})
	defer rdb.Close()
	queue := env("QUEUE", "{jobs}:orders")
	work := time.Duration(envInt("WORK_MS", 100)) * time.Millisecond
	maxJobs := envInt("MAX_JOBS", 0)

	var stopping atomic.Bool
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		log.Print("stopping: finishing the job in hand")
		stopping.Store(true)
	}()

	ctx := context.Background()
	done := 0
	for !stopping.Load() && (maxJobs == 0 || done < maxJobs) {
		reply, err := rdb.Do(ctx, "DELAY.POP", queue, popTimeout.Seconds()).StringSlice()
		if errors.Is(err, redis.Nil) {
			continue // nothing within popTimeout
		}
		if err != nil {
			// UNBLOCKED (the leader stepped down), CLUSTERDOWN, TRYAGAIN, a
			// refused connection: a failover; pop again shortly.
			log.Printf("DELAY.POP: %v; popping again", err)
			time.Sleep(200 * time.Millisecond)
			continue
		}
		id, payload := reply[1], reply[2]
		fmt.Printf("processing %s %s\n", id, payload)
		time.Sleep(work) // the job's work
		ack(ctx, rdb, queue, id)
		done++
	}
	fmt.Printf("worker stopped after %d jobs\n", done)
}

// ack sends DELAY.ACK until the cluster answers it, for up to 30 s.
func ack(ctx context.Context, rdb *redis.ClusterClient, queue, id string) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := rdb.Do(ctx, "DELAY.ACK", queue, id).Err()
		if err == nil {
			fmt.Printf("acked %s\n", id)
			return
		}
		if time.Now().After(deadline) {
			log.Printf("DELAY.ACK %s: %v (it will be delivered again after its ack timeout)", id, err)
			return
		}
		log.Printf("DELAY.ACK %s: %v; sending it again", id, err)
		time.Sleep(200 * time.Millisecond)
	}
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
// for as long as the node stays down; the commands that fail are printed
// here with their errors.
type quietDials struct{}

func (quietDials) Printf(_ context.Context, format string, v ...any) {
	if msg := fmt.Sprintf(format, v...); !strings.Contains(msg, "failed to dial") {
		log.Print(msg)
	}
}
