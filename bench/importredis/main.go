// Command importredis drives transfer/fromredis for bench/import_redis.sh
// until `delayd import --from-redis` is at hand: it reads one or more
// formats from a Redis server, all at once, and sends each job to delayd
// as DELAY.ADDAT queue due payload ID id [RETRY n] [ACKTIMEOUT ms],
// pipelined; or, with -check, checks that delayd holds the jobs of the
// generators' manifests with their due times.
//
//	importredis -from redis://127.0.0.1:6379 -format asynq,bullmq -to 127.0.0.1:6380
//	importredis -check -to 127.0.0.1:6380 -all a.tsv,b.tsv -some k.tsv
package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayd/delayd/transfer"
	"github.com/delayd/delayd/transfer/fromredis"
)

func main() {
	from := flag.String("from", "redis://127.0.0.1:6379", "the Redis server to read")
	formats := flag.String("format", "asynq", "formats to read at once, comma-separated")
	to := flag.String("to", "127.0.0.1:6380", "delayd's address")
	check := flag.Bool("check", false, "check the manifests instead of importing")
	all := flag.String("all", "", "with -check: manifests whose every job delayd must hold")
	some := flag.String("some", "", "with -check: manifests whose jobs delayd may hold (added during the import); those it holds must be right")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the import here")
	flag.Parse()
	if *check {
		os.Exit(checkManifests(*to, split(*all), split(*some)))
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	start := time.Now()
	var wg sync.WaitGroup
	for _, f := range split(*formats) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := newWriter(*to)
			rep, err := fromredis.Read(context.Background(), fromredis.Options{URL: *from, Format: f}, w.emit)
			if err == nil {
				err = w.close()
			}
			if err != nil {
				log.Fatalf("%s: %v", f, err)
			}
			b, _ := json.Marshal(rep)
			fmt.Printf("%s: %s in %.2f s\n", f, b, time.Since(start).Seconds())
		}()
	}
	wg.Wait()
	fmt.Printf("all: %.2f s\n", time.Since(start).Seconds())
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// writer pipelines DELAY.ADDATs in batches of 1000, a batch in flight
// while the next fills, so that reading the old system and writing delayd
// overlap.
type writer struct {
	c     *redis.Client
	pipe  redis.Pipeliner
	n     int
	out   chan redis.Pipeliner
	done  chan error
	first error
}

func newWriter(addr string) *writer {
	w := &writer{c: redis.NewClient(&redis.Options{Addr: addr, Protocol: 2}), out: make(chan redis.Pipeliner, 2), done: make(chan error, 1)}
	w.pipe = w.c.Pipeline()
	go func() {
		var first error
		for p := range w.out {
			cmds, _ := p.Exec(context.Background())
			for _, c := range cmds {
				if err := c.Err(); err != nil && err != redis.Nil && first == nil {
					first = err // redis.Nil: the id was there, nothing changed
				}
			}
		}
		w.done <- first
	}()
	return w
}

func (w *writer) emit(j transfer.Job) error {
	payload := j.Payload
	if j.PayloadBase64 != "" {
		b, err := base64.StdEncoding.DecodeString(j.PayloadBase64)
		if err != nil {
			return err
		}
		payload = string(b)
	}
	args := []any{"DELAY.ADDAT", j.Queue, j.Due, payload, "ID", j.ID}
	switch {
	case j.Retry > 0:
		args = append(args, "RETRY", j.Retry)
	case j.Retry == -1: // transfer.Job's "no redelivery"
		args = append(args, "RETRY", 0)
	}
	if j.AckTimeout > 0 {
		args = append(args, "ACKTIMEOUT", j.AckTimeout)
	}
	w.pipe.Do(context.Background(), args...)
	if w.n++; w.n%1000 == 0 {
		w.out <- w.pipe
		w.pipe = w.c.Pipeline()
	}
	return nil
}

func (w *writer) close() error {
	w.out <- w.pipe
	close(w.out)
	return <-w.done
}

type want struct {
	queue, id string
	due       int64
}

func readManifest(path string) []want {
	f, err := os.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	var ws []want
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p := strings.Split(sc.Text(), "\t")
		if len(p) < 3 {
			log.Fatalf("%s: bad line %q", path, sc.Text())
		}
		due, _ := strconv.ParseInt(p[2], 10, 64)
		ws = append(ws, want{p[0], p[1], due})
	}
	return ws
}

// checkManifests says how many jobs of each kind delayd holds and whether
// each has its due time; it returns the exit code.
func checkManifests(to string, all, some []string) int {
	c := redis.NewClient(&redis.Options{Addr: to, Protocol: 2})
	ctx := context.Background()
	bad, sum := 0, 0
	queues := map[string]bool{}
	for pass, files := range [][]string{all, some} {
		for _, f := range files {
			ws := readManifest(f)
			held := 0
			for s := 0; s < len(ws); s += 1000 {
				part := ws[s:min(len(ws), s+1000)]
				pipe := c.Pipeline()
				cmds := make([]*redis.Cmd, len(part))
				for i, w := range part {
					queues[w.queue] = true
					cmds[i] = pipe.Do(ctx, "DELAY.GET", w.queue, w.id)
				}
				pipe.Exec(ctx)
				for i, w := range part {
					v, err := cmds[i].Slice()
					if err == redis.Nil {
						if pass == 0 {
							if bad++; bad <= 5 {
								fmt.Printf("missing: %s/%s\n", w.queue, w.id)
							}
						}
						continue
					}
					held++
					for k := 0; k+1 < len(v); k += 2 {
						if v[k] == "due" && v[k+1] != w.due {
							if bad++; bad <= 5 {
								fmt.Printf("%s/%s: due %v, want %d\n", w.queue, w.id, v[k+1], w.due)
							}
						}
					}
				}
			}
			sum += held
			fmt.Printf("%s: delayd holds %d of %d\n", f, held, len(ws))
		}
	}
	var total int64
	for q := range queues {
		v, _ := c.Do(ctx, "DELAY.STATS", q).Slice()
		for k := 0; k+1 < len(v); k += 2 {
			if f := v[k]; f == "delayed" || f == "ready" || f == "reserved" {
				total += v[k+1].(int64)
			}
		}
	}
	fmt.Printf("delayd holds %d jobs in the manifests' queues\n", total)
	if total != int64(sum) {
		fmt.Printf("%d jobs no manifest names, or one twice\n", total-int64(sum))
		bad++
	}
	if bad > 0 {
		fmt.Printf("%d faults\n", bad)
		return 1
	}
	return 0
}
