package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Transactions: MULTI/EXEC/DISCARD/WATCH/UNWATCH with Redis's replies and
// errors (src/multi.c, tests/unit/multi.tcl), client libraries' transaction
// pipelines, and a kill -9 that must leave every transaction whole or absent.

// isErr matches an error reply inside an array (EXEC's per-command errors).
func isErr(prefix string) check {
	return func(v any) string {
		err, ok := v.(error)
		if !ok {
			return fmt.Sprintf("want an error starting %q, got %s", prefix, showValue(v))
		}
		if !strings.HasPrefix(err.Error(), prefix) {
			return fmt.Sprintf("want an error starting %q, got %q", prefix, err.Error())
		}
		return ""
	}
}

const execAbort = "EXECABORT Transaction discarded because of previous errors."

func TestMultiExecReplies(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()
	chain(t, c,
		cmd("OK", "MULTI"),
		cmd("QUEUED", "DELAY.ADD", "q", 0, "a", "ID", "x"),
		cmd("QUEUED", "LLEN", "q"),
		cmd("QUEUED", "DELAY.ADD", "q", "notanumber", "b"), // fails when run, not when queued
		cmd("QUEUED", "RPUSH", "q", "c"),
		cmd([]any{"x", 1, isErr("ERR value is not an integer"), 2}, "EXEC"),
		cmd(2, "LLEN", "q"),

		cmd(errIs("ERR EXEC without MULTI"), "EXEC"),
		cmd(errIs("ERR DISCARD without MULTI"), "DISCARD"),

		// Nested MULTI and WATCH inside MULTI are errors that do not abort.
		cmd("OK", "MULTI"),
		cmd(errIs("ERR MULTI calls can not be nested"), "MULTI"),
		cmd(errIs("ERR WATCH inside MULTI is not allowed"), "WATCH", "q"),
		cmd("QUEUED", "PING"),
		cmd([]any{"PONG"}, "EXEC"),

		cmd("OK", "MULTI"),
		cmd([]any{}, "EXEC"),

		// A command refused while queuing dooms the EXEC: nothing runs.
		cmd("OK", "MULTI"),
		cmd("QUEUED", "RPUSH", "q", "never"),
		cmd(errPrefix("ERR unknown command 'NOSUCH'"), "NOSUCH", "x"),
		cmd(errIs("ERR wrong number of arguments for 'delay.add' command"), "DELAY.ADD", "q"),
		cmd(errIs(execAbort), "EXEC"),
		cmd(2, "LLEN", "q"),
		cmd(errIs("ERR EXEC without MULTI"), "EXEC"),

		cmd("OK", "MULTI"),
		cmd(errIs("ERR Command not allowed inside a transaction"), "SHUTDOWN"),
		cmd(errIs(execAbort), "EXEC"),

		// A refused EXEC ends the transaction, saying why.
		cmd("OK", "MULTI"),
		cmd("QUEUED", "RPUSH", "q", "never"),
		cmd(errIs("EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' command"), "EXEC", "x"),
		cmd(2, "LLEN", "q"),

		// DISCARD drops the queue.
		cmd("OK", "MULTI"),
		cmd("QUEUED", "RPUSH", "q", "never"),
		cmd("OK", "DISCARD"),
		cmd(2, "LLEN", "q"),
	)
}

func TestMultiBlockingCommandsDoNotBlock(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()
	start := time.Now()
	chain(t, c,
		cmd(1, "RPUSH", "full", "x"),
		cmd("OK", "MULTI"),
		cmd("QUEUED", "BLPOP", "empty", 0),
		cmd("QUEUED", "BRPOP", "empty", 0),
		cmd("QUEUED", "DELAY.POP", "empty", 0),
		cmd("QUEUED", "BLMOVE", "empty", "dst", "LEFT", "RIGHT", 0),
		cmd("QUEUED", "BRPOPLPUSH", "empty", "dst", 0),
		cmd("QUEUED", "BLPOP", "full", 0),
		// BLMOVE and BRPOPLPUSH act as LMOVE and RPOPLPUSH: a null bulk.
		cmd([]any{nil, nil, nil, nil, nil, []any{"full", "x"}}, "EXEC"),
	)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("a blocking command inside EXEC blocked: %v", d)
	}
}

// A client blocked on a key is served after the EXEC that pushed to it, as
// Redis does: inside the transaction the pushed job is still there.
func TestMultiServesBlockedClientsAfterExec(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c, w := s.Client(), s.Client()
	got := make(chan any, 1)
	go func() {
		v, err := w.Do(ctxT(t, 10*time.Second), "BLPOP", "l", 0).Result()
		if err != nil {
			v = err
		}
		got <- v
	}()
	s.waitBlocked(t, 1)
	chain(t, c,
		cmd("OK", "MULTI"),
		cmd("QUEUED", "RPUSH", "l", "a"),
		cmd("QUEUED", "LLEN", "l"),
		cmd([]any{1, 1}, "EXEC"),
	)
	select {
	case v := <-got:
		if msg := matchValue([]any{"l", "a"}, v); msg != "" {
			t.Fatalf("blocked client: %s", msg)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the blocked client was not served after EXEC")
	}
	expect(t, c, 0, "LLEN", "l")
}

// FLUSHALL inside a transaction drops every job, the ones pushed before it
// in the same transaction too; a client blocked on a queue stays blocked and
// is served by a push after the flush, after EXEC.
func TestMultiFlushallWithBlockedClient(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c, w := s.Client(), s.Client()
	// Two queues before the blocked one, so that the flush renumbers it.
	expect(t, c, 1, "RPUSH", "a", "x")
	expect(t, c, 1, "RPUSH", "b", "x")
	got := make(chan any, 1)
	go func() {
		v, err := w.Do(ctxT(t, 10*time.Second), "BLPOP", "l", 0).Result()
		if err != nil {
			v = err
		}
		got <- v
	}()
	s.waitBlocked(t, 1)
	chain(t, c,
		cmd("OK", "MULTI"),
		cmd("QUEUED", "RPUSH", "l", "before"),
		cmd("QUEUED", "FLUSHALL"),
		cmd("QUEUED", "RPUSH", "l", "after"),
		cmd([]any{1, "OK", 1}, "EXEC"),
	)
	select {
	case v := <-got:
		if msg := matchValue([]any{"l", "after"}, v); msg != "" {
			t.Fatalf("blocked client: %s", msg)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the blocked client was not served after EXEC")
	}
	expect(t, c, 0, "DBSIZE")
}

func TestWatch(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c, other := s.Client(), s.Client()

	// Another client changes a watched queue: EXEC runs nothing, replies null.
	chain(t, c, cmd("OK", "WATCH", "q", "unrelated"))
	expect(t, other, anyReply{}, "DELAY.ADD", "q", 0, "x")
	chain(t, c,
		cmd("OK", "MULTI"),
		cmd("QUEUED", "RPUSH", "q", "mine"),
		cmd(nil, "EXEC"),
		cmd(1, "LLEN", "q"),
	)
	// EXEC unwatched everything: the next transaction runs.
	expect(t, other, anyReply{}, "DELAY.ADD", "q", 0, "y")
	chain(t, c,
		cmd("OK", "MULTI"),
		cmd("QUEUED", "LLEN", "q"),
		cmd([]any{2}, "EXEC"),
	)
	// Unchanged: it runs.
	chain(t, c,
		cmd("OK", "WATCH", "q"),
		cmd("OK", "MULTI"),
		cmd("QUEUED", "LPOP", "q"),
		cmd([]any{"x"}, "EXEC"),
	)
	// A pop by another client is a change; so is a missing key's first job.
	chain(t, c, cmd("OK", "WATCH", "q", "new"))
	expect(t, other, "y", "LPOP", "q")
	chain(t, c, cmd("OK", "MULTI"), cmd("QUEUED", "PING"), cmd(nil, "EXEC"))
	chain(t, c, cmd("OK", "WATCH", "new"))
	expect(t, other, 1, "RPUSH", "new", "z")
	chain(t, c, cmd("OK", "MULTI"), cmd("QUEUED", "PING"), cmd(nil, "EXEC"))

	// UNWATCH and DISCARD forget the watches.
	chain(t, c, cmd("OK", "WATCH", "q"), cmd("OK", "UNWATCH"))
	expect(t, other, 1, "RPUSH", "q", "w")
	chain(t, c, cmd("OK", "MULTI"), cmd("QUEUED", "PING"), cmd([]any{"PONG"}, "EXEC"))
	chain(t, c, cmd("OK", "WATCH", "q"), cmd("OK", "MULTI"), cmd("OK", "DISCARD"))
	expect(t, other, 2, "RPUSH", "q", "w")
	chain(t, c, cmd("OK", "MULTI"), cmd("QUEUED", "PING"), cmd([]any{"PONG"}, "EXEC"))

	// A job firing from the wheel changes its queue, though no command ran.
	expect(t, c, anyReply{}, "DELAY.ADD", "timed", 150, "t")
	chain(t, c, cmd("OK", "WATCH", "timed"))
	time.Sleep(300 * time.Millisecond)
	chain(t, c, cmd("OK", "MULTI"), cmd("QUEUED", "LLEN", "timed"), cmd(nil, "EXEC"))

	// A refused EXEC (EXECABORT) also unwatches.
	chain(t, c, cmd("OK", "WATCH", "q"), cmd("OK", "MULTI"), cmd(anyErr, "NOSUCH"), cmd(errIs(execAbort), "EXEC"))
	expect(t, other, 3, "RPUSH", "q", "w")
	chain(t, c, cmd("OK", "MULTI"), cmd("QUEUED", "PING"), cmd([]any{"PONG"}, "EXEC"))
}

// QUIT inside MULTI closes the connection; nothing queued runs.
func TestMultiQuitDropsTheQueue(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	rc := s.dialRaw(t)
	rc.send("MULTI")
	rc.send("RPUSH", "q", "never")
	rc.send("QUIT")
	for _, want := range []string{"+OK", "+QUEUED", "+OK"} {
		if got := rc.readLine(); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	rc.expectClosed(2 * time.Second)
	expect(t, s.Client(), 0, "LLEN", "q")
}

// go-redis's TxPipelined sends MULTI ... EXEC: 100 adds are 100 jobs, and a
// transaction with one bad command adds none.
func TestGoRedisTxPipelined(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()
	ctx := ctxT(t, 10*time.Second)
	cmds, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for i := range 100 {
			p.Do(ctx, "DELAY.ADD", "tp", 60000, fmt.Sprint("job", i))
		}
		return nil
	})
	if err != nil || len(cmds) != 100 {
		t.Fatalf("TxPipelined: %d replies, %v", len(cmds), err)
	}
	expectStats(t, c, "tp", 100, 0, 0)

	_, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for i := range 99 {
			p.Do(ctx, "DELAY.ADD", "tp", 60000, fmt.Sprint("more", i))
		}
		p.Do(ctx, "DELAY.ADD", "tp") // wrong arity: the whole transaction is refused
		return nil
	})
	if err == nil || !strings.HasPrefix(err.Error(), "EXECABORT") {
		t.Fatalf("a transaction with a bad command: %v, want EXECABORT", err)
	}
	expectStats(t, c, "tp", 100, 0, 0)
	// The connection is usable, not left in MULTI.
	expect(t, c, "PONG", "PING")
}

// redis-cli sends each line as a command: a transaction typed by hand.
func TestMultiRedisCli(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	out := cliIn(t, s, "MULTI\nRPUSH q a b\nLLEN q\nEXEC\n", "--no-raw")
	for _, want := range []string{"OK", "QUEUED", "1) (integer) 2", "2) (integer) 2"} {
		if !strings.Contains(out, want) {
			t.Fatalf("redis-cli output lacks %q:\n%s", want, out)
		}
	}
}

// TestDurabilityKill9Transactions: clients run transactions of 100 adds each
// under appendfsync always; kill -9; after the restart every transaction is
// all there or absent, and every acknowledged one is all there.
func TestDurabilityKill9Transactions(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
	const clients, size = 4, 100
	var (
		stop    atomic.Bool
		wg      sync.WaitGroup
		mu      sync.Mutex
		acked   = map[string]bool{}
		started int64
	)
	for cl := range clients {
		c := s.Client(func(o *redis.Options) {
			o.DialTimeout = 200 * time.Millisecond
			o.ReadTimeout = 2 * time.Second
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tx := 0; !stop.Load(); tx++ {
				atomic.AddInt64(&started, 1)
				name := fmt.Sprintf("c%d-t%d", cl, tx)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
					for i := range size {
						p.Do(ctx, "DELAY.ADD", "tx", 0, fmt.Sprintf("%s-%d", name, i))
					}
					return nil
				})
				cancel()
				if err != nil {
					return // the server is gone
				}
				mu.Lock()
				acked[name] = true
				mu.Unlock()
			}
		}()
	}
	durKillUnderLoad(t, s, &stop, &wg)
	if len(acked) < 5 {
		t.Fatalf("only %d transactions acknowledged in a second: too few to test anything", len(acked))
	}

	durRestartAfterKill(t, s)
	c := s.Client()
	v := do(t, c, "LRANGE", "tx", 0, -1)
	items, _ := v.([]any)
	count := map[string]int{}
	for _, it := range items {
		p, _ := it.(string)
		name := p[:strings.LastIndexByte(p, '-')]
		count[name]++
	}
	for name, n := range count {
		if n != size {
			t.Errorf("transaction %s is torn after kill -9: %d of %d jobs", name, n, size)
		}
	}
	for name := range acked {
		if count[name] != size {
			t.Errorf("acknowledged transaction %s lost after kill -9: %d of %d jobs", name, count[name], size)
		}
	}
	t.Logf("%d transactions started, %d acknowledged, %d in the log after kill -9", atomic.LoadInt64(&started), len(acked), len(count))
}
