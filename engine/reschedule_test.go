package engine

import (
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayd/delayd/aof"
)

func identReschedule(t *testing.T, e *Engine, a RescheduleArgs) bool {
	t.Helper()
	ok, _, err := e.Reschedule(a)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// RESCHEDULE moves a delayed job later or earlier, never hands it out
// before its new time, keeps its id, payload and deliveries, and a replay
// rebuilds exactly the same state.
func TestRescheduleMovesInTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, logged(fs, FsyncAlways))
		defer func() { e.Close() }()
		t0 := e.Now()
		for _, id := range []string{"later", "earlier", "past", "ready", "reserved"} {
			identAdd(t, e, AddArgs{Queue: b("q"), ID: b(id), Payload: b("p-" + id), Delay: 1000, AckTimeout: 60_000, Retry: -1})
		}
		// reserved: popped once, then nacked back to delayed, so it has a
		// delivery to keep; then popped again (reserved).
		if !identReschedule(t, e, RescheduleArgs{Queue: b("q"), ID: b("reserved"), At: true, Due: t0}) {
			t.Fatal("reschedule to now")
		}
		if d, ok := e.Pop([][]byte{b("q")}); !ok || string(d.ID) != "reserved" {
			t.Fatalf("pop: %+v", d)
		}
		if identReschedule(t, e, RescheduleArgs{Queue: b("q"), ID: b("reserved"), Delay: 5}) {
			t.Fatal("a reserved job was rescheduled")
		}
		if identReschedule(t, e, RescheduleArgs{Queue: b("q"), ID: b("nosuch"), Delay: 5}) ||
			identReschedule(t, e, RescheduleArgs{Queue: b("none"), ID: b("x"), Delay: 5}) {
			t.Fatal("rescheduled a job that does not exist")
		}
		e.Nack(b("q"), b("reserved"), 200) // delayed again, one delivery
		identReschedule(t, e, RescheduleArgs{Queue: b("q"), ID: b("later"), Delay: 3000})
		identReschedule(t, e, RescheduleArgs{Queue: b("q"), ID: b("earlier"), At: true, Due: t0 + 500})
		identReschedule(t, e, RescheduleArgs{Queue: b("q"), ID: b("past"), At: true, Due: t0 - 10_000})
		identReschedule(t, e, RescheduleArgs{Queue: b("q"), ID: b("reserved"), At: true, Due: t0 + 500})
		if j, _ := e.Get(b("q"), b("past")); j.State != "ready" || j.Due != t0-10_000 {
			t.Fatalf("rescheduled to the past: %+v", j)
		}
		// A ready job goes back to delayed.
		identReschedule(t, e, RescheduleArgs{Queue: b("q"), ID: b("past"), Delay: 2000})
		identReschedule(t, e, RescheduleArgs{Queue: b("q"), ID: b("ready"), Delay: 0})
		if j, _ := e.Get(b("q"), b("ready")); j.State != "ready" || j.Due != t0 {
			t.Fatalf("rescheduled to now: %+v", j)
		}
		before := dump(e)
		e.Close()
		e = mustNew(t, logged(fs, FsyncAlways))
		if after := dump(e); after != before {
			t.Fatalf("state after restart differs\nbefore:\n%s\nafter:\n%s", before, after)
		}
		if d, _ := e.Pop([][]byte{b("q")}); string(d.ID) != "ready" {
			t.Fatalf("pop now: %+v", d)
		}
		type seen struct {
			id         string
			at         int64
			deliveries uint32
		}
		var got []seen
		for e.Now() < t0+4000 {
			sleep(time.Millisecond)
			for {
				d, ok := e.Pop([][]byte{b("q")})
				if !ok {
					break
				}
				got = append(got, seen{string(d.ID), e.Now(), d.Deliveries})
			}
		}
		want := []seen{{"earlier", t0 + 500, 1}, {"reserved", t0 + 500, 2}, {"past", t0 + 2000, 1}, {"later", t0 + 3000, 1}}
		if !slices.Equal(got, want) {
			t.Fatalf("handed out %v, want %v", got, want)
		}
	})
}

// PROMOTE makes delayed jobs ready now, in the order given, serves a
// blocked client, and counts only the delayed ones.
func TestPromote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		for i := range 4 {
			identAdd(t, e, AddArgs{Queue: b("q"), ID: b(fmt.Sprint("d", i)), Payload: b(fmt.Sprint("p", i)), Delay: 60_000, Retry: -1})
		}
		identAdd(t, e, AddArgs{Queue: b("q"), ID: b("r"), Payload: b("pr"), Retry: -1})
		_, w, err := e.PopOrWait([][]byte{b("empty"), b("other")}, PopDelay)
		if err != nil || w == nil {
			t.Fatal("park")
		}
		n, _, err := e.Promote(b("q"), [][]byte{b("d2"), b("r"), b("nosuch"), b("d0")})
		if err != nil || n != 2 {
			t.Fatalf("promote: %d %v", n, err)
		}
		if got := drain(e, "q"); !slices.Equal(got, []string{"pr", "p2", "p0"}) {
			t.Fatalf("ready order %v", got)
		}
		identAdd(t, e, AddArgs{Queue: b("other"), ID: b("o"), Payload: b("po"), Delay: 60_000, Retry: -1})
		e.Promote(b("other"), [][]byte{b("o")})
		select {
		case <-w.Ready():
			if d, _ := w.Result(); string(d.ID) != "o" {
				t.Fatalf("waiter got %+v", d)
			}
		default:
			t.Fatal("the blocked client was not served by PROMOTE")
		}
		if s := e.QueueStats(b("q")); s.Delayed != 2 {
			t.Fatalf("stats %+v", s)
		}
	})
}

// Inside a transaction, and logged as one unit with it.
func TestRescheduleInTransaction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, logged(fs, FsyncAlways))
		defer func() { e.Close() }()
		identAdd(t, e, AddArgs{Queue: b("q"), ID: b("x"), Payload: b("p"), Delay: 60_000, Retry: -1})
		identAdd(t, e, AddArgs{Queue: b("q"), ID: b("y"), Payload: b("p"), Delay: 60_000, Retry: -1})
		ticket, err := e.Atomic(func(tx *Engine) {
			tx.Reschedule(RescheduleArgs{Queue: b("q"), ID: b("x"), Delay: 10})
			tx.Promote(b("q"), [][]byte{b("y")})
		})
		if err != nil || e.WaitDurable(ticket) != nil {
			t.Fatal(err)
		}
		before := dump(e)
		e.Close()
		e = mustNew(t, logged(fs, FsyncAlways))
		if after := dump(e); after != before {
			t.Fatalf("after restart\nbefore:\n%s\nafter:\n%s", before, after)
		}
	})
}
