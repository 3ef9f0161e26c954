package engine

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayd/delayd/aof"
)

// reasonOf is the failure reason of the job in slot s (jobs.Table.Reason),
// for the dumps of the log and replication tests.
func (e *Engine) reasonOf(s uint32) string { return e.jobs.Reason(s) }

func reasonIs(t *testing.T, e *Engine, q, id, want string) {
	t.Helper()
	got, ok := e.Reason(b(q), b(id))
	if !ok {
		t.Fatalf("%s/%s: no such job", q, id)
	}
	if j, _ := e.Get(b(q), b(id)); j.Reason != got {
		t.Fatalf("%s/%s: Get says %q, Reason %q", q, id, j.Reason, got)
	}
	if got != want {
		t.Fatalf("%s/%s: reason %q, want %q", q, id, got, want)
	}
}

func nackReason(t *testing.T, e *Engine, q, id string, delay int64, reason string) {
	t.Helper()
	if ok, _, err := e.NackReason(b(q), b(id), delay, []byte(reason)); !ok || err != nil {
		t.Fatalf("nack %s/%s: %v %v", q, id, ok, err)
	}
}

// A failure reason travels with its job: through a retry, an expiry (which
// gives "ack timeout"), the dead-letter queue and DELAY.REQUEUE, and it is
// the same after a restart and after a rewrite.
func TestReasonThroughRetriesDeadLetterAndRequeue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, exact(fs, FsyncAlways))
		defer func() { e.Close() }()
		restart := func(what string, rewrite bool) {
			t.Helper()
			if rewrite {
				if err := e.Rewrite(); err != nil {
					t.Fatal(err)
				}
				opsWaitRewrite(e)
			}
			before := dump(e)
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			e = mustNew(t, exact(fs, FsyncAlways))
			if after := dump(e); after != before {
				t.Fatalf("%s:\n%s", what, diffLines(before, after))
			}
		}
		addOpts(t, e, AddArgs{Queue: b("q"), ID: b("j"), Payload: b("p"), AckTimeout: 1000, Retry: 2, DeadLetter: b("dlq")})
		reasonIs(t, e, "q", "j", "")

		mustPop(t, e, "q")
		nackReason(t, e, "q", "j", 0, "db down")
		reasonIs(t, e, "q", "j", "db down")
		restart("after a NACK with a reason", false)
		reasonIs(t, e, "q", "j", "db down")

		// A NACK without a reason keeps the last one; a delayed retry too.
		mustPop(t, e, "q")
		nackReason(t, e, "q", "j", 500, "")
		reasonIs(t, e, "q", "j", "db down")
		if st := state(e, "q", "j"); st != "delayed" {
			t.Fatalf("after NACK 500: %s", st)
		}
		restart("after a delayed NACK", true)
		reasonIs(t, e, "q", "j", "db down")

		// The third and last delivery expires: dead-lettered with the
		// expiry's reason.
		sleep(500 * time.Millisecond)
		mustPop(t, e, "q")
		sleep(1000 * time.Millisecond)
		if st := state(e, "dlq", "j"); st != "ready" {
			t.Fatalf("not dead-lettered: %s", st)
		}
		reasonIs(t, e, "dlq", "j", ReasonAckTimeout)
		restart("after an expiry dead-lettered it", false)
		reasonIs(t, e, "dlq", "j", ReasonAckTimeout)

		// Requeued, it keeps the reason; NACKed with a reason again and out
		// of retries (RETRY 0 now), it is dead-lettered with that one.
		requeueOK(t, e, "dlq", "j", "", 1)
		reasonIs(t, e, "q", "j", ReasonAckTimeout)
		restart("after a requeue", true)
		reasonIs(t, e, "q", "j", ReasonAckTimeout)
		for range 3 {
			mustPop(t, e, "q")
			nackReason(t, e, "q", "j", 0, "bad input: field x")
		}
		reasonIs(t, e, "dlq", "j", "bad input: field x")
		restart("after a NACK dead-lettered it", false)
		restart("and a rewrite", true)
		reasonIs(t, e, "dlq", "j", "bad input: field x")

		// A list pop ends the job: its reason goes with it.
		if ds, ok := e.ListPop(b("dlq"), 1, false); !ok || len(ds) != 1 {
			t.Fatal("list pop of the dead letter")
		}
		if _, ok := e.Reason(b("dlq"), b("j")); ok {
			t.Fatal("the popped job still has a reason")
		}
		e.mu.Lock()
		left := len(e.jobs.Reasons)
		e.mu.Unlock()
		if left != 0 {
			t.Fatalf("%d reasons left in the side table after every job ended", left)
		}
	})
}

// The reason table holds only NACKs' texts: an expiry's reason is a flag,
// and a job's entry goes when the job does (ACK, cancel, DEL, REPLACE).
func TestReasonSideTableIsFreed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		size := func() int {
			e.mu.Lock()
			defer e.mu.Unlock()
			return len(e.jobs.Reasons)
		}
		for i, end := range []func(id string){
			func(id string) { e.Ack(b("q"), [][]byte{b(id)}) },
			func(id string) { e.Cancel(b("q"), [][]byte{b(id)}) },
			func(id string) { e.Del([][]byte{b("q")}) },
			func(id string) {
				addOpts(t, e, AddArgs{Queue: b("q"), ID: b(id), Payload: b("new"), Replace: true, Retry: -1})
			},
		} {
			id := string(rune('a' + i))
			addOpts(t, e, AddArgs{Queue: b("q"), ID: b(id), Payload: b("p"), AckTimeout: 100, Retry: -1})
			mustPop(t, e, "q")
			nackReason(t, e, "q", id, 0, "boom")
			mustPop(t, e, "q")
			if size() != 1 {
				t.Fatalf("case %d: %d entries", i, size())
			}
			end(id)
			for range 100 {
				if size() == 0 {
					break
				}
				sleep(time.Millisecond) // DEL frees in the background
			}
			if size() != 0 {
				t.Fatalf("case %d: the ended job's reason is still held", i)
			}
			if r, _ := e.Reason(b("q"), b(id)); r != "" {
				t.Fatalf("case %d: a replaced job has the old reason %q", i, r)
			}
			e.Del([][]byte{b("q")})
		}
		// Many expiries: no entry at all.
		for i := range 100 {
			addOpts(t, e, AddArgs{Queue: b("x"), Payload: b("p"), AckTimeout: 10, Retry: -1, ID: b(strings.Repeat("x", i+1))})
			mustPop(t, e, "x")
		}
		sleep(10 * time.Millisecond)
		reasonIs(t, e, "x", "x", ReasonAckTimeout)
		if size() != 0 {
			t.Fatalf("expiries took %d entries", size())
		}
	})
}

func TestReasonTooLong(t *testing.T) {
	e := newEngine(t, Options{})
	addOpts(t, e, AddArgs{Queue: b("q"), ID: b("j"), Payload: b("p"), AckTimeout: 1000, Retry: -1})
	mustPop(t, e, "q")
	if _, _, err := e.NackReason(b("q"), b("j"), 0, make([]byte, MaxReason+1)); !errors.Is(err, ErrReasonTooLong) {
		t.Fatalf("a reason of %d bytes: %v", MaxReason+1, err)
	}
	if st := state(e, "q", "j"); st != "reserved" {
		t.Fatalf("a refused NACK changed the job: %s", st)
	}
	nackReason(t, e, "q", "j", 0, strings.Repeat("r", MaxReason))
}

// A leader's NACK reasons reach its followers and its snapshot.
func TestReasonFollowersAndSnapshot(t *testing.T) {
	followersAgree(t, 5, func(t *testing.T, e *Engine, rng *rand.Rand, n int, ids *[]string) {
		t.Helper()
		for i := range n {
			id := []byte(strings.Repeat("i", 1+rng.IntN(20)))
			addOpts(t, e, AddArgs{Queue: b("f"), ID: id, Payload: b("p"), AckTimeout: 50, Retry: 1, DeadLetter: b("fdl"), Replace: true})
			if d, ok := e.Pop([][]byte{b("f")}); ok && d.Reserved && i%3 != 0 {
				e.NackReason(b("f"), d.ID, int64(rng.IntN(2)*30), []byte("why "+string(d.ID)))
			}
		}
	}, replDump, "reason=")
}

// A list pop removes the job; handed back because its client left, the job
// comes back with its reason (Delivery carries it).
func TestReasonSurvivesAHandBack(t *testing.T) {
	e := newEngine(t, Options{})
	addOpts(t, e, AddArgs{Queue: b("q"), ID: b("j"), Payload: b("p"), AckTimeout: 1000, Retry: -1})
	mustPop(t, e, "q")
	nackReason(t, e, "q", "j", 0, "flaky")
	ds, ok := e.ListPop(b("q"), 1, false)
	if !ok || len(ds) != 1 {
		t.Fatal("list pop")
	}
	if _, ok := e.Reason(b("q"), b("j")); ok {
		t.Fatal("a list pop left the job")
	}
	if !e.Requeue(ds[0]) {
		t.Fatal("the hand-back was refused")
	}
	reasonIs(t, e, "q", "j", "flaky")
}
