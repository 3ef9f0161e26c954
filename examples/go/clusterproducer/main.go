// Command clusterproducer adds delayed jobs to a delayd cluster through
// go-redis's ClusterClient, each with an ID, and retries an add that fails
// until the cluster takes it: while the leader is lost and a new one is
// elected, adds get CLUSTERDOWN, TRYAGAIN or a refused connection for a
// second or two, and the same DELAY.ADD sent again is safe (delayd replies
// nil when that ID is already there).
//
// The one setting go-redis needs to follow a failover is
// ClusterStateReloadInterval: it reloads its slot map on MOVED and
// otherwise only when the map is older than this (default 60 s), and a
// dead leader never answers MOVED (see the README's cluster section).
//
//	DELAYD_CLUSTER  nodes, comma-separated (default 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003)
//	QUEUE           queue (default {jobs}:orders)
//	COUNT           how many jobs (default 3)
//	DELAY_MS        delay of each job in ms (default 1000)
//	ACK_TIMEOUT     ms a worker has to ACK a job before it is delivered again (default 30000)
//	ID_PREFIX       first part of each job's ID (default go)
//	RETRY_FOR       ms to keep retrying one add (default 30000)
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	redis.SetLogger(quietDials{})
	rdb := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                      strings.Split(env("DELAYD_CLUSTER", "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003"), ","),
		ClusterStateReloadInterval: time.Second,
	})
	defer rdb.Close()
	queue := env("QUEUE", "{jobs}:orders")
	count := envInt("COUNT", 3)
	delay := envInt("DELAY_MS", 1000)
	ackTimeout := envInt("ACK_TIMEOUT", 30000)
	prefix := env("ID_PREFIX", "go")
	retryFor := time.Duration(envInt("RETRY_FOR", 30000)) * time.Millisecond

	ctx := context.Background()
	for i := 1; i <= count; i++ {
		id := fmt.Sprintf("%s-order-%d", prefix, i)
		payload := fmt.Sprintf(`{"order":%d}`, i)
		deadline := time.Now().Add(retryFor)
		for {
			err := rdb.Do(ctx, "DELAY.ADD", queue, delay, payload, "ID", id, "ACKTIMEOUT", ackTimeout).Err()
			if err == nil {
				fmt.Printf("added %s\n", id)
				break
			}
			if errors.Is(err, redis.Nil) {
				fmt.Printf("%s was already added\n", id) // an earlier try got through
				break
			}
			if time.Now().After(deadline) {
				log.Fatalf("DELAY.ADD %s: %v", id, err)
			}
			// CLUSTERDOWN, TRYAGAIN, a refused connection: a failover is
			// under way. The same ID makes the retry safe.
			log.Printf("DELAY.ADD %s: %v; retrying with the same ID", id, err)
			time.Sleep(200 * time.Millisecond)
		}
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
