package engine

// The ready order through the engine's paths (LRANGE, PEEK, LPUSH, RPOP,
// delayed jobs, handed back, moved, dead-lettered, LREM, DEL); the order's
// own properties (priorities, round-robin fairness, held groups) are
// tested in package queue.

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayd/delayd/jobs"
)

// flowAdd adds a ready (or delayed) job with a group and a priority and
// returns its id.
func flowAdd(t *testing.T, e *Engine, q, group string, prio uint8, payload string) string {
	t.Helper()
	a := AddArgs{Queue: b(q), Payload: b(payload), Priority: prio, Retry: -1}
	if group != "" {
		a.Group = b(group)
	}
	res, err := e.Add(a)
	if err != nil || !res.Added {
		t.Fatalf("add %s/%s/%d %s: %+v %v", q, group, prio, payload, res, err)
	}
	return string(res.ID)
}

func flowRange(e *Engine, q string) []string {
	var out []string
	for _, p := range e.Range(b(q), 0, -1) {
		out = append(out, string(p))
	}
	return out
}

func flowPeek(e *Engine, q string, n int) []string {
	var out []string
	for _, p := range e.Peek(b(q), n) {
		out = append(out, string(p.Payload))
	}
	return out
}

func flowWant(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: %q, want %q", what, got, want)
	}
}

// flowCheck verifies every live queue's ready order against the engine's
// jobs: every ready job of the queue is in it once and the count matches,
// and the order's own invariants hold (queue.Order.Check).
func flowCheck(t *testing.T, e *Engine) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for qi := range e.queues {
		q := &e.queues[qi]
		if !q.live {
			continue
		}
		n := 0
		q.Order.Each(&e.jobs.Slab, func(s uint32) bool {
			if j := e.jobs.At(s); j.State != jobs.StateReady || j.Queue != uint32(qi) {
				t.Fatalf("queue %s: slot %d in the ready order is %s in queue %d", q.name, s, jobs.StateNames[j.State], j.Queue)
			}
			n++
			return true
		})
		if n != q.Ready {
			t.Fatalf("queue %s: %d jobs in the ready order, ready count %d", q.name, n, q.Ready)
		}
		var held []uint32
		for s := range e.jobs.Len() {
			if j := e.jobs.At(s); j.State != jobs.StateFree && j.Queue == uint32(qi) {
				held = append(held, s)
			}
		}
		if err := q.Order.Check(&e.jobs.Slab, held); err != nil {
			t.Fatalf("queue %s: %v", q.name, err)
		}
	}
}

func TestFlowPriorityOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		for _, a := range []struct {
			prio uint8
			p    string
		}{{0, "a0"}, {5, "b5"}, {0, "c0"}, {9, "d9"}, {5, "e5"}, {9, "f9"}} {
			flowAdd(t, e, "q", "", a.prio, a.p)
		}
		want := []string{"d9", "f9", "b5", "e5", "a0", "c0"}
		flowWant(t, "LRANGE", flowRange(e, "q"), want)
		flowWant(t, "PEEK 3", flowPeek(e, "q", 3), want[:3])
		if got := e.Range(b("q"), 1, 2); len(got) != 2 || string(got[0]) != "f9" || string(got[1]) != "b5" {
			t.Fatalf("LRANGE 1 2: %q", got)
		}
		if got := e.Range(b("q"), -2, -1); len(got) != 2 || string(got[0]) != "a0" || string(got[1]) != "c0" {
			t.Fatalf("LRANGE -2 -1: %q", got)
		}
		// RPOP takes the newest job of the lowest priority: the end of LRANGE.
		ds, _ := e.ListPop(b("q"), 1, true)
		flowWant(t, "RPOP", []string{string(ds[0].Payload)}, []string{"c0"})
		ds, _ = e.ListPop(b("q"), 1, false)
		flowWant(t, "LPOP", []string{string(ds[0].Payload)}, []string{"d9"})
		// A delayed job of high priority goes ahead of the ready ones when due.
		e.Add(AddArgs{Queue: b("q"), Payload: b("late7"), Delay: 10, Priority: 7, Retry: -1})
		sleep(10 * time.Millisecond)
		flowCheck(t, e)
		flowWant(t, "pops", drain(e, "q"), []string{"f9", "late7", "b5", "e5", "a0"})
		// Empty again: the queue went, and its lanes with it.
		if _, ok := e.queueFor(b("q"), false); ok {
			t.Fatal("the empty queue is still there")
		}
	})
}

func TestFlowRoundRobinAcrossGroups(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		for _, a := range [][2]string{{"a", "a1"}, {"a", "a2"}, {"b", "b1"}, {"a", "a3"}, {"", "x1"}, {"b", "b2"}, {"c", "c1"}, {"", "x2"}} {
			flowAdd(t, e, "q", a[0], 0, a[1])
		}
		want := []string{"a1", "b1", "x1", "c1", "a2", "b2", "x2", "a3"}
		flowWant(t, "LRANGE", flowRange(e, "q"), want)
		flowCheck(t, e)
		var got []string
		for range 3 {
			p, _ := popPayload(e, "q")
			got = append(got, p)
		}
		flowWant(t, "first pops", got, want[:3])
		// Group a, next in turn, gets a job of priority 2: it goes first;
		// then the round goes on where it was.
		flowAdd(t, e, "q", "b", 2, "b3!")
		flowWant(t, "LRANGE after a priority add", flowRange(e, "q"), []string{"b3!", "c1", "a2", "b2", "x2", "a3"})
		flowWant(t, "rest", drain(e, "q"), []string{"b3!", "c1", "a2", "b2", "x2", "a3"})
		flowCheck(t, e)

		// LPUSH (and a delivery handed back) goes to the head of its group
		// and the group to the head of the ring: it is the next pop.
		flowAdd(t, e, "q", "a", 0, "a4")
		flowAdd(t, e, "q", "b", 0, "b4")
		e.Push(b("q"), [][]byte{b("pushed")}, true)
		flowWant(t, "after LPUSH", flowRange(e, "q"), []string{"pushed", "a4", "b4"})
		flowCheck(t, e)
		// RPOP: the newest job of the group last in the round.
		ds, _ := e.ListPop(b("q"), 1, true)
		flowWant(t, "RPOP", []string{string(ds[0].Payload)}, []string{"b4"})
		flowWant(t, "rest", drain(e, "q"), []string{"pushed", "a4"})
	})
}

// TestFlowKeptByEveryPath: a job keeps its group and priority when it is
// handed back, reserved and expired, moved by LMOVE, and dead-lettered.
func TestFlowKeptByEveryPath(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		laneOf := func(q, id string) (string, uint8) {
			e.mu.Lock()
			defer e.mu.Unlock()
			qi, _ := e.queueFor(b(q), false)
			s, ok := e.jobs.Lookup(&e.queues[qi].run, qi, b(id))
			if !ok {
				t.Fatalf("%s/%s is gone", q, id)
			}
			g, p := e.laneOf(s)
			return string(g), p
		}
		want := func(q, id, group string, prio uint8) {
			t.Helper()
			if g, p := laneOf(q, id); g != group || p != prio {
				t.Fatalf("%s/%s: group %q priority %d, want %q %d", q, id, g, p, group, prio)
			}
		}
		// A plain pop handed back (the client left).
		id := flowAdd(t, e, "q", "g", 3, "x")
		d, _ := e.Pop([][]byte{b("q")})
		if !e.Requeue(d) {
			t.Fatal("requeue")
		}
		want("q", id, "g", 3)
		// Reserved, then expired.
		e.Cancel(b("q"), [][]byte{b(id)})
		res, _ := e.Add(AddArgs{Queue: b("q"), ID: b("r"), Payload: b("r"), Group: b("g"), Priority: 4, AckTimeout: 50, Retry: 0, DeadLetter: b("dlq")})
		d, _ = e.Pop([][]byte{b("q")})
		if !d.Reserved || string(d.ID) != string(res.ID) {
			t.Fatalf("pop %+v", d)
		}
		want("q", "r", "g", 4)
		// Out of retries: to the dead-letter queue, with its group and priority.
		sleep(50 * time.Millisecond)
		want("dlq", "r", "g", 4)
		flowCheck(t, e)
		// LMOVE keeps them too.
		if _, ok, err := e.Move(b("dlq"), b("other"), MoveEnds{}); !ok || err != nil {
			t.Fatalf("move: %v %v", ok, err)
		}
		want("other", "r", "g", 4)
		flowCheck(t, e)
		// DELAY.ADD REPLACE takes the new options.
		e.Add(AddArgs{Queue: b("other"), ID: b("r"), Payload: b("r2"), Replace: true, Retry: -1})
		want("other", "r", "", 0)
		flowCheck(t, e)
	})
}

func TestFlowLremAndDelWithGroups(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		for i, g := range []string{"a", "b", "a", "", "b", "a"} {
			flowAdd(t, e, "q", g, uint8(i%2), []string{"x", "y"}[i%3%2])
		}
		before := flowRange(e, "q")
		n, _, _ := e.Rem(b("q"), -1, b("x"))
		if n != 1 {
			t.Fatalf("LREM -1: %d", n)
		}
		// The last x of the pop order went.
		i := len(before) - 1
		for before[i] != "x" {
			i--
		}
		want := slices.Delete(slices.Clone(before), i, i+1)
		flowWant(t, "after LREM -1", flowRange(e, "q"), want)
		flowCheck(t, e)
		if n, _, _ := e.Del([][]byte{b("q")}); n != 1 {
			t.Fatalf("DEL: %d", n)
		}
		if e.Len(b("q")) != 0 || e.Exists(b("q")) {
			t.Fatal("DEL left jobs")
		}
	})
}
