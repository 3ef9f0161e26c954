package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"
)

// Replication: snapshots (round trip, cut short) and blocked clients across
// role changes.

func TestSnapshotRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 2, Options{}, nil)
		ln, fn := g.nodes[0], g.nodes[1]
		L, F := ln.e, fn.e
		ln.r.setAuto(true)
		rng := rand.New(rand.NewPCG(7, 8))
		var ids []string
		churn(t, L, rng, 3000, &ids)
		for i := range 20_000 {
			a := AddArgs{Queue: []byte(fmt.Sprintf("bulk%d", i%50)), Payload: []byte(fmt.Sprint(i)),
				Delay: int64(rng.IntN(3) * rng.IntN(100_000)), AckTimeout: int64(rng.IntN(2) * 1000)}
			if i%7 == 0 {
				a.ID = []byte(fmt.Sprint("c", i))
			}
			if i%11 == 0 {
				a.DeadLetter, a.Retry = b("dlq"), 2
			}
			if _, err := L.Add(a); err != nil {
				t.Fatal(err)
			}
		}
		for range 3000 {
			L.Pop([][]byte{[]byte(fmt.Sprintf("bulk%d", rng.IntN(50)))})
		}
		synctest.Wait()
		if !L.Settled() {
			t.Fatal("not Settled with everything committed")
		}
		want := replDump(L)
		snap := L.Snapshot()
		if err := F.Restore(bytes.NewReader(snap)); err != nil {
			t.Fatal(err)
		}
		if got := replDump(F); got != want {
			t.Fatalf("restored state differs:\n%s", diffLines(want, got))
		}
		// A snapshot of the restored engine is the same snapshot.
		if again := F.Snapshot(); !bytes.Equal(again, snap) {
			t.Fatal("snapshot of a restored engine differs")
		}

		// Truncated anywhere, it is refused.
		for range 25 {
			cut := rng.IntN(len(snap))
			x := newEngine(t, Options{Replicator: &fakeRepl{closed: true}, Follower: true})
			if err := x.Restore(bytes.NewReader(snap[:cut])); err == nil {
				t.Fatalf("a snapshot cut at %d of %d restored", cut, len(snap))
			}
			x.Close()
		}

		// Settled: false while a batch is pending or in flight.
		ln.r.setAuto(false)
		add(t, L, "s", 0, "x")
		if L.Settled() {
			t.Fatal("Settled with a batch in flight")
		}
		ln.r.settle(nil)
		if !L.Settled() {
			t.Fatal("not Settled after the commit")
		}
	})
}

// TestSmallSnapshotCutAtEveryOffset: every strict prefix of a snapshot is
// refused, and Restore of the whole needs nothing else.
func TestSmallSnapshotCutAtEveryOffset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 1, Options{}, nil)
		L := g.nodes[0].e
		g.nodes[0].r.setAuto(true)
		add(t, L, "q", 0, "a")
		add(t, L, "q", 100, "b")
		addOpts(t, L, AddArgs{Queue: b("r"), ID: b("r"), Payload: b("r"), AckTimeout: 100})
		mustPop(t, L, "r")
		synctest.Wait()
		snap := L.Snapshot()
		for cut := range len(snap) {
			x := newEngine(t, Options{Replicator: &fakeRepl{closed: true}, Follower: true})
			if err := x.Restore(bytes.NewReader(snap[:cut])); err == nil {
				t.Fatalf("a snapshot cut at %d of %d restored", cut, len(snap))
			}
			x.Close()
		}
		x := newEngine(t, Options{Replicator: &fakeRepl{closed: true}, Follower: true})
		if err := x.Restore(bytes.NewReader(snap)); err != nil {
			t.Fatal(err)
		}
		if got, want := replDump(x), replDump(L); got != want {
			t.Fatalf("restored:\n%s", diffLines(want, got))
		}
	})
}

// TestWaitersAcrossRoleChanges: a client blocked on the leader stays parked
// when it follows (the commands layer unblocks it) and is never served from
// replicated records, which would take a job no record took; a follower's
// blocking pop is refused. A FLUSHALL replayed under it keeps it intact.
func TestWaitersAcrossRoleChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 2, Options{}, nil)
		ln, fn := g.nodes[0], g.nodes[1]
		L, F := ln.e, fn.e
		w := waitFor(t, L, PopDelay, "q")
		mw, err := func() (*Waiter, error) { _, w, err := L.MoveOrWait(b("src"), b("dst"), MoveEnds{}); return w, err }()
		if err != nil {
			t.Fatal(err)
		}
		g.sync(ln)
		L.Follow()
		F.Lead()
		add(t, F, "q", 0, "for nobody on the old leader")
		okInt := ok3[int](t)
		okInt(F.Push(b("src"), [][]byte{b("m")}, false))
		g.sync(fn)
		for _, w := range []*Waiter{w, mw} {
			select {
			case <-w.Ready():
				d, _ := w.Result()
				t.Fatalf("a follower served a parked client from a replicated record: %q", d.Payload)
			default:
			}
		}
		if _, _, err := L.PopOrWait([][]byte{b("q")}, PopDelay); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("blocking pop on a follower: %v", err)
		}
		// A FLUSHALL and more records with the clients still parked.
		if _, err := F.Flush(); err != nil {
			t.Fatal(err)
		}
		add(t, F, "q", 0, "after flush")
		g.sync(fn)
		// The commands layer unblocks them now.
		for _, w := range []*Waiter{w, mw} {
			if d, ok := L.CancelWait(w); ok {
				t.Fatalf("cancelled waiter had a job %q", d.Payload)
			}
		}
		if n := L.Info().Waiters; n != 0 {
			t.Fatalf("%d waiters left", n)
		}
		g.sync(fn)
		// And the old leader can lead again, with its waiters' queues sane.
		F.Follow()
		L.Lead()
		w2 := waitFor(t, L, PopDelay, "empty")
		add(t, L, "empty", 0, "x")
		if got := served(t, w2); got != "x" {
			t.Fatalf("waiter got %q", got)
		}
		g.sync(ln)
	})
}

// TestLeadServesParkedClients: clients still parked when a node leads again
// (Follow, then Lead, without the commands layer unblocking them) are
// served from what the node now holds, with records like any pop.
func TestLeadServesParkedClients(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 2, Options{}, nil)
		ln, fn := g.nodes[0], g.nodes[1]
		L, F := ln.e, fn.e
		w := waitFor(t, L, PopDelay, "q")
		g.sync(ln)
		L.Follow()
		F.Lead()
		add(t, F, "q", 0, "x")
		g.sync(fn)
		F.Follow()
		L.Lead()
		if got := served(t, w); got != "x" {
			t.Fatalf("waiter got %q", got)
		}
		g.sync(ln)
	})
}

// TestResetKeepsWaitersAndReadsDuringRebuild: between Reset and Restore a
// read must not crash, and parked clients survive the rebuild.
func TestResetKeepsWaitersAndReadsDuringRebuild(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 2, Options{}, nil)
		ln, fn := g.nodes[0], g.nodes[1]
		L, F := ln.e, fn.e
		add(t, L, "q", 50, "x")
		g.sync(ln)
		w := waitFor(t, L, PopDelay, "empty")
		snap := F.Snapshot()
		L.Reset()
		_ = L.Len(b("q"))
		_ = L.Peek(b("q"), 1)
		_ = L.Range(b("q"), 0, -1)
		_ = L.Version(b("q"))
		_ = L.Snapshot()
		if err := L.Restore(bytes.NewReader(snap)); err != nil {
			t.Fatal(err)
		}
		L.Rebuilt()
		L.Lead()
		add(t, L, "empty", 0, "y")
		if got := served(t, w); got != "y" {
			t.Fatalf("waiter got %q", got)
		}
	})
}

// TestFollowersMatchUnderAMovingClock: the leader's clock moves while an
// operation runs (here by 0.3 ms at every reading, as a busy machine's
// does between two readings), and jobs fall due every millisecond; a
// follower still holds exactly the leader's state after random writes of
// every kind.
