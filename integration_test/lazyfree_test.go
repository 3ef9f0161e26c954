package integration

import (
	"context"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestLazyFreeDelBigQueue is issue 13's fault: a big queue deleted with DEL
// (then one with UNLINK) must reply within 10 ms and keep every other
// client's wait under 5 ms, the jobs being freed in the background; after a
// restart the queues are gone. N is 300k by default (CI);
// DELAYD_LAZYFREE_JOBS=3000000 is the run.
func TestLazyFreeDelBigQueue(t *testing.T) {
	n := 300_000
	if v := os.Getenv("DELAYD_LAZYFREE_JOBS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	s := startServer(t, "--appendonly", "yes", "--appendfsync", "everysec", "--auto-rewrite-percentage", "0")
	ctx := context.Background()
	c := s.Client()
	for _, cmd := range []string{"del", "unlink"} {
		name := "big-" + cmd
		lazyFill(t, c, name, n)
		if got, _ := c.LLen(ctx, name).Result(); got != int64(n) {
			t.Fatalf("%s: llen %d, want %d", name, got, n)
		}
		c.Do(ctx, "DELAY.ADD", "keep", "60000", "kept")

		// Another client measures its PING and DELAY.ADD round trips while
		// the queue is freed.
		var worst atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := s.Client()
			defer o.Close()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				var err error
				if i%2 == 0 {
					err = o.Ping(ctx).Err()
				} else {
					err = o.Do(ctx, "DELAY.ADD", "other", "60000", "x").Err()
				}
				if err != nil {
					t.Error(err)
					return
				}
				if d := time.Since(start); d > time.Duration(worst.Load()) {
					worst.Store(int64(d))
				}
			}
		}()
		// The same client's worst round trip with nothing being freed: on a
		// shared machine the OS alone can stall a process for a time slice.
		time.Sleep(300 * time.Millisecond)
		base := time.Duration(worst.Swap(0))
		start := time.Now()
		got, err := c.Do(ctx, cmd, name).Int()
		reply := time.Since(start)
		if err != nil || got != 1 {
			t.Fatalf("%s: %d %v", cmd, got, err)
		}
		// The reply came before the jobs were freed: they are the freer's.
		if p, _ := s.info("memory", "lazyfree_pending_objects"); p == "0" || p == "" {
			t.Errorf("%s: replied after freeing the queue (lazyfree_pending_objects %q), want the free left to the background", cmd, p)
		}
		if e, _ := c.Exists(ctx, name).Result(); e != 0 {
			t.Fatalf("%s: the queue still exists", cmd)
		}
		deadline := time.Now().Add(60 * time.Second)
		for {
			p, _ := s.info("memory", "lazyfree_pending_objects")
			if p == "0" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: still %s jobs to free after 60 s", cmd, p)
			}
			time.Sleep(time.Millisecond)
		}
		freed := time.Since(start)
		close(stop)
		wg.Wait()
		w := time.Duration(worst.Load())
		t.Logf("%s of %d jobs: reply %v, freed in %v, another client's worst round trip %v (%v in the 300 ms before)", cmd, n, reply, freed, w, base)
		// The times are figures, not assertions (a loaded CI machine stalls
		// processes for whole time slices): the 10 ms reply and 5 ms
		// wait are judged in the documented 3M run (docs/benchmarks.md).
	}
	s.Restart()
	c = s.Client()
	for _, name := range []string{"big-del", "big-unlink"} {
		if e, _ := c.Exists(ctx, name).Result(); e != 0 {
			t.Fatalf("%s is back after a restart", name)
		}
	}
	if got, _ := c.Exists(ctx, "keep").Result(); got != 1 {
		t.Fatal("the other queue did not survive the restart")
	}
}

// lazyFill pushes n ready jobs onto q in pipelined batches.
func lazyFill(t *testing.T, c *redis.Client, q string, n int) {
	t.Helper()
	ctx := context.Background()
	batch := make([]any, 0, 1000)
	for i := 0; i < n; {
		batch = batch[:0]
		for ; i < n && len(batch) < 1000; i++ {
			batch = append(batch, "job")
		}
		if err := c.RPush(ctx, q, batch...).Err(); err != nil {
			t.Fatal(err)
		}
	}
}
