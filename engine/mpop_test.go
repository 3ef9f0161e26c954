package engine

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

func identIDs(ds []Delivery) []string {
	var out []string
	for _, d := range ds {
		out = append(out, string(d.ID))
	}
	return out
}

// MPOP takes up to n jobs of the first queue with a ready one, each as
// DELAY.POP takes it.
func TestMPopTakesFromTheFirstReadyQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		for i := range 3 {
			identAdd(t, e, AddArgs{Queue: b("b"), ID: b(fmt.Sprint("b", i)), Payload: b("p"), AckTimeout: 1000, Retry: -1})
		}
		identAdd(t, e, AddArgs{Queue: b("c"), ID: b("c0"), Payload: b("p"), Retry: -1})
		ds, w, err := e.MPopOrWait([][]byte{b("a"), b("b"), b("c")}, 2)
		if err != nil || w != nil || !slices.Equal(identIDs(ds), []string{"b0", "b1"}) {
			t.Fatalf("mpop: %v %v %v", identIDs(ds), w, err)
		}
		if !ds[0].Reserved || state(e, "b", "b0") != "reserved" {
			t.Fatal("a job with an ack timeout was not reserved")
		}
		// Fewer ready than asked: what there is, from that queue only.
		ds, _, _ = e.MPopOrWait([][]byte{b("a"), b("b"), b("c")}, 10)
		if !slices.Equal(identIDs(ds), []string{"b2"}) {
			t.Fatalf("mpop 10: %v", identIDs(ds))
		}
		ds, _, _ = e.MPopOrWait([][]byte{b("a"), b("b"), b("c")}, 10)
		if !slices.Equal(identIDs(ds), []string{"c0"}) || state(e, "c", "c0") != "gone" {
			t.Fatalf("mpop c: %v", identIDs(ds))
		}
	})
}

// An MPOP whose first job empties its queue (the queue is freed) takes no
// more, and never from another queue: a bug took the rest from whichever
// queue held the freed queue's index (0 here, "other").
func TestMPopEmptiedQueueTakesNoMore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		identAdd(t, e, AddArgs{Queue: b("other"), ID: b("o0"), Payload: b("p"), Retry: -1})
		identAdd(t, e, AddArgs{Queue: b("other"), ID: b("o1"), Payload: b("p"), Retry: -1})
		identAdd(t, e, AddArgs{Queue: b("q"), ID: b("k1"), Payload: b("p"), Retry: -1})
		ds, w, err := e.MPopOrWait([][]byte{b("q")}, 5)
		if err != nil || w != nil || !slices.Equal(identIDs(ds), []string{"k1"}) {
			t.Fatalf("mpop q: %v %v %v", identIDs(ds), w, err)
		}
		if state(e, "other", "o0") != "ready" || state(e, "other", "o1") != "ready" {
			t.Fatal("MPOP on q took jobs of another queue")
		}
	})
}

// A blocked MPOP served when jobs arrive takes up to n of them then, in
// its turn among the queue's waiters; one whose client left hands them all
// back, in order.
func TestMPopBlocked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		_, w, err := e.MPopOrWait([][]byte{b("q")}, 3)
		if err != nil || w == nil {
			t.Fatal("park")
		}
		_, w2, _ := e.PopOrWait([][]byte{b("q")}, PopDelay)
		if _, _, err := e.Push(b("q"), [][]byte{b("1"), b("2"), b("3"), b("4"), b("5")}, false); err != nil {
			t.Fatal(err)
		}
		<-w.Ready()
		d, ok := w.Result()
		all := append([]Delivery{d}, w.More()...)
		if !ok || len(all) != 3 || string(all[0].Payload) != "1" || string(all[2].Payload) != "3" {
			t.Fatalf("the MPOP waiter got %v", all)
		}
		<-w2.Ready()
		if d, _ := w2.Result(); string(d.Payload) != "4" {
			t.Fatalf("the next waiter got %q", d.Payload)
		}

		// A job firing from the wheel serves the waiter at once: it takes
		// what is ready then (as each push serves a BLMPOP in Redis).
		_, w, _ = e.MPopOrWait([][]byte{b("r")}, 2)
		identAdd(t, e, AddArgs{Queue: b("r"), ID: b("x"), Payload: b("x"), Delay: 10, AckTimeout: 1000, Retry: -1})
		sleep(10 * time.Millisecond)
		<-w.Ready()
		if d, _ := w.Result(); string(d.ID) != "x" || len(w.More()) != 0 || !d.Reserved {
			t.Fatalf("served by the wheel: %+v %v", d, identIDs(w.More()))
		}
		e.Ack(b("r"), [][]byte{b("x")})

		// Served, then gone: the jobs go back, in order.
		_, w, _ = e.MPopOrWait([][]byte{b("r")}, 2)
		e.Push(b("r"), [][]byte{b("x"), b("y"), b("z")}, false)
		d, ok = e.CancelWait(w)
		more := w.More()
		if !ok || string(d.Payload) != "x" || len(more) != 1 || string(more[0].Payload) != "y" {
			t.Fatalf("cancel after served: %+v %v", d, identIDs(more))
		}
		for i := len(more) - 1; i >= 0; i-- {
			e.Requeue(more[i])
		}
		e.Requeue(d)
		got := e.Peek(b("r"), 5)
		if len(got) != 3 || string(got[0].Payload) != "x" || string(got[1].Payload) != "y" || string(got[2].Payload) != "z" {
			t.Fatalf("after the client left: %v", got)
		}
		if j, _ := e.Get(b("r"), got[0].ID); j.Deliveries != 0 || j.State != "ready" {
			t.Fatalf("a job handed back: %+v", j)
		}
	})
}

// Jobs that fire in the same tick are all ready before any waiter is
// served: a blocked MPOP takes up to its count of them, as a blocked BLMPOP
// takes what one LPUSH adds, and the next waiter the rest. Single pops
// blocked on several queues get them in fire order: the queue whose job
// fired first is served first.
func TestFiredJobsServeWaitersAsABatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		_, w1, _ := e.MPopOrWait([][]byte{b("q")}, 3)
		_, w2, _ := e.MPopOrWait([][]byte{b("q")}, 3)
		_, p1, _ := e.PopOrWait([][]byte{b("s"), b("r")}, PopDelay)
		_, p2, _ := e.PopOrWait([][]byte{b("r"), b("s")}, PopDelay)
		if w1 == nil || w2 == nil || p1 == nil || p2 == nil {
			t.Fatal("park")
		}
		for i := range 4 {
			identAdd(t, e, AddArgs{Queue: b("q"), ID: b(fmt.Sprint("q", i)), Payload: b("p"), Delay: 10, Retry: -1})
		}
		identAdd(t, e, AddArgs{Queue: b("r"), ID: b("r0"), Payload: b("p"), Delay: 10, Retry: -1})
		identAdd(t, e, AddArgs{Queue: b("s"), ID: b("s0"), Payload: b("p"), Delay: 10, Retry: -1})
		sleep(10 * time.Millisecond)
		<-w1.Ready()
		<-w2.Ready()
		d, _ := w1.Result()
		if got := identIDs(append([]Delivery{d}, w1.More()...)); !slices.Equal(got, []string{"q0", "q1", "q2"}) {
			t.Fatalf("the first MPOP got %v, want the tick's first three", got)
		}
		if d, _ := w2.Result(); string(d.ID) != "q3" || len(w2.More()) != 0 {
			t.Fatalf("the second MPOP got %s %v", d.ID, identIDs(w2.More()))
		}
		<-p1.Ready()
		<-p2.Ready()
		// r0 fired before s0 (added first): r is served first, and its
		// first waiter is p1, which waits on s and r.
		if d, _ := p1.Result(); string(d.ID) != "r0" {
			t.Fatalf("the first pop got %s, want r0", d.ID)
		}
		if d, _ := p2.Result(); string(d.ID) != "s0" {
			t.Fatalf("the second pop got %s, want s0", d.ID)
		}
	})
}

// Inside a transaction MPOP does not block.
func TestMPopInTransaction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		var err error
		var ds []Delivery
		var w *Waiter
		e.Atomic(func(tx *Engine) { ds, w, err = tx.MPopOrWait([][]byte{b("q")}, 2) })
		if !errors.Is(err, ErrInTransaction) || w != nil || ds != nil {
			t.Fatalf("in a transaction: %v %v %v", ds, w, err)
		}
		if n := e.Info().Waiters; n != 0 {
			t.Fatalf("%d waiters", n)
		}
	})
}
