package engine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// Replication under a moving clock, and the window that gathers batches.

func TestFollowersMatchUnderAMovingClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var reads atomic.Int64
		r := &fakeRepl{auto: true}
		L := newEngine(t, Options{Replicator: r, Now: func() time.Time {
			return time.Now().Add(time.Duration(reads.Add(1)) * 300 * time.Microsecond)
		}})
		t.Cleanup(r.close)
		fr := &fakeRepl{}
		F := newEngine(t, Options{Replicator: fr, Follower: true})
		t.Cleanup(fr.close)
		applied := 0
		rng := rand.New(rand.NewPCG(3, 4))
		var ids []string
		for round := range 60 {
			for i := range 200 { // jobs due at every millisecond from now on
				L.Add(AddArgs{Queue: []byte(fmt.Sprintf("q%d", i%3)), Delay: int64(i), Payload: []byte("tick"),
					AckTimeout: int64(i % 2 * 7), Retry: -1})
			}
			churn(t, L, rng, 50, &ids)
			synctest.Wait()
			r.mu.Lock()
			log := r.log[applied:]
			applied = len(r.log)
			r.mu.Unlock()
			for _, batch := range log {
				if err := F.ApplyBatch(batch); err != nil {
					t.Fatal(err)
				}
			}
			if want, got := replDump(L), replDump(F); got != want {
				t.Fatalf("round %d: the follower differs:\n%s", round, diffLines(want, got))
			}
		}
	})
}

// With a window of two, a third batch waits for a commit, and the writes
// made meanwhile go out as one larger batch (fewer Raft entries), in order.
func TestReplicaWindowGathersBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 2, Options{ReplicaWindow: 2}, nil)
		ln, fn := g.nodes[0], g.nodes[1]
		L := ln.e
		var tickets []uint64
		addOne := func(id string) {
			res, err := L.Add(AddArgs{Queue: b("q"), ID: b(id), Payload: b(id)})
			if err != nil {
				t.Fatal(err)
			}
			tickets = append(tickets, res.Ticket)
			synctest.Wait() // the flusher proposes what it may
		}
		addOne("a")
		addOne("b")
		addOne("c")
		addOne("d")
		first := ln.r.take()
		if len(first) != 2 {
			t.Fatalf("%d batches in flight, want the window's 2", len(first))
		}
		for _, p := range first {
			close(p.done) // committed
			g.log = append(g.log, p.batch)
		}
		synctest.Wait()
		rest := ln.r.take()
		if len(rest) != 1 {
			t.Fatalf("the writes made while the window was full went out as %d batches, want 1", len(rest))
		}
		for _, id := range []string{"c", "d"} {
			if !bytes.Contains(rest[0].batch, []byte(id)) {
				t.Fatalf("the gathered batch lacks %q", id)
			}
		}
		close(rest[0].done)
		g.log = append(g.log, rest[0].batch)
		ln.applied = len(g.log)
		for _, tk := range tickets {
			if err := waitDurable(t, L, tk); err != nil {
				t.Fatalf("ticket %d: %v", tk, err)
			}
		}
		g.catchUp(fn)
		if want, got := replDump(L), replDump(fn.e); want != got {
			t.Fatalf("the follower differs:\n%s", diffLines(want, got))
		}
	})
}
