// Command asynqgen fills a Redis server with delayed asynq tasks made by
// asynq's own client and server, for the tests and the benchmark of
// delayd's import from Redis (transfer/fromredis, bench/import_redis.sh):
// the reader must be checked against what the library really writes, not
// against our idea of it.
//
// It writes one line per task to -out, "queue<TAB>id<TAB>due-ms<TAB>retry<TAB>retried<TAB>type",
// where due is the time asynq was asked for (its scores keep whole seconds,
// so due is that second in ms), or, for a task in the retry set, the time
// asynq's Inspector says it runs next.
//
//	asynqgen -addr 127.0.0.1:6379 -n 500000 -out a.tsv             # fill, then exit
//	asynqgen -addr ... -from 500000 -keep -n 0 -out b.tsv          # add until stdin closes; "adding" on stdout once it does
//	asynqgen -addr ... -retries 100 -out r.tsv                     # tasks failed once, waiting in the retry set
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "redis-server address")
	queues := flag.Int("queues", 2, "how many queues (q0, q1, ...) the tasks are spread over")
	n := flag.Int("n", 1000, "tasks to add (with -keep: a bound, 0 = none)")
	from := flag.Int("from", 0, "number of the first task (ids and payloads); the next run continues where one stopped")
	keep := flag.Bool("keep", false, "keep adding, about -rate a second, until stdin closes")
	rate := flag.Int("rate", 2000, "with -keep: tasks a second")
	retries := flag.Int("retries", 0, "instead of scheduled tasks: this many tasks that fail once and wait in queue 'retryq's retry set")
	conc := flag.Int("c", 16, "concurrent producers")
	out := flag.String("out", "", "manifest file (default stdout)")
	flag.Parse()

	w := io.Writer(os.Stdout)
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	defer bw.Flush()
	var mu sync.Mutex
	line := func(queue, id string, due time.Time, retry, retried int, typ string) {
		mu.Lock()
		fmt.Fprintf(bw, "%s\t%s\t%d\t%d\t%d\t%s\n", queue, id, due.Unix()*1000, retry, retried, typ)
		mu.Unlock()
	}

	opt := asynq.RedisClientOpt{Addr: *addr}
	if *retries > 0 {
		if err := failOnce(opt, *retries, *from, line); err != nil {
			log.Fatal(err)
		}
		return
	}

	c := asynq.NewClient(opt)
	defer c.Close()
	// base is a fixed future second so that a block of tasks shares one
	// score: the reader's paging must get through ties of any size.
	base := time.Now().Add(2 * time.Hour).Truncate(time.Second)
	add := func(i int) error {
		q := fmt.Sprintf("q%d", i%*queues)
		at := base.Add(time.Duration(spread(i)%(48*3600)) * time.Second)
		if i%50 == 0 {
			at = base // the tie block
		}
		opts := []asynq.Option{asynq.Queue(q), asynq.ProcessAt(at), asynq.MaxRetry(i % 7)}
		if i%2 == 0 { // half with ids of the producer's own, half with asynq's UUIDs
			opts = append(opts, asynq.TaskID(fmt.Sprintf("task-%d", i)))
		}
		if i%10 == 3 {
			opts = append(opts, asynq.Timeout(time.Duration(1+i%5)*time.Minute))
		}
		typ := fmt.Sprintf("email:%d", i%3)
		info, err := c.Enqueue(asynq.NewTask(typ, fmt.Appendf(nil, `{"n":%d}`, i)), opts...)
		if err != nil {
			return err
		}
		line(q, info.ID, at, i%7, 0, typ)
		return nil
	}

	var next atomic.Int64
	next.Store(int64(*from))
	stop := make(chan struct{})
	if *keep {
		go func() { io.Copy(io.Discard, os.Stdin); close(stop) }()
	}
	var tick <-chan time.Time
	if *keep && *rate > 0 {
		t := time.NewTicker(time.Second / time.Duration(*rate))
		defer t.Stop()
		tick = t.C
	}
	last := int64(*from + *n)
	var wg sync.WaitGroup
	var firstErr error
	var once sync.Once
	for range *conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if tick != nil {
					select {
					case <-stop:
						return
					case <-tick:
					}
				}
				i := next.Add(1) - 1
				if (!*keep || *n > 0) && i >= last {
					return
				}
				if err := add(int(i)); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				if *keep && i == int64(*from) {
					fmt.Println("adding") // the test starts reading now
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		bw.Flush()
		log.Fatal(firstErr)
	}
}

// spread scatters task numbers over the seconds of two days, the same way
// on every run.
func spread(i int) uint32 { return uint32(i+1) * 0x9e3779b1 }

// failOnce enqueues n tasks to queue retryq, runs an asynq server whose
// handler fails them, and waits until all n sit in the retry set, an hour
// away; then it lists them with asynq's Inspector, whose NextProcessAt is
// the library's own word for when each runs again.
func failOnce(opt asynq.RedisClientOpt, n, from int, line func(string, string, time.Time, int, int, string)) error {
	const q = "retryq"
	c := asynq.NewClient(opt)
	defer c.Close()
	for i := from; i < from+n; i++ {
		t := asynq.NewTask("report:build", fmt.Appendf(nil, `{"n":%d}`, i))
		if _, err := c.Enqueue(t, asynq.Queue(q), asynq.MaxRetry(5), asynq.TaskID(fmt.Sprintf("retry-%d", i))); err != nil {
			return err
		}
	}
	srv := asynq.NewServer(opt, asynq.Config{
		Concurrency:    4,
		Queues:         map[string]int{q: 1},
		RetryDelayFunc: func(int, error, *asynq.Task) time.Duration { return time.Hour },
		LogLevel:       asynq.FatalLevel,
	})
	if err := srv.Start(asynq.HandlerFunc(func(context.Context, *asynq.Task) error {
		return errors.New("asynqgen: failing on purpose")
	})); err != nil {
		return err
	}
	defer srv.Shutdown()
	ins := asynq.NewInspector(opt)
	defer ins.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		info, err := ins.GetQueueInfo(q)
		if err != nil {
			return err
		}
		if info.Retry == n {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("asynqgen: %d of %d tasks in the retry set after a minute", info.Retry, n)
		case <-time.After(50 * time.Millisecond):
		}
	}
	for page := 1; ; page++ {
		tasks, err := ins.ListRetryTasks(q, asynq.PageSize(1000), asynq.Page(page))
		if err != nil {
			return err
		}
		if len(tasks) == 0 {
			return nil
		}
		for _, t := range tasks {
			line(q, t.ID, t.NextProcessAt, t.MaxRetry, t.Retried, t.Type)
		}
	}
}
