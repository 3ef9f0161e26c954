package engine

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// Replication: followers hold the leader's state and its time, refuse
// writes, and take over in a failover (harness in replica_harness_test.go).

func TestFollowersHoldTheLeadersState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 3, Options{}, nil)
		workload(t, g, g.nodes[0])
		// A follower that joins late catches up from the whole log.
		if s := replDump(g.nodes[0].e); !strings.Contains(s, "dead2") {
			t.Fatalf("f2 was not dead-lettered:\n%s", s)
		}
	})
}

// TestFollowerReplayMatchesWithTickLargerThanOne: the same with a coarse
// wheel tick, where jobs fire at the end of their tick.
func TestFollowerReplayMatchesWithTickLargerThanOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 2, Options{Tick: 10}, nil)
		workload(t, g, g.nodes[0])
	})
}

// TestFollowerHasNoClock: with no record, nothing moves on a follower
// however long it waits; the next record moves its jobs exactly as the
// leader moved them.
func TestFollowerHasNoClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 2, Options{}, nil)
		ln, fn := g.nodes[0], g.nodes[1]
		L, F := ln.e, fn.e
		add(t, L, "q", 100, "d100")
		addOpts(t, L, AddArgs{Queue: b("r"), ID: b("r1"), Payload: b("r1"), AckTimeout: 50, Retry: -1})
		mustPop(t, L, "r")
		g.sync(ln)
		before := replDump(F)
		start := F.Now()

		sleep(10 * time.Second) // the leader's timer moves its jobs; nothing is committed
		if got := replDump(F); got != before {
			t.Fatalf("the follower's jobs moved without a record:\n%s", diffLines(before, got))
		}
		if F.Now() != start || F.Len(b("q")) != 0 || len(F.Peek(b("q"), 10)) != 0 || state(F, "r", "r1") != "reserved" {
			t.Fatalf("follower: now %d (was %d), len %d, r1 %s", F.Now(), start, F.Len(b("q")), state(F, "r", "r1"))
		}
		if L.Len(b("q")) != 1 || state(L, "r", "r1") != "ready" {
			t.Fatal("the leader's timer did not move its jobs")
		}
		add(t, L, "other", 0, "x") // a record at the leader's time
		g.sync(ln)
		if F.Len(b("q")) != 1 || state(F, "r", "r1") != "ready" || F.Now() < start+10_000 {
			t.Fatalf("after the record: len %d, r1 %s, now %d", F.Len(b("q")), state(F, "r", "r1"), F.Now()-start)
		}
	})
}

// TestLeaderTimeReachesFollowers: a leader whose timer moves jobs tells its
// followers so, although no client wrote: their reads are not stale forever,
// and a follower taking over later holds what the leader held.
func TestLeaderTimeReachesFollowers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 2, Options{}, nil)
		ln, fn := g.nodes[0], g.nodes[1]
		add(t, ln.e, "q", 100, "d100")
		g.sync(ln)
		sleep(200 * time.Millisecond)
		g.sync(ln)
		if fn.e.Len(b("q")) != 1 {
			t.Fatalf("the follower does not see the job the leader's timer fired:\n%s", replDump(fn.e))
		}
	})
}

// TestFollowerRefusesWritesAndServesReads: every write and pop on a
// follower is refused with ErrNotLeader (or, for the calls that return no
// error, does nothing); reads show the replicated jobs.
func TestFollowerRefusesWritesAndServesReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 2, Options{}, nil)
		ln, fn := g.nodes[0], g.nodes[1]
		add(t, ln.e, "q", 0, "ready")
		addAt(t, ln.e, "q", ln.e.Now()+1000, "later", "later")
		addOpts(t, ln.e, AddArgs{Queue: b("r"), ID: b("r1"), Payload: b("r1"), AckTimeout: 5000})
		mustPop(t, ln.e, "r")
		g.sync(ln)
		F := fn.e
		before := replDump(F)

		refused := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, ErrNotLeader) {
				t.Errorf("%s on a follower: %v, want ErrNotLeader", what, err)
			}
		}
		_, err := F.Add(AddArgs{Queue: b("q"), Payload: b("x")})
		refused("Add", err)
		_, _, err = F.PopOrWait([][]byte{b("q")}, PopDelay)
		refused("PopOrWait", err)
		_, _, err = F.PopOrWait([][]byte{b("empty")}, PopLeft)
		refused("PopOrWait on an empty queue", err)
		_, _, err = F.Cancel(b("q"), [][]byte{b("later")})
		refused("Cancel", err)
		_, _, err = F.Ack(b("r"), [][]byte{b("r1")})
		refused("Ack", err)
		_, _, err = F.Nack(b("r"), b("r1"), 0)
		refused("Nack", err)
		_, _, err = F.Touch(b("r"), b("r1"))
		refused("Touch", err)
		_, _, err = F.Push(b("q"), [][]byte{b("p")}, false)
		refused("Push", err)
		_, _, err = F.Move(b("q"), b("q2"), MoveEnds{})
		refused("Move", err)
		_, _, err = F.MoveOrWait(b("empty"), b("q2"), MoveEnds{})
		refused("MoveOrWait", err)
		_, _, err = F.Rem(b("q"), 0, b("ready"))
		refused("Rem", err)
		_, _, err = F.Del([][]byte{b("q")})
		refused("Del", err)
		_, err = F.Flush()
		refused("Flush", err)
		if _, ok := F.Pop([][]byte{b("q")}); ok {
			t.Error("Pop on a follower took a job")
		}
		if _, ok := F.ListPop(b("q"), 1, false); ok {
			t.Error("ListPop on a follower took a job")
		}
		tk, err := F.Atomic(func(tx *Engine) {
			_, err := tx.Add(AddArgs{Queue: b("q"), Payload: b("x")})
			refused("Add in a transaction", err)
		})
		if tk != 0 || err != nil {
			t.Errorf("Atomic on a follower: %d %v", tk, err)
		}
		if got := replDump(F); got != before {
			t.Fatalf("a refused call changed the follower:\n%s", diffLines(before, got))
		}

		// Reads.
		if F.Len(b("q")) != 1 || string(F.Peek(b("q"), 1)[0].Payload) != "ready" ||
			state(F, "q", "later") != "delayed" || state(F, "r", "r1") != "reserved" ||
			!F.Exists(b("r")) || F.QueueStats(b("q")).Delayed != 1 || F.Info().Jobs != 3 ||
			len(F.Keys(nil)) != 2 || len(F.Range(b("q"), 0, -1)) != 1 {
			t.Fatalf("reads on the follower:\n%s", replDump(F))
		}
		if !F.Following() || ln.e.Following() {
			t.Fatal("Following is wrong")
		}
	})
}

// TestFailover: a follower that takes over hands out jobs due in the gap
// (late, never early), keeps reservations' absolute deadlines (an ACK after
// the failover works), makes server ids above every replicated one, and
// continues the add order.
func TestFailover(t *testing.T) {
	for _, tc := range []struct {
		name string
		skew []time.Duration
	}{
		{"same clocks", nil},
		{"new leader's clock behind", []time.Duration{0, -5 * time.Second}},
		{"new leader's clock ahead", []time.Duration{0, 3 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { failover(t, tc.skew) })
		})
	}
}

func failover(t *testing.T, skew []time.Duration) {
	g := newGroup(t, 2, Options{}, skew)
	ln, fn := g.nodes[0], g.nodes[1]
	L, F := ln.e, fn.e
	t0 := L.Now()
	addAt(t, L, "q", t0+1000, "gap1", "gap1")
	addAt(t, L, "q", t0+1000, "gap2", "gap2")
	addAt(t, L, "q", t0+20_000, "late", "late")
	addOpts(t, L, AddArgs{Queue: b("r"), ID: b("held"), Payload: b("held"), AckTimeout: 30_000})
	addOpts(t, L, AddArgs{Queue: b("r"), ID: b("gone"), Payload: b("gone"), AckTimeout: 2000, Retry: -1})
	mustPop(t, L, "r")
	mustPop(t, L, "r")
	var ids []string
	for range 5 {
		ids = append(ids, add(t, L, "ids", 0, "x"))
	}
	g.sync(ln)
	last := L.Now() // the time of the last committed record

	// The leader dies; the gap lasts 10 s.
	L.Follow()
	sleep(10 * time.Second)
	if F.Len(b("q")) != 0 || state(F, "r", "gone") != "reserved" {
		t.Fatal("jobs moved on the follower during the gap")
	}
	F.Lead()
	if F.Following() {
		t.Fatal("still following after Lead")
	}
	now := F.Now()
	if now < last {
		t.Fatalf("the new leader's clock reads %d, before the last replicated time %d", now, last)
	}
	// Jobs due in the gap are ready, in (due, add order); later ones not.
	if got := payloads(F, "q"); !slices.Equal(got, []string{"gap1", "gap2"}) {
		t.Fatalf("after Lead, ready %v", got)
	}
	if state(F, "q", "late") != "delayed" || state(F, "r", "gone") != "ready" {
		t.Fatalf("late %s, gone %s", state(F, "q", "late"), state(F, "r", "gone"))
	}
	// The held reservation keeps its absolute deadline, and can be ACKed.
	if j, _ := F.Get(b("r"), b("held")); j.State != "reserved" || j.AckDeadline != t0+30_000 {
		t.Fatalf("held after failover: %+v, want deadline %d", j, t0+30_000)
	}
	if n, _, err := F.Ack(b("r"), [][]byte{b("held")}); n != 1 || err != nil {
		t.Fatalf("ack after failover: %d %v", n, err)
	}
	// New server ids are above every replicated one.
	id := add(t, F, "ids", 0, "new")
	if id <= slices.Max(ids) {
		t.Fatalf("new id %s not above replicated %s", id, slices.Max(ids))
	}
	// Add order goes on: a job due with "late" fires after it.
	addAt(t, F, "q", t0+20_000, "late2", "late2")
	// Never early: nothing is handed out before its due time on the new
	// leader's clock, including a job added with a delay now.
	add(t, F, "d", 100, "d100")
	var lateOrder []string
	for range 40 {
		sleep(500 * time.Millisecond)
		for _, q := range []string{"q", "d"} {
			for {
				d, ok := F.Pop([][]byte{b(q)})
				if !ok {
					break
				}
				if d.Due > F.Now() {
					t.Fatalf("%s handed out at %d, before its due time %d", d.ID, F.Now(), d.Due)
				}
				if string(d.ID) == "late" || string(d.ID) == "late2" {
					lateOrder = append(lateOrder, string(d.ID))
				}
			}
		}
	}
	if !slices.Equal(lateOrder, []string{"late", "late2"}) {
		t.Fatalf("jobs of equal due time handed out as %v", lateOrder)
	}

	// The old leader follows the new one and holds its state.
	g.sync(fn)
}

// TestSteppedDownLeaderFollowsExactly: a leader steps down cleanly (all its
// batches committed) and follows a new leader whose clock is behind its own:
// it must hold the new leader's state, although its own timer had moved
// jobs the new leader's clock has not reached yet.
func TestSteppedDownLeaderFollowsExactly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 2, Options{}, []time.Duration{0, -3 * time.Second})
		ln, fn := g.nodes[0], g.nodes[1]
		L, F := ln.e, fn.e
		add(t, L, "q", 1000, "early")
		add(t, L, "q", 2000, "later")
		g.sync(ln)
		sleep(1500 * time.Millisecond) // the leader's timer fires "early"
		g.commit(ln)
		g.catchUp(fn)
		L.Follow()
		F.Lead()
		add(t, F, "q", 0, "new") // at the new leader's time
		sleep(4 * time.Second)   // the new leader's timer fires "later"
		add(t, F, "q", 0, "newer")
		g.sync(fn)
		if got := payloads(F, "q"); !slices.Equal(got, []string{"early", "new", "later", "newer"}) {
			t.Fatalf("new leader's order %v", got)
		}
	})
}

// TestFailedBatch: a batch that does not commit fails its writes with
// ErrNotCommitted and every write after it with ErrNotLeader until the
// engine is rebuilt; tickets still pending then fail too; the rebuilt
// engine holds exactly the committed state and leads again.
