// Command testworker is a worker process for the tests that kill or stop
// one (integration_test/worker_lib_test.go): it runs the library's Worker
// on one queue, its handler printing "start <id>" and, after WORK_MS,
// "done <id>"; WORK_MS -1 runs until the handler's context ends. SIGTERM
// or SIGINT stops it gracefully; it exits 0 after a clean stop.
//
//	DELAYD_ADDR   server
//	QUEUE         queue
//	CONCURRENCY   the worker's concurrency (default 10)
//	WORK_MS       how long a job takes (default 0)
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayd/delayd/worker"
)

func main() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("DELAYD_ADDR")})
	defer rdb.Close()
	conc, _ := strconv.Atoi(os.Getenv("CONCURRENCY"))
	work, _ := strconv.Atoi(os.Getenv("WORK_MS"))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	w := worker.New(rdb, worker.Options{Concurrency: conc, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	w.HandleFunc(os.Getenv("QUEUE"), func(ctx context.Context, job *worker.Job) error {
		fmt.Printf("start %s\n", job.ID)
		if work < 0 {
			<-ctx.Done()
			return ctx.Err()
		}
		time.Sleep(time.Duration(work) * time.Millisecond)
		fmt.Printf("done %s\n", job.ID)
		return nil
	})
	fmt.Println("running")
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("stopped")
}
