package engine

import (
	"bytes"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/queue"
)

func lazyPending(e *Engine) (pending, doomed int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lazy.Pending, e.lazy.Len()
}

// lazyFill gives queue q ready, delayed (due in 1 s) and reserved jobs
// (ack timeout 500 ms, dead-lettered to q-dlq on expiry), n of each, with
// payloads naming q.
func lazyFill(t *testing.T, e *Engine, q string, n int) (sids []string) {
	t.Helper()
	for i := range n {
		add(t, e, q, 0, fmt.Sprintf("doomed-%s-r%d", q, i))
		sids = append(sids, add(t, e, q, 1000, fmt.Sprintf("doomed-%s-d%d", q, i)))
		if res, err := e.Add(AddArgs{Queue: b(q), Payload: b(fmt.Sprintf("doomed-%s-x%d", q, i)), AckTimeout: 500, Retry: 0, DeadLetter: b(q + "-dlq")}); err != nil || !res.Added {
			t.Fatal(res, err)
		}
	}
	// Reserve the expiring ones: they sit behind the ready ones.
	for range 2 * n {
		if _, ok := e.Pop([][]byte{b(q)}); !ok {
			t.Fatal("pop")
		}
	}
	return sids
}

// DEL detaches the queue at once; its jobs are freed in the background and
// none of them fires, expires or dead-letters into the new queue of the
// same name; ids are free again; replay (which frees synchronously) and a
// rewrite made while the queue was being freed give the same state.
func TestLazyFreeDelDetachesAndFreesInBackground(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, logged(fs, FsyncAlways))
		defer func() { e.Close() }()
		const n = 5000
		sids := lazyFill(t, e, "q", n)
		identAdd(t, e, AddArgs{Queue: b("q"), ID: b("u"), Payload: b("doomed-u"), Unique: 60_000, Delay: 1000, Retry: -1})
		identAdd(t, e, AddArgs{Queue: b("q"), ID: b("x"), Payload: b("doomed-x"), Delay: 1000, Retry: -1})
		add(t, e, "other", 0, "kept")
		// A client blocked on a queue holding only delayed jobs stays blocked.
		add(t, e, "w", 500, "doomed-w")
		_, w, err := e.PopOrWait([][]byte{b("w")}, PopLeft)
		if err != nil || w == nil {
			t.Fatal("wait", err)
		}

		got, _, err := e.Del([][]byte{b("q"), b("w"), b("none")})
		if err != nil || got != 2 {
			t.Fatalf("del: %d %v", got, err)
		}
		if e.Exists(b("q")) || e.Exists(b("w")) || e.ExistsCount([][]byte{b("q")}) != 0 {
			t.Fatal("a deleted queue still exists")
		}
		in := e.Info()
		if in.Jobs != 1 || in.Queues != 1 || in.Ready != 1 || in.Delayed != 0 || in.Reserved != 0 || in.LazyfreePending == 0 || in.LazyfreePending > 3*n+2+1 {
			t.Fatalf("info right after DEL: %+v", in)
		}
		if _, keys := e.Scan(0, 100, nil); len(keys) != 1 {
			t.Fatalf("scan sees %q", keys)
		}
		// UNIQUE: the tombstone is made at DEL time, as replay makes it.
		if identAdd(t, e, AddArgs{Queue: b("q"), ID: b("u"), Payload: b("new-u"), Unique: 60_000, Retry: -1}) {
			t.Fatal("a UNIQUE id of a deleted queue was re-added within its ttl")
		}
		// Ids of the doomed jobs are free in the new queue of the name.
		if !identAdd(t, e, AddArgs{Queue: b("q"), ID: b("x"), Payload: b("new-x"), Retry: -1}) ||
			!identAdd(t, e, AddArgs{Queue: b("q"), ID: b(sids[0]), Payload: b("new-sid"), Retry: -1}) {
			t.Fatal("an id of a deleted queue is still taken")
		}
		// A rewrite and a snapshot made while the queue is being freed leave
		// its jobs out.
		if p, _ := lazyPending(e); p == 0 {
			t.Fatal("freed before the rewrite could see it: make the queue bigger")
		}
		if snap := e.Snapshot(); bytes.Contains(snap, b("doomed-")) {
			t.Fatal("the snapshot holds jobs of a deleted queue")
		}
		if err := e.Rewrite(); err != nil {
			t.Fatal(err)
		}
		waitRewrite(e)
		if bytes.Contains(readLog(fs), b("doomed-")) {
			t.Fatal("the rewritten log holds jobs of a deleted queue")
		}

		sleep(5 * time.Second) // past every delay and ack deadline
		if p, d := lazyPending(e); p != 0 || d != 0 {
			t.Fatalf("still pending: %d jobs, %d queues", p, d)
		}
		if got := drain(e, "q"); len(got) != 2 || got[0] != "new-x" || got[1] != "new-sid" {
			t.Fatalf("the new queue holds %q: a deleted job fired into it", got)
		}
		if e.Exists(b("q-dlq")) {
			t.Fatal("a deleted reservation expired into its dead-letter queue")
		}
		select {
		case <-w.Ready():
			t.Fatal("the blocked client was served a deleted job")
		default:
		}
		e.Push(b("w"), [][]byte{b("fresh")}, false)
		<-w.Ready()
		if d, _ := w.Result(); string(d.Payload) != "fresh" {
			t.Fatalf("the blocked client got %q", d.Payload)
		}
		e.mu.Lock()
		if e.njobs != 1 || len(e.byName) != 1 || len(e.qfree) != len(e.queues)-1 {
			t.Fatalf("left behind: %d jobs, names %d, queues %d free of %d", e.njobs, len(e.byName), len(e.qfree), len(e.queues))
		}
		e.mu.Unlock()
		add(t, e, "q", 0, "again")
		before := dump(e)
		e.Close()
		e = mustNew(t, logged(fs, FsyncAlways))
		if after := dump(e); after != before {
			t.Fatalf("restart differs\nbefore:\n%s\nafter:\n%s", before, after)
		}
		if identAdd(t, e, AddArgs{Queue: b("q"), ID: b("u"), Payload: b("new-u"), Unique: 60_000, Retry: -1}) {
			t.Fatal("the tombstone did not survive the restart")
		}
	})
}

// Replay applies DEL synchronously; a live engine that restarts while the
// queue is still being freed comes back without it.
func TestLazyFreeRestartWhileFreeing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, logged(fs, FsyncAlways))
		defer func() { e.Close() }()
		lazyFill(t, e, "q", 5000)
		add(t, e, "keep", 2000, "kept")
		e.Del([][]byte{b("q")})
		before := dump(e)
		e.Close()
		e = mustNew(t, logged(fs, FsyncAlways))
		if after := dump(e); after != before {
			t.Fatalf("restart differs\nbefore:\n%s\nafter:\n%s", before, after)
		}
		if p, _ := lazyPending(e); p != 0 || e.Exists(b("q")) {
			t.Fatalf("replay left %d jobs to free", p)
		}
	})
}

// FLUSHALL while a queue is being freed drops it with the rest.
func TestLazyFreeFlushWhileFreeing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		lazyFill(t, e, "q", 5000)
		e.Del([][]byte{b("q")})
		if _, err := e.Flush(); err != nil {
			t.Fatal(err)
		}
		add(t, e, "q", 0, "after")
		sleep(5 * time.Second)
		if p, d := lazyPending(e); p != 0 || d != 0 {
			t.Fatalf("pending %d %d", p, d)
		}
		if got := drain(e, "q"); len(got) != 1 || got[0] != "after" {
			t.Fatalf("q holds %q", got)
		}
	})
}

// DEL does O(1) work and the freer a bounded amount per hold of the lock,
// whatever the size of the queue: asserted by counts (jobs left when DEL
// returns, jobs per batch), which a loaded machine cannot make flaky; the
// times are logged (the figures come from the integration test's
// documented run). The old synchronous DEL held the lock for the whole
// queue, about 100 ms here.
func TestLazyFreeBoundsTheLockHold(t *testing.T) {
	e := newEngine(t, Options{})
	payloads := make([][]byte, 1000)
	for i := range payloads {
		payloads[i] = []byte("payload")
	}
	for range 300 {
		if _, _, err := e.Push(b("big"), payloads, false); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 1000 { // some delayed too, found by the slab scan
		add(t, e, "big", 60_000, fmt.Sprint(i))
	}
	start := time.Now()
	var took time.Duration
	e.Atomic(func(tx *Engine) { // DEL and the check of what it left, with no batch between
		if n, _, _ := tx.Del([][]byte{b("big")}); n != 1 {
			t.Error("del")
		}
		took = time.Since(start)
		if p := tx.lazy.Pending; p < 300_000 {
			t.Errorf("DEL freed %d jobs itself, want them left to the freer", 301_000-p)
		}
	})
	for {
		if p, _ := lazyPending(e); p == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	freed := time.Since(start)
	e.mu.Lock()
	hold, batches, most := e.lazy.MaxHold, e.lazy.Batches, e.lazy.MaxFree
	e.mu.Unlock()
	t.Logf("301000 jobs: DEL %v, freed in %v by %d batches, longest hold %v, most jobs in one %d", took, freed, batches, hold, most)
	if most > queue.Batch || batches < 301_000/queue.Batch {
		t.Fatalf("%d batches, one freed %d jobs: want at most %d each", batches, most, queue.Batch)
	}
	if e.Info().Jobs != 0 {
		t.Fatal("jobs left")
	}
}
