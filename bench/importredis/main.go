// Command importredis checks, for bench/import_redis.sh, that delayd holds
// the jobs of the generators' manifests (bench/rivals's asynqgen and
// BullMQ's gen.js) once each, with their ids and due times; the import
// itself is `delayd import --from-redis`.
//
//	importredis -to 127.0.0.1:6380 -all a.tsv,b.tsv -some k.tsv
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

func main() {
	to := flag.String("to", "127.0.0.1:6380", "delayd's address")
	all := flag.String("all", "", "manifests whose every job delayd must hold")
	some := flag.String("some", "", "manifests whose jobs delayd may hold (added during the import); those it holds must be right")
	flag.Parse()
	os.Exit(checkManifests(*to, split(*all), split(*some)))
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// want is one line of a manifest: a job the generator made.
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
