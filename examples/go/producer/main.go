// Command producer adds delayed jobs to a delayd queue with the worker
// library's Client, each with an ID of its own choosing, so that a retry is
// safe: when a reply is lost (a timeout, a dropped connection) the producer
// sends the same add again, and delayd changes nothing if the job is
// already there (Add returns ""). Unique keeps the ID taken for a day after
// the job is done, so even a retry that comes after a worker finished the
// job is a no-op. It also registers a recurring job, a daily digest at
// 09:00 Berlin time, which the server fires exactly once per day however
// many producers register it (a schedule is an upsert by name).
//
//	DELAYD_ADDR   server (default 127.0.0.1:6380)
//	QUEUE         queue (default jobs:email)
//	COUNT         how many jobs (default 3)
//	DELAY_MS      delay of each job in ms (default 1000)
//	ACK_TIMEOUT   ms a worker has to ACK a job before it is delivered again (default 30000)
//	UNIQUE_MS     ms an ID stays taken after its job is done (default 86400000)
//	DIGEST_QUEUE  queue of the daily digest (default jobs:digest)
//	ID_PREFIX     first part of each job's ID (default go): producers in other
//	              languages use their own, so running two adds both sets
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayd/delayd/worker"
)

func main() {
	rdb := redis.NewClient(&redis.Options{Addr: env("DELAYD_ADDR", "127.0.0.1:6380")})
	defer rdb.Close()
	c := worker.NewClient(rdb)
	queue := env("QUEUE", "jobs:email")
	count := envInt("COUNT", 3)
	delay := ms(envInt("DELAY_MS", 1000))
	ackTimeout := ms(envInt("ACK_TIMEOUT", 30000))
	unique := ms(envInt("UNIQUE_MS", 86400000))
	prefix := env("ID_PREFIX", "go")

	ctx := context.Background()
	for i := 1; i <= count; i++ {
		// The ID comes from the producer's own data (an order number, a
		// message id), so the same job always has the same ID.
		id := fmt.Sprintf("%s-welcome-%d", prefix, i)
		payload := fmt.Sprintf(`{"user":%d,"mail":"welcome"}`, i)
		var got string
		var err error
		for try := 1; try <= 3; try++ {
			got, err = c.Add(ctx, queue, []byte(payload), worker.ID(id), worker.Delay(delay),
				worker.AckTimeout(ackTimeout), worker.Unique(unique))
			if err == nil {
				break
			}
			log.Printf("add %s: %v; retrying with the same ID", id, err)
			time.Sleep(time.Duration(try) * 200 * time.Millisecond)
		}
		switch {
		case err != nil:
			log.Fatalf("add %s: %v", id, err)
		case got == "":
			fmt.Printf("%s was already added\n", id) // an earlier try got through
		default:
			fmt.Printf("added %s\n", id)
		}
	}
	// A retry of the first job, as after a lost reply: nothing changes.
	id, err := c.Add(ctx, queue, []byte("again"), worker.ID(prefix+"-welcome-1"), worker.Delay(delay),
		worker.AckTimeout(ackTimeout), worker.Unique(unique))
	if err != nil {
		log.Fatalf("add retry: %v", err)
	}
	if id == "" {
		fmt.Printf("retry of %s-welcome-1: already added, nothing changed\n", prefix)
	}

	// The recurring job: each firing is a job with the ID
	// daily-digest:<fire time in unix ms>, so it is never doubled.
	err = c.Schedule(ctx, env("DIGEST_QUEUE", "jobs:digest"), "daily-digest",
		worker.Schedule{Cron: "0 9 * * *", TZ: "Europe/Berlin", Misfire: "once"},
		[]byte(`{"mail":"digest"}`), worker.AckTimeout(ackTimeout))
	if err != nil {
		log.Fatalf("schedule: %v", err)
	}
	fmt.Println("scheduled daily-digest")
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

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
