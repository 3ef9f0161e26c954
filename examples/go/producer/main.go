// Command producer adds delayed jobs to a delayd queue with DELAY.ADD, each
// with an ID of its own choosing, so that a retry is safe: when a reply is
// lost (a timeout, a dropped connection) the producer sends the same
// DELAY.ADD again, and delayd replies nil if the job is already there
// instead of adding it twice. UNIQUE keeps the ID taken for a day after the
// job is done, so even a retry that comes after a worker finished the job
// is a no-op. It also registers a recurring job, a daily digest at 09:00
// Berlin time, which the server fires exactly once per day however many
// producers register it (DELAY.SCHEDULE is an upsert by name).
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
	"errors"
	"fmt"
	"log"
	"os"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	rdb := redis.NewClient(&redis.Options{Addr: env("DELAYD_ADDR", "127.0.0.1:6380")})
	defer rdb.Close()
	queue := env("QUEUE", "jobs:email")
	count := envInt("COUNT", 3)
	delay := envInt("DELAY_MS", 1000)
	ackTimeout := envInt("ACK_TIMEOUT", 30000)
	unique := envInt("UNIQUE_MS", 86400000)
	prefix := env("ID_PREFIX", "go")

	ctx := context.Background()
	for i := 1; i <= count; i++ {
		// The ID comes from the producer's own data (an order number, a
		// message id), so the same job always has the same ID.
		id := fmt.Sprintf("%s-welcome-%d", prefix, i)
		payload := fmt.Sprintf(`{"user":%d,"mail":"welcome"}`, i)
		add := func() (bool, error) {
			err := rdb.Do(ctx, "DELAY.ADD", queue, delay, payload, "ID", id, "ACKTIMEOUT", ackTimeout, "UNIQUE", unique).Err()
			if errors.Is(err, redis.Nil) {
				return false, nil // already there: an earlier try got through
			}
			return err == nil, err
		}
		var added bool
		var err error
		for try := 1; try <= 3; try++ {
			if added, err = add(); err == nil {
				break
			}
			log.Printf("DELAY.ADD %s: %v; retrying with the same ID", id, err)
			time.Sleep(time.Duration(try) * 200 * time.Millisecond)
		}
		if err != nil {
			log.Fatalf("DELAY.ADD %s: %v", id, err)
		}
		if added {
			fmt.Printf("added %s\n", id)
		} else {
			fmt.Printf("%s was already added\n", id)
		}
	}
	// A retry of the first job, as after a lost reply: nothing changes.
	err := rdb.Do(ctx, "DELAY.ADD", queue, delay, "again", "ID", prefix+"-welcome-1", "ACKTIMEOUT", ackTimeout, "UNIQUE", unique).Err()
	if errors.Is(err, redis.Nil) {
		fmt.Printf("retry of %s-welcome-1: already added, nothing changed\n", prefix)
	} else if err != nil {
		log.Fatalf("DELAY.ADD retry: %v", err)
	}

	// The recurring job: each firing is a job with the ID
	// daily-digest:<fire time in unix ms>, so it is never doubled.
	err = rdb.Do(ctx, "DELAY.SCHEDULE", env("DIGEST_QUEUE", "jobs:digest"), "daily-digest",
		"CRON", "0 9 * * *", "TZ", "Europe/Berlin", `{"mail":"digest"}`,
		"ACKTIMEOUT", ackTimeout, "MISFIRE", "once").Err()
	if err != nil {
		log.Fatalf("DELAY.SCHEDULE: %v", err)
	}
	fmt.Println("scheduled daily-digest")
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
