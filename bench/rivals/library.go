package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayd/delayd/worker"
)

// The library rows run delayd's own worker package (github.com/delayd/
// delayd/worker, from this repository through go.mod's replace): each of
// the n workers is a worker.Worker with its own go-redis client, as a
// service would run one per process. Its handler notes the job when it
// runs; the ACK goes with the worker's next fetch (at most a round trip
// later), which the library does not report, so these rows are dated as
// asynq's are, at the handler.
//
// batch registers the handler with HandleBatch: a fetch's jobs, up to
// size (0: the library's BatchSize, 64), in one call on the fetching
// goroutine; otherwise size is the Concurrency (0: the library's, 10).
func libraryWorkers(size int, batch bool) func(addr string, n int, rec *recorder) (func(), error) {
	return func(addr string, n int, rec *recorder) (func(), error) {
		var ws []*worker.Worker
		var clients []*redis.Client
		var done sync.WaitGroup
		ctx, cancel := context.WithCancel(context.Background())
		for i := 0; i < n; i++ {
			c := redis.NewClient(&redis.Options{Addr: addr})
			if err := c.Ping(ctx).Err(); err != nil {
				cancel()
				return nil, err
			}
			opt := worker.Options{Concurrency: size, Logger: slog.New(slog.DiscardHandler)}
			if batch {
				opt = worker.Options{BatchSize: size, Logger: opt.Logger}
			}
			w := worker.New(c, opt)
			if batch {
				w.HandleBatchFunc(queue, func(_ context.Context, js []*worker.Job) error {
					for _, j := range js {
						rec.done(string(j.Payload))
					}
					return nil
				})
			} else {
				w.HandleFunc(queue, func(_ context.Context, j *worker.Job) error {
					rec.done(string(j.Payload))
					return nil
				})
			}
			done.Add(1)
			go func() {
				defer done.Done()
				if err := w.Run(ctx); err != nil {
					rec.fail(err)
				}
			}()
			ws = append(ws, w)
			clients = append(clients, c)
		}
		return func() {
			cancel()
			done.Wait()
			for _, c := range clients {
				c.Close()
			}
		}, nil
	}
}

// blmpopCount is the batch of the redis-zset-blmpop rival, the issue's
// line for the library's batch mode (delayd-lib-batch16 takes as many).
const blmpopCount = 16

func blmpop(key string) func(ctx context.Context, c *redis.Client) ([]string, error) {
	return func(ctx context.Context, c *redis.Client) ([]string, error) {
		_, v, err := c.BLMPop(ctx, popTimeout, "LEFT", blmpopCount, key).Result()
		if err == redis.Nil {
			return nil, nil
		}
		return v, err
	}
}

// batchLoop is workerLoop for takes of several jobs.
func batchLoop(addr string, n int, rec *recorder, take func(ctx context.Context, c *redis.Client) ([]string, error)) (func(), error) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		c := conn(addr)
		if err := c.Ping(ctx).Err(); err != nil {
			cancel()
			wg.Wait()
			return nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			for ctx.Err() == nil {
				ps, err := take(ctx, c)
				if err != nil {
					if ctx.Err() == nil {
						rec.fail(err)
						time.Sleep(10 * time.Millisecond)
					}
					continue
				}
				for _, p := range ps {
					rec.done(p)
				}
			}
		}()
	}
	return func() { cancel(); wg.Wait() }, nil
}
