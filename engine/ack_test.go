package engine

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/jobs"
)

func addOpts(t *testing.T, e *Engine, a AddArgs) string {
	t.Helper()
	res, err := e.Add(a)
	if err != nil || !res.Added {
		t.Fatalf("add %+v: %+v %v", a, res, err)
	}
	return string(res.ID)
}

func state(e *Engine, q, id string) string {
	j, ok := e.Get(b(q), b(id))
	if !ok {
		return "gone"
	}
	return j.State
}

func TestRedeliveryExactlyAtDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		id := addOpts(t, e, AddArgs{Retry: -1, Queue: b("q"), Payload: b("x"), AckTimeout: 1000})
		d, _ := e.Pop([][]byte{b("q")})
		if !d.Reserved || d.Deliveries != 1 {
			t.Fatalf("first pop %+v", d)
		}
		j, _ := e.Get(b("q"), b(id))
		if j.State != "reserved" || j.AckDeadline != e.Now()+1000 {
			t.Fatalf("after pop: %+v", j)
		}
		sleep(999 * time.Millisecond)
		if s := state(e, "q", id); s != "reserved" {
			t.Fatalf("a millisecond before the deadline: %s", s)
		}
		sleep(time.Millisecond)
		if s := state(e, "q", id); s != "ready" {
			t.Fatalf("at the deadline: %s", s)
		}
		d, _ = e.Pop([][]byte{b("q")})
		if string(d.ID) != id || d.Deliveries != 2 {
			t.Fatalf("redelivery %+v", d)
		}
	})
}

func TestAckNackTouchRaceTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		reserve := func(id string) {
			addOpts(t, e, AddArgs{Retry: -1, Queue: b("q"), ID: b(id), Payload: b(id), AckTimeout: 100})
			if d, ok := e.Pop([][]byte{b("q")}); !ok || string(d.ID) != id {
				t.Fatalf("pop %s: %+v", id, d)
			}
		}
		// ACK one millisecond before the deadline wins; at the deadline the
		// reservation has expired, whether or not the timer has run.
		reserve("early")
		sleep(99 * time.Millisecond)
		if n, _, _ := e.Ack(b("q"), [][]byte{b("early")}); n != 1 {
			t.Fatal("ack before the deadline failed")
		}
		reserve("late")
		sleep(100 * time.Millisecond)
		if n, _, _ := e.Ack(b("q"), [][]byte{b("late")}); n != 0 {
			t.Fatal("ack at the deadline acknowledged an expired reservation")
		}
		if s := state(e, "q", "late"); s != "ready" {
			t.Fatalf("expired job is %s", s)
		}
		e.Cancel(b("q"), [][]byte{b("late")})

		// TOUCH restarts the deadline from now.
		reserve("touched")
		sleep(90 * time.Millisecond)
		if ok, _, _ := e.Touch(b("q"), b("touched")); !ok {
			t.Fatal("touch failed")
		}
		sleep(99 * time.Millisecond)
		if s := state(e, "q", "touched"); s != "reserved" {
			t.Fatalf("touched job %s before its new deadline", s)
		}
		sleep(time.Millisecond)
		if s := state(e, "q", "touched"); s != "ready" {
			t.Fatalf("touched job %s at its new deadline", s)
		}
		e.Cancel(b("q"), [][]byte{b("touched")})

		// NACK: now to the tail, or delayed; a NACK of a job not reserved is 0.
		reserve("nacked")
		if ok, _, _ := e.Nack(b("q"), b("nacked"), 500); !ok {
			t.Fatal("nack failed")
		}
		if ok, _, _ := e.Nack(b("q"), b("nacked"), 0); ok {
			t.Fatal("nack of a delayed job succeeded")
		}
		j, _ := e.Get(b("q"), b("nacked"))
		if j.State != "delayed" || j.Due != e.Now()+500 || j.Deliveries != 1 {
			t.Fatalf("after nack 500: %+v", j)
		}
		sleep(500 * time.Millisecond)
		d, _ := e.Pop([][]byte{b("q")})
		if string(d.ID) != "nacked" || d.Deliveries != 2 {
			t.Fatalf("redelivery after nack: %+v", d)
		}
		if ok, _, _ := e.Touch(b("q"), b("missing")); ok {
			t.Fatal("touch of a missing job")
		}
	})
}

func TestRetryThenDeadLetter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		id := addOpts(t, e, AddArgs{Queue: b("q"), Payload: b("x"), AckTimeout: 10, Retry: 1, DeadLetter: b("dead")})
		for i := 1; i <= 2; i++ {
			d, ok := e.Pop([][]byte{b("q")})
			if !ok || d.Deliveries != uint32(i) {
				t.Fatalf("delivery %d: %+v %v", i, d, ok)
			}
			sleep(10 * time.Millisecond)
		}
		if e.Exists(b("q")) {
			t.Fatal("job still in its queue after RETRY 1 and two deliveries")
		}
		j, ok := e.Get(b("dead"), b(id))
		if !ok || j.State != "ready" || j.Deliveries != 2 {
			t.Fatalf("dead-lettered job: %+v %v", j, ok)
		}
		// In the dead-letter queue a pop removes it: it has no ack timeout.
		if d, _ := e.Pop([][]byte{b("dead")}); string(d.ID) != id || d.Reserved {
			t.Fatalf("pop from dead-letter queue: %+v", d)
		}
		if e.Exists(b("dead")) {
			t.Fatal("dead-letter job reserved")
		}
		st := e.Info().Stats
		if st.DeadLettered != 1 || st.Expired != 2 || st.Delivered != 3 || st.Redelivered != 2 {
			t.Fatalf("stats %+v", st)
		}
	})
}

func TestNackWithoutRetriesLeftDropsOrDeadLetters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		addOpts(t, e, AddArgs{Queue: b("q"), ID: b("once"), Payload: b("x"), AckTimeout: 1000, Retry: 0, DeadLetter: nil})
		e.Pop([][]byte{b("q")})
		if ok, _, _ := e.Nack(b("q"), b("once"), 0); !ok {
			t.Fatal("nack failed")
		}
		if e.Exists(b("q")) || e.Info().Dropped != 1 {
			t.Fatal("RETRY 0 job without dead-letter queue not dropped after a NACK")
		}
	})
}

func TestDeadLetterRenamesTakenID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		addOpts(t, e, AddArgs{Retry: -1, Queue: b("dead"), ID: b("j"), Payload: b("already here")})
		addOpts(t, e, AddArgs{Queue: b("q"), ID: b("j"), Payload: b("failing"), AckTimeout: 5, Retry: 0, DeadLetter: b("dead")})
		e.Pop([][]byte{b("q")})
		sleep(5 * time.Millisecond)
		pk := e.Peek(b("dead"), 10)
		if len(pk) != 2 || string(pk[0].ID) != "j" || string(pk[1].Payload) != "failing" || len(pk[1].ID) != jobs.SIDLen {
			t.Fatalf("dead-letter queue: %q", pk)
		}
	})
}

func TestListPopsIgnoreAckTimeoutAndShareWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{AckTimeout: 1000})
		_, w1, _ := e.PopOrWait([][]byte{b("q")}, PopLeft)
		_, w2, _ := e.PopOrWait([][]byte{b("q")}, PopDelay)
		n, _, err := e.Push(b("q"), [][]byte{b("one"), b("two")}, false)
		if err != nil || n > 2 {
			t.Fatalf("push: %d %v", n, err)
		}
		<-w1.Ready()
		<-w2.Ready()
		d1, _ := w1.Result()
		d2, _ := w2.Result()
		if string(d1.Payload) != "one" || d1.Reserved || string(d2.Payload) != "two" || !d2.Reserved {
			t.Fatalf("oldest waiter first, list pop plain: %+v %+v", d1, d2)
		}
		e.Push(b("l"), [][]byte{b("a"), b("b"), b("c")}, false)
		e.Push(b("l"), [][]byte{b("y"), b("z")}, true)
		if got := e.Range(b("l"), 0, -1); len(got) != 5 || string(got[0]) != "z" || string(got[4]) != "c" {
			t.Fatalf("lrange %q", got)
		}
		if got := e.Range(b("l"), -2, -1); len(got) != 2 || string(got[0]) != "b" {
			t.Fatalf("lrange -2 -1 %q", got)
		}
		ds, _ := e.ListPop(b("l"), 2, true)
		if len(ds) != 2 || string(ds[0].Payload) != "c" || string(ds[1].Payload) != "b" {
			t.Fatalf("rpop 2: %+v", ds)
		}
		if e.Len(b("l")) != 3 {
			t.Fatal("llen")
		}
		addOpts(t, e, AddArgs{Retry: -1, Queue: b("l"), Delay: 1000, Payload: b("delayed")})
		if n, _, _ := e.Del([][]byte{b("l"), b("none")}); n != 1 || e.Exists(b("l")) {
			t.Fatalf("del: %d", n)
		}
	})
}

// TestReservationSurvivesRestart: a reserved job keeps its reservation and
// its absolute ack deadline across a restart; a worker that reconnects can
// ACK, NACK or TOUCH it, and it goes back to its ready list only when the
// deadline passes, as an expiry.
func TestReservationSurvivesRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, logged(fs, FsyncAlways))
		for _, id := range []string{"acked", "nacked", "touched", "expires", "late"} {
			addOpts(t, e, AddArgs{Retry: -1, Queue: b("q"), ID: b(id), Payload: b(id), AckTimeout: 60_000})
		}
		addOpts(t, e, AddArgs{Retry: -1, Queue: b("q"), ID: b("next"), Payload: b("next")})
		deadlines := map[string]int64{}
		for range 5 {
			d, _ := e.Pop([][]byte{b("q")})
			j, _ := e.Get(b("q"), d.ID)
			deadlines[string(d.ID)] = j.AckDeadline
		}
		sleep(10 * time.Second)
		e.WaitDurable(e.journal.Ticket())
		e.Close()

		sleep(20 * time.Second) // down for 20 s: 30 s of each ack timeout are left
		e = mustNew(t, logged(fs, FsyncAlways))
		defer e.Close()
		for id, dl := range deadlines {
			j, ok := e.Get(b("q"), b(id))
			if !ok || j.State != "reserved" || j.AckDeadline != dl || j.Deliveries != 1 {
				t.Fatalf("%s after restart: %+v, want reserved until %d", id, j, dl)
			}
		}
		if st := e.QueueStats(b("q")); st.Ready != 1 || st.Reserved != 5 {
			t.Fatalf("stats after restart: %+v", st)
		}
		if d, ok := e.Pop([][]byte{b("q")}); !ok || string(d.ID) != "next" {
			t.Fatalf("the only ready job after restart is next: %+v %v", d, ok)
		}
		if n, _, _ := e.Ack(b("q"), [][]byte{b("acked")}); n != 1 {
			t.Fatal("ACK after restart")
		}
		if ok, _, _ := e.Nack(b("q"), b("nacked"), 0); !ok {
			t.Fatal("NACK after restart")
		}
		if ok, _, _ := e.Touch(b("q"), b("touched")); !ok {
			t.Fatal("TOUCH after restart")
		}
		if d, ok := e.Pop([][]byte{b("q")}); !ok || string(d.ID) != "nacked" || d.Deliveries != 2 {
			t.Fatalf("the nacked job is ready again: %+v %v", d, ok)
		}
		e.Ack(b("q"), [][]byte{b("nacked")})

		// A millisecond before the deadline nothing came back.
		sleep(time.Duration(deadlines["expires"]-e.Now()-1) * time.Millisecond)
		if d, ok := e.Pop([][]byte{b("q")}); ok {
			t.Fatalf("%s handed out again before its deadline", d.ID)
		}
		// A restart right at the edge keeps the deadline too.
		e.WaitDurable(e.journal.Ticket())
		e.Close()
		e = mustNew(t, logged(fs, FsyncAlways))
		defer e.Close()
		if d, ok := e.Pop([][]byte{b("q")}); ok {
			t.Fatalf("%s handed out again before its deadline (second restart)", d.ID)
		}
		sleep(time.Millisecond)
		got := drain(e, "q")
		if !slices.Equal(got, []string{"expires", "late"}) {
			t.Fatalf("after the deadline: %v, want [expires late] (touched is still held)", got)
		}
		if st := e.QueueStats(b("q")); st.Expired != 2 || st.Reserved != 3 {
			// touched, and the two just popped again
			t.Fatalf("stats after the deadline: %+v", st)
		}
		j, _ := e.Get(b("q"), b("touched"))
		if j.State != "reserved" || j.AckDeadline <= deadlines["touched"] {
			t.Fatalf("touched job: %+v", j)
		}
	})
}

// TestReservationPastDeadlineExpiresAtStart: a reservation whose deadline
// passed while the server was down expires at start, counting as an expiry
// (so RETRY counts it and a job out of retries is dead-lettered).
func TestReservationPastDeadlineExpiresAtStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, logged(fs, FsyncAlways))
		addOpts(t, e, AddArgs{Retry: -1, Queue: b("q"), ID: b("again"), Payload: b("x"), AckTimeout: 1000})
		addOpts(t, e, AddArgs{Retry: 0, Queue: b("q"), ID: b("done"), Payload: b("y"), AckTimeout: 1000, DeadLetter: b("dlq")})
		e.Pop([][]byte{b("q")})
		e.Pop([][]byte{b("q")})
		e.WaitDurable(e.journal.Ticket())
		e.Close()
		sleep(5 * time.Second)
		e = mustNew(t, logged(fs, FsyncAlways))
		defer e.Close()
		if st := e.QueueStats(b("q")); st.Ready != 1 || st.Reserved != 0 || st.Expired != 2 {
			t.Fatalf("stats: %+v", st)
		}
		if got := drain(e, "dlq"); !slices.Equal(got, []string{"y"}) {
			t.Fatalf("dead-lettered: %v", got)
		}
	})
}
