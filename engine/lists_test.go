package engine

import (
	"slices"
	"testing"
	"testing/synctest"

	"github.com/delayd/delayd/jobs"
)

// waitFor parks a waiter on the names (the queues must be empty).
func waitFor(t *testing.T, e *Engine, mode PopMode, names ...string) *Waiter {
	t.Helper()
	var bs [][]byte
	for _, n := range names {
		bs = append(bs, b(n))
	}
	_, w, err := e.PopOrWait(bs, mode)
	if err != nil || w == nil {
		t.Fatalf("PopOrWait %v: a job or an error (%v): the queues should be empty", names, err)
	}
	return w
}

func served(t *testing.T, w *Waiter) string {
	t.Helper()
	select {
	case <-w.Ready():
	default:
		t.Fatal("the waiter was not served")
	}
	d, ok := w.Result()
	if !ok {
		t.Fatal("the waiter was released without a job")
	}
	return string(d.Payload)
}

// TestPushRepliesLengthBeforeServing: RPUSH/LPUSH reply the ready length
// right after the push, and waiters are served after the last value is in
// place, as Redis does (so LPUSH k a b c hands a BLPOP waiter c).
func TestPushRepliesLengthBeforeServing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		push := func(q string, head bool, vals ...string) int {
			t.Helper()
			var ps [][]byte
			for _, v := range vals {
				ps = append(ps, b(v))
			}
			n, _, err := e.Push(b(q), ps, head)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		w := waitFor(t, e, PopLeft, "k")
		if n := push("k", false, "x"); n != 1 {
			t.Fatalf("RPUSH k x with one waiter: %d, want 1", n)
		}
		if p := served(t, w); p != "x" || e.Len(b("k")) != 0 {
			t.Fatalf("waiter got %q, llen %d", p, e.Len(b("k")))
		}

		w1, w2 := waitFor(t, e, PopLeft, "k"), waitFor(t, e, PopLeft, "k")
		if n := push("k", false, "a", "b", "c"); n != 3 {
			t.Fatalf("RPUSH k a b c with two waiters: %d, want 3", n)
		}
		if p1, p2 := served(t, w1), served(t, w2); p1 != "a" || p2 != "b" {
			t.Fatalf("two waiters got %q %q, want a b", p1, p2)
		}
		if got := e.Range(b("k"), 0, -1); len(got) != 1 || string(got[0]) != "c" {
			t.Fatalf("left after two waiters: %q", got)
		}
		e.Del([][]byte{b("k")})

		w = waitFor(t, e, PopLeft, "k")
		if n := push("k", true, "a", "b", "c"); n != 3 {
			t.Fatalf("LPUSH k a b c with a waiter: %d, want 3", n)
		}
		if p := served(t, w); p != "c" {
			t.Fatalf("BLPOP waiter after LPUSH k a b c got %q, want c", p)
		}
		if got := e.Range(b("k"), 0, -1); !slices.EqualFunc(got, [][]byte{b("b"), b("a")}, func(x, y []byte) bool { return string(x) == string(y) }) {
			t.Fatalf("left after LPUSH: %q", got)
		}
		e.Del([][]byte{b("k")})

		w = waitFor(t, e, PopRight, "k")
		if n := push("k", false, "x", "y"); n != 2 {
			t.Fatalf("RPUSH k x y with a BRPOP waiter: %d", n)
		}
		if p := served(t, w); p != "y" {
			t.Fatalf("BRPOP waiter got %q, want y", p)
		}
		e.Del([][]byte{b("k")})

		w = waitFor(t, e, PopLeft, "k1", "k2")
		if n := push("k2", false, "z"); n != 1 {
			t.Fatalf("RPUSH k2 z with a waiter on k1 k2: %d", n)
		}
		if p := served(t, w); p != "z" {
			t.Fatalf("waiter on two keys got %q", p)
		}
	})
}

// TestScratchPops: pops through one Scratch (what a connection does) hand
// out the right jobs in order, an id copied into it cannot be overwritten
// by an append to it, a list pop renders no server id (its reply has none),
// the Queue is the caller's name, and a job bigger than the Scratch keeps
// is not kept for the next pop.
func TestScratchPops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		big := make([]byte, jobs.ScratchKeep+1)
		if _, _, err := e.Push(b("k"), [][]byte{b("a"), b("bb"), big, b("c")}, false); err != nil {
			t.Fatal(err)
		}
		var s Scratch
		name := b("k")
		d, ok := e.ListPopOne(name, false, &s)
		if !ok || string(d.Payload) != "a" || &d.Queue[0] != &name[0] || d.ID != nil {
			t.Fatalf("first pop: %q %v, queue %q, id %q", d.Payload, ok, d.Queue, d.ID)
		}
		d, w, err := e.PopOrWaitInto([][]byte{b("nothing"), name}, PopDelay, &s)
		if err != nil || w != nil || string(d.Payload) != "bb" || string(d.Queue) != "k" {
			t.Fatalf("second pop: %q %v %v", d.Payload, w, err)
		}
		id := append(d.ID, 'x') // must not run into what the Scratch holds beside it
		if string(d.Payload) != "bb" || len(id) != jobs.SIDLen+1 {
			t.Fatalf("an append to the id changed the payload: %q", d.Payload)
		}
		if d, ok = e.ListPopOne(name, false, &s); !ok || len(d.Payload) != len(big) {
			t.Fatalf("third pop: %d bytes", len(d.Payload))
		}
		if d, ok = e.ListPopOne(name, true, &s); !ok || string(d.Payload) != "c" || s.Cap() > jobs.ScratchKeep {
			t.Fatalf("fourth pop: %q, scratch kept %d bytes", d.Payload, s.Cap())
		}
		if _, ok = e.ListPopOne(name, false, &s); ok {
			t.Fatal("a pop from an empty list found a job")
		}
	})
}

// TestRequeueOfAListPop: a list pop's delivery has no id rendered, and
// handing it back (its client was gone) still puts the job back under its
// own id, unless a job has taken that id meanwhile, which then wins.
func TestRequeueOfAListPop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		e.Push(b("k"), [][]byte{b("x")}, false)
		var s Scratch
		d, ok := e.ListPopOne(b("k"), false, &s)
		if !ok || d.ID != nil {
			t.Fatalf("list pop: %v, id %q", ok, d.ID)
		}
		var buf [jobs.SIDLen]byte
		id := string(jobs.RenderSID(&buf, d.sid))
		if !e.Requeue(d) {
			t.Fatal("the job was not handed back")
		}
		if j, ok := e.Get(b("k"), []byte(id)); !ok || string(j.Payload) != "x" {
			t.Fatalf("the job handed back is not under its id %s: %v %q", id, ok, j.Payload)
		}
		// Popped again, and its id taken by a client's job before the
		// hand-back: the client's job stays.
		d, _ = e.ListPopOne(b("k"), false, &s)
		if _, err := e.Add(AddArgs{Queue: b("k"), ID: []byte(id), Payload: b("mine"), Retry: -1, AckTimeout: -1}); err != nil {
			t.Fatal(err)
		}
		e.Requeue(d)
		if j, ok := e.Get(b("k"), []byte(id)); !ok || string(j.Payload) != "mine" {
			t.Fatalf("the hand-back replaced the job that took its id: %v %q", ok, j.Payload)
		}
	})
}
