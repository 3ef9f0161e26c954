// Command farprobe times operations by id on jobs a server already holds,
// one at a time on one connection: DELAY.GET, DELAY.RESCHEDULE and
// DELAY.CANCEL of ids drawn at random from the server ids made between two
// instants (a server id is its unix millisecond << 16 | a count within it,
// docs/decisions/ids.md). For the capacity line "cancel, reschedule and
// DELAY.GET of a random far-future id answer with p99 under 1 ms": fill a
// queue (bench/far-restart.sh KEEP=dir), then
//
//	go run ./bench/farprobe -addr 127.0.0.1:6493 -queue q -from <ms> -to <ms> -n 2000
//
// or, with client ids (IDS=yes bench/far-restart.sh adds them as order-<i>),
// -ids <N> instead of -from and -to.
//
// An id drawn may not exist (no add in that millisecond, or a count past the
// last one made in it): misses are timed too but reported apart.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6380", "delayd address")
	queue := flag.String("queue", "q", "queue the ids are in")
	from := flag.Int64("from", 0, "first unix ms of the ids to draw from")
	to := flag.Int64("to", 0, "last unix ms of the ids to draw from")
	maxCount := flag.Int("count", 64, "draw the count within a millisecond from [0, count)")
	n := flag.Int("n", 2000, "operations of each kind")
	ids := flag.Int("ids", 0, "draw client ids order-<i>, i in [0, ids), instead of server ids (IDS=yes far-restart.sh)")
	flag.Parse()
	if *ids == 0 && (*from == 0 || *to <= *from) {
		fmt.Fprintln(os.Stderr, "farprobe: -from and -to (unix ms, from < to) are required")
		os.Exit(2)
	}
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: *addr, PoolSize: 1})
	defer c.Close()
	draw := func() string {
		if *ids > 0 {
			return fmt.Sprint("order-", rand.IntN(*ids))
		}
		ms := *from + rand.Int64N(*to-*from+1)
		return fmt.Sprintf("%016x", uint64(ms)<<16|uint64(rand.IntN(*maxCount)))
	}
	ops := []struct {
		name string
		run  func(id string) (bool, error)
	}{
		{"DELAY.GET", func(id string) (bool, error) {
			v, err := c.Do(ctx, "DELAY.GET", *queue, id).Result()
			if err == redis.Nil {
				return false, nil
			}
			return v != nil, err
		}},
		{"DELAY.RESCHEDULE", func(id string) (bool, error) {
			// Stays far: 20 days out.
			v, err := c.Do(ctx, "DELAY.RESCHEDULE", *queue, id, 20*24*3600*1000).Int64()
			return v == 1, err
		}},
		{"DELAY.CANCEL", func(id string) (bool, error) {
			v, err := c.Do(ctx, "DELAY.CANCEL", *queue, id).Int64()
			return v == 1, err
		}},
	}
	for _, op := range ops {
		var hit, miss []time.Duration
		for range *n {
			id := draw()
			t := time.Now()
			ok, err := op.run(id)
			d := time.Since(t)
			if err != nil {
				fmt.Fprintf(os.Stderr, "farprobe: %s %s: %v\n", op.name, id, err)
				os.Exit(1)
			}
			if ok {
				hit = append(hit, d)
			} else {
				miss = append(miss, d)
			}
		}
		fmt.Printf("%-17s found %5d: %s | not found %5d: %s\n", op.name, len(hit), pct(hit), len(miss), pct(miss))
	}
}

func pct(d []time.Duration) string {
	if len(d) == 0 {
		return "-"
	}
	slices.Sort(d)
	at := func(p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
	return fmt.Sprintf("p50 %v p99 %v max %v", at(0.50).Round(time.Microsecond), at(0.99).Round(time.Microsecond), d[len(d)-1].Round(time.Microsecond))
}
