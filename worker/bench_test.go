package worker_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/delayd/delayd/worker"
)

// BenchmarkDrain drains b.N ready jobs with one worker of Concurrency 16
// (HandleBatch: BatchSize 16, as the rivals race's BLMPOP takes), its handler doing nothing: what the loop costs a job, server included
// (it runs in this process). Compare Handle with HandleBatch, and both
// with the server's share in worker/internal/drainprof -raw.
//
//	go test ./worker -run '^$' -bench Drain -benchmem -benchtime 20000x
func BenchmarkDrain(b *testing.B) {
	b.Run("Handle", func(b *testing.B) {
		benchDrain(b, func(w *worker.Worker, q string, n *atomic.Int64, all chan struct{}) {
			w.HandleFunc(q, func(context.Context, *worker.Job) error {
				if n.Add(1) == int64(b.N) {
					close(all)
				}
				return nil
			})
		})
	})
	b.Run("HandleBatch", func(b *testing.B) {
		benchDrain(b, func(w *worker.Worker, q string, n *atomic.Int64, all chan struct{}) {
			w.HandleBatchFunc(q, func(_ context.Context, jobs []*worker.Job) error {
				if n.Add(int64(len(jobs))) == int64(b.N) {
					close(all)
				}
				return nil
			})
		})
	})
}

func benchDrain(b *testing.B, handle func(w *worker.Worker, q string, n *atomic.Int64, all chan struct{})) {
	ctx := context.Background()
	q := fresh("drain")
	rdb := redis.NewClient(&redis.Options{Addr: delaydAddr})
	defer rdb.Close()
	pipe := rdb.Pipeline()
	for i := 0; i < b.N; i++ {
		pipe.Do(ctx, "DELAY.ADD", q, 0, strconv.Itoa(i), "ACKTIMEOUT", 30000)
		if i%1000 == 999 || i == b.N-1 {
			if _, err := pipe.Exec(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	var n atomic.Int64
	all := make(chan struct{})
	w := worker.New(rdb, worker.Options{Concurrency: 16, BatchSize: 16, Logger: quiet})
	handle(w, q, &n, all)
	b.ReportAllocs()
	b.ResetTimer()
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	<-all
	b.StopTimer()
	w.Shutdown(ctx)
	<-done
}
