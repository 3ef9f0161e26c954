package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayd/delayd/worker"
)

// A producer adds a job due in 50 ms; a worker runs it, acknowledges it,
// and stops.
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: delaydAddr})
	defer rdb.Close()
	ctx := context.Background()

	c := worker.NewClient(rdb)
	id, err := c.Add(ctx, "emails", []byte(`{"to":"ada@example.com"}`),
		worker.ID("welcome-ada"), worker.Delay(50*time.Millisecond),
		worker.AckTimeout(30*time.Second), worker.Retry(5), worker.DeadLetter("emails:dead"))
	if err != nil {
		panic(err)
	}
	fmt.Println("added", id)

	ctx, stop := context.WithCancel(ctx) // in a program: signal.NotifyContext(ctx, syscall.SIGTERM)
	w := worker.New(rdb, worker.Options{Logger: slog.New(slog.DiscardHandler)})
	w.HandleFunc("emails", func(ctx context.Context, job *worker.Job) error {
		fmt.Printf("sending %s %s\n", job.ID, job.Payload)
		stop() // one job is enough here
		return nil
	})
	if err := w.Run(ctx); err != nil { // returns once the job is acknowledged
		panic(err)
	}
	job, _ := c.Get(context.Background(), "emails", id)
	fmt.Println("left:", job)
	// Output:
	// added welcome-ada
	// sending welcome-ada {"to":"ada@example.com"}
	// left: <nil>
}
