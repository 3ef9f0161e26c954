package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/jobs"
)

// TestScanReturnsEveryLastingKey: a key present for a whole scan is
// returned at least once, however other queues come and go between calls;
// queues with only a waiter are not keys.
func TestScanReturnsEveryLastingKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		rng := rand.New(rand.NewPCG(3, 4))
		var lasting []string
		for i := range 300 {
			name := fmt.Sprint("churn:", i)
			if i%3 == 0 {
				name = fmt.Sprint("keep:", i)
				lasting = append(lasting, name)
			}
			add(t, e, name, int64(rng.IntN(2))*100_000, "x")
		}
		waitFor(t, e, PopLeft, "waiter-only")
		for round := range 20 {
			seen := map[string]int{}
			cursor, calls := uint64(0), 0
			for {
				var keys []string
				cursor, keys = e.Scan(cursor, 1+rng.IntN(40), nil)
				for _, k := range keys {
					seen[k]++
				}
				calls++
				// Other queues come and go between calls.
				for range 5 {
					name := fmt.Sprint("churn:", rng.IntN(600))
					if rng.IntN(2) == 0 {
						add(t, e, name, 0, "y")
					} else {
						e.Del([][]byte{b(name)})
					}
				}
				if cursor == 0 {
					break
				}
			}
			for _, k := range lasting {
				if seen[k] == 0 {
					t.Fatalf("round %d: %s was there for the whole scan (%d calls) and never returned", round, k, calls)
				}
			}
			if seen["waiter-only"] > 0 {
				t.Fatal("a queue holding only a waiter is not a key")
			}
		}
		keys := e.Keys(func(name string) bool { return len(name) > 5 && name[:5] == "keep:" })
		slices.Sort(keys)
		slices.Sort(lasting)
		if !slices.Equal(keys, lasting) {
			t.Fatalf("KEYS keep:*: %d keys, want %d", len(keys), len(lasting))
		}
		if n, _ := e.Scan(1<<40, 10, nil); n != 0 {
			t.Fatal("a cursor past the end ends the scan")
		}
	})
}

// TestFlushKeepsWaitersAndIds: FLUSHALL removes every job in every state,
// is one log record, leaves blocked clients blocked, never reuses a server
// id, and replays.
func TestFlushKeepsWaitersAndIds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, logged(fs, FsyncAlways))
		defer func() { e.Close() }()
		add(t, e, "delayed", 60_000, "d")
		addOpts(t, e, AddArgs{Retry: -1, Queue: b("reserved"), Payload: b("r"), AckTimeout: 60_000})
		e.Pop([][]byte{b("reserved")})
		last := add(t, e, "ready", 0, "x")
		v := e.Watch(b("ready"))
		w := waitFor(t, e, PopLeft, "blocked")
		before := e.journal.Ticket()
		if _, err := e.Flush(); err != nil {
			t.Fatal(err)
		}
		if e.journal.Ticket() != before+1 {
			t.Fatalf("FLUSHALL logged %d records", e.journal.Ticket()-before)
		}
		if in := e.Info(); in.Jobs != 0 || in.Queues != 0 || len(e.Keys(nil)) != 0 {
			t.Fatalf("after FLUSHALL: %+v", in)
		}
		if e.Version(b("ready")) == v {
			t.Fatal("FLUSHALL did not change a watched key")
		}
		select {
		case <-w.Ready():
			t.Fatal("FLUSHALL resolved a blocked client")
		default:
		}
		if id := add(t, e, "ready", 0, "y"); id <= last {
			t.Fatalf("server id %s after FLUSHALL, not above %s", id, last)
		}
		e.Push(b("blocked"), [][]byte{b("z")}, false)
		if p := served(t, w); p != "z" {
			t.Fatalf("the blocked client got %q after FLUSHALL", p)
		}
		want := dump(e)
		e.WaitDurable(e.journal.Ticket())
		e.Close()
		e = mustNew(t, logged(fs, FsyncAlways))
		if got := dump(e); got != want {
			t.Fatalf("after restart:\n%s\nwant:\n%s", got, want)
		}
	})
}

// TestMemoryUsage: an estimate that grows with the payloads and the jobs,
// goes back when they go, and is absent for a missing key.
func TestMemoryUsage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		if _, ok := e.MemoryUsage(b("q")); ok {
			t.Fatal("MEMORY USAGE of a missing key")
		}
		add(t, e, "q", 0, "x")
		one, _ := e.MemoryUsage(b("q"))
		big := add(t, e, "q", 0, string(make([]byte, 100_000)))
		two, _ := e.MemoryUsage(b("q"))
		if one < int64(jobs.Size) || two < one+100_000 || two > one+110_000 {
			t.Fatalf("one job %d bytes, with a 100 kB payload %d", one, two)
		}
		e.Cancel(b("q"), [][]byte{b(big)})
		if again, _ := e.MemoryUsage(b("q")); again != one {
			t.Fatalf("after the cancel %d, want %d", again, one)
		}
		// Moving a job moves its bytes.
		e.Move(b("q"), b("p"), MoveEnds{})
		if n, ok := e.MemoryUsage(b("p")); !ok || n != one+int64(len("p"))-int64(len("q")) {
			t.Fatalf("moved: %d %v, want %d", n, ok, one)
		}
		if _, ok := e.MemoryUsage(b("q")); ok {
			t.Fatal("q is empty")
		}
	})
}

// TestFlushForgetsDeadLetterQueues: a job made after FLUSHALL in a slot that
// held a job with a dead-letter queue does not inherit it.
func TestFlushForgetsDeadLetterQueues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		addOpts(t, e, AddArgs{Retry: 0, Queue: b("q"), Payload: b("old"), AckTimeout: 1000, DeadLetter: b("dlq")})
		e.Flush()
		addOpts(t, e, AddArgs{Retry: 0, Queue: b("q"), Payload: b("new"), AckTimeout: 1000})
		e.Pop([][]byte{b("q")})
		sleep(2 * time.Second)
		if e.Exists(b("dlq")) || e.Exists(b("q")) {
			t.Fatal("the new job was dead-lettered to the flushed job's queue")
		}
	})
}
