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

// churnMove is churn's share of list moves, LREM and (rarely) FLUSHALL, so
// that the restart, rewrite and failed-write tests replay them too.
// churnKeepsState keeps churnMove from flushing everything.
var churnKeepsState bool

func churnMove(t *testing.T, e *Engine, rng *rand.Rand, q []byte) {
	t.Helper()
	var tk uint64
	switch r := rng.IntN(50); {
	case r == 0 && !churnKeepsState:
		tk, _ = e.Flush()
	case r < 10:
		_, tk, _ = e.Rem(q, int64(rng.IntN(5))-2, []byte(fmt.Sprint("p", rng.IntN(400))))
	default:
		dst := []byte(fmt.Sprintf("q%d", rng.IntN(3)))
		d, ok, err := e.Move(q, dst, MoveEnds{FromRight: rng.IntN(2) == 0, ToRight: rng.IntN(2) == 0})
		if err != nil || !ok {
			return
		}
		tk = d.Ticket
	}
	if err := e.WaitDurable(tk); err != nil {
		t.Fatal(err)
	}
}

func payloads(e *Engine, q string) []string {
	var out []string
	for _, p := range e.Range(b(q), 0, -1) {
		out = append(out, string(p))
	}
	return out
}

func TestMoveKeepsTheJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, logged(fs, FsyncAlways))
		defer func() { e.Close() }()
		addOpts(t, e, AddArgs{Retry: 2, Queue: b("src"), ID: b("a"), Payload: b("A"), AckTimeout: 5000, DeadLetter: b("dlq")})
		addOpts(t, e, AddArgs{Retry: -1, Queue: b("src"), ID: b("b"), Payload: b("B")})
		addOpts(t, e, AddArgs{Retry: -1, Queue: b("src"), ID: b("c"), Payload: b("C")})
		addOpts(t, e, AddArgs{Retry: -1, Queue: b("dst"), ID: b("b"), Payload: b("other b")})

		before := e.journal.Ticket()
		d, ok, err := e.Move(b("src"), b("dst"), MoveEnds{FromRight: false, ToRight: true})
		if err != nil || !ok || string(d.Payload) != "A" || string(d.ID) != "a" {
			t.Fatalf("LMOVE src dst LEFT RIGHT: %+v %v %v", d, ok, err)
		}
		if e.journal.Ticket() != before+1 {
			t.Fatalf("a move logged %d records, want one", e.journal.Ticket()-before)
		}
		j, _ := e.Get(b("dst"), b("a"))
		if j.State != "ready" || string(j.Payload) != "A" || j.Deliveries != 0 {
			t.Fatalf("moved job in dst: %+v", j)
		}
		if _, ok := e.Get(b("src"), b("a")); ok {
			t.Fatal("the moved job is still in src")
		}
		// b's id is taken in dst: it gets a new server id there.
		d, _, _ = e.Move(b("src"), b("dst"), MoveEnds{ToRight: false})
		if string(d.Payload) != "B" || string(d.ID) == "b" || len(d.ID) != jobs.SIDLen {
			t.Fatalf("move onto a taken id: %+v", d)
		}
		if got := payloads(e, "dst"); !slices.Equal(got, []string{"B", "other b", "A"}) {
			t.Fatalf("dst: %v", got)
		}
		// src == dst rotates.
		e.Move(b("dst"), b("dst"), MoveEnds{FromRight: true, ToRight: false})
		if got := payloads(e, "dst"); !slices.Equal(got, []string{"A", "B", "other b"}) {
			t.Fatalf("rotated: %v", got)
		}
		e.Move(b("src"), b("src"), MoveEnds{})
		if got := payloads(e, "src"); !slices.Equal(got, []string{"C"}) {
			t.Fatalf("a one-job rotation: %v", got)
		}
		if _, ok, _ := e.Move(b("none"), b("dst"), MoveEnds{}); ok || e.Exists(b("none")) {
			t.Fatal("a move from a missing queue")
		}

		// The job kept its options: a DELAY.POP from dst reserves it, and
		// its retry limit and dead-letter queue still apply.
		for range 3 {
			for {
				d, ok := e.Pop([][]byte{b("dst")})
				if !ok {
					t.Fatal("dst ran dry before a was dead-lettered")
				}
				if string(d.ID) == "a" {
					if !d.Reserved {
						t.Fatal("the moved job lost its ack timeout")
					}
					break
				}
			}
			sleep(5 * time.Second)
		}
		if got := payloads(e, "dlq"); !slices.Equal(got, []string{"A"}) {
			t.Fatalf("dead-lettered after its retries: %v", got)
		}

		// Replay rebuilds the same state.
		addOpts(t, e, AddArgs{Retry: -1, Queue: b("src"), ID: b("d"), Payload: b("D")})
		e.Move(b("src"), b("x"), MoveEnds{})
		want := dump(e)
		e.WaitDurable(e.journal.Ticket())
		e.Close()
		e = mustNew(t, logged(fs, FsyncAlways))
		if got := dump(e); got != want {
			t.Fatalf("after restart:\n%s\nwant:\n%s", got, want)
		}
	})
}

// TestBlockingMoveSharesTheFIFO: a BLMOVE waiter waits in src's FIFO with
// the other blocking pops, oldest first; the job is moved under the lock
// when it arrives, so a client that leaves does not lose it.
func TestBlockingMoveSharesTheFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		wPop := waitFor(t, e, PopLeft, "src")
		_, wMove, err := e.MoveOrWait(b("src"), b("work"), MoveEnds{ToRight: true})
		if err != nil || wMove == nil {
			t.Fatal("MoveOrWait on an empty queue parks", err)
		}
		if n, _, _ := e.Push(b("src"), [][]byte{b("one"), b("two"), b("three")}, false); n != 3 {
			t.Fatalf("push: %d", n)
		}
		if p := served(t, wPop); p != "one" {
			t.Fatalf("the oldest waiter (BLPOP) got %q", p)
		}
		d, ok := wMove.Result()
		if !ok || string(d.Payload) != "two" {
			t.Fatalf("BLMOVE waiter: %+v %v", d, ok)
		}
		if got := payloads(e, "work"); !slices.Equal(got, []string{"two"}) {
			t.Fatalf("work: %v", got)
		}
		if got := payloads(e, "src"); !slices.Equal(got, []string{"three"}) {
			t.Fatalf("src: %v", got)
		}
		// Its client left after the job was moved: the move stands.
		if d2, ok := e.CancelWait(wMove); !ok || e.Requeue(d2) {
			t.Fatal("a moved job was handed back")
		}
		if got := payloads(e, "work"); !slices.Equal(got, []string{"two"}) {
			t.Fatalf("work after the client left: %v", got)
		}

		// A waiter that times out gets nothing and leaves nothing behind.
		_, w, _ := e.MoveOrWait(b("empty"), b("work"), MoveEnds{})
		if _, ok := e.CancelWait(w); ok || e.Exists(b("empty")) {
			t.Fatal("a cancelled move waiter")
		}

		// A move waiter on its own queue, and a DELAY.POP waiter behind it:
		// the move goes first and puts the job back, then the pop takes it.
		_, w1, _ := e.MoveOrWait(b("r"), b("r"), MoveEnds{})
		w2 := waitFor(t, e, PopDelay, "r")
		e.Push(b("r"), [][]byte{b("x")}, false)
		if d, ok := w1.Result(); !ok || string(d.Payload) != "x" {
			t.Fatalf("rotating waiter: %+v", d)
		}
		if p := served(t, w2); p != "x" || e.Exists(b("r")) {
			t.Fatalf("the pop behind it got %q", p)
		}

		// A job moved into a queue with waiters serves them.
		w3 := waitFor(t, e, PopLeft, "dst2")
		e.Move(b("src"), b("dst2"), MoveEnds{})
		if p := served(t, w3); p != "three" {
			t.Fatalf("dst's waiter got %q", p)
		}
	})
}

func TestRem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, logged(fs, FsyncAlways))
		defer func() { e.Close() }()
		push := func(vals ...string) {
			var ps [][]byte
			for _, v := range vals {
				ps = append(ps, b(v))
			}
			e.Push(b("l"), ps, false)
		}
		push("a", "x", "b", "x", "c", "x", "d", "x")
		addOpts(t, e, AddArgs{Retry: -1, Queue: b("l"), Payload: b("x"), Delay: 1000}) // not ready: stays
		for _, c := range []struct {
			count int64
			n     int
			left  []string
		}{
			{1, 1, []string{"a", "b", "x", "c", "x", "d", "x"}},
			{-2, 2, []string{"a", "b", "x", "c", "d"}},
			{0, 1, []string{"a", "b", "c", "d"}},
			{0, 0, []string{"a", "b", "c", "d"}},
		} {
			if n, _, _ := e.Rem(b("l"), c.count, b("x")); n != c.n {
				t.Fatalf("LREM l %d x: %d, want %d", c.count, n, c.n)
			}
			if got := payloads(e, "l"); !slices.Equal(got, c.left) {
				t.Fatalf("after LREM l %d x: %v, want %v", c.count, got, c.left)
			}
		}
		if st := e.QueueStats(b("l")); st.Delayed != 1 {
			t.Fatalf("LREM touched a delayed job: %+v", st)
		}
		if n, _, _ := e.Rem(b("none"), 0, b("x")); n != 0 {
			t.Fatal("LREM of a missing key")
		}
		want := dump(e)
		e.WaitDurable(e.journal.Ticket())
		e.Close()
		e = mustNew(t, logged(fs, FsyncAlways))
		if got := dump(e); got != want {
			t.Fatalf("after restart:\n%s\nwant:\n%s", got, want)
		}
		// The last job going takes the queue with it.
		e.Del([][]byte{b("l")})
		push("only")
		if n, _, _ := e.Rem(b("l"), 0, b("only")); n != 1 || e.Exists(b("l")) {
			t.Fatal("LREM of the last job")
		}
	})
}
