package engine

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/record"
)

func flowLimit(t *testing.T, e *Engine, q string, s LimitSpec) {
	t.Helper()
	if _, err := e.SetLimit(b(q), s); err != nil {
		t.Fatalf("limit %s %+v: %v", q, s, err)
	}
}

func flowReady(w *Waiter) bool {
	select {
	case <-w.Ready():
		return true
	default:
		return false
	}
}

// flowReservedByGroup counts the reserved jobs of each group of a queue.
func flowReservedByGroup(e *Engine, q string) map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]int)
	qi, ok := e.queueFor(b(q), false)
	if !ok {
		return out
	}
	for s := range e.jobs.Len() {
		if j := e.jobs.At(s); j.State == jobs.StateReserved && j.Queue == qi {
			g, _ := e.laneOf(s)
			out[string(g)]++
		}
	}
	return out
}

func TestFlowConcurrency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		flowLimit(t, e, "q", LimitSpec{Concurrency: 2})
		var ids []string
		for i := range 6 {
			ids = append(ids, addOpts(t, e, AddArgs{Queue: b("q"), Payload: b(fmt.Sprint(i)), AckTimeout: 1000, Retry: -1}))
		}
		d1, ok1 := e.Pop([][]byte{b("q")})
		_, ok2 := e.Pop([][]byte{b("q")})
		if !ok1 || !ok2 {
			t.Fatal("the first two pops got nothing")
		}
		if _, ok := e.Pop([][]byte{b("q")}); ok {
			t.Fatal("a third job reserved under CONCURRENCY 2")
		}
		// Every take obeys the gate: a list pop does not bypass it.
		if _, ok := e.ListPop(b("q"), 1, false); ok {
			t.Fatal("LPOP took a job from a queue at its limit")
		}
		if n := e.Len(b("q")); n != 4 {
			t.Fatalf("LLEN %d", n)
		}
		// A waiter is served the moment a reservation ends: ACK...
		_, w, _ := e.PopOrWait([][]byte{b("q")}, PopDelay)
		if w == nil {
			t.Fatal("served at the limit")
		}
		e.Ack(b("q"), [][]byte{d1.ID})
		if !flowReady(w) {
			t.Fatal("ACK made room but the waiter was not served")
		}
		// ...NACK (the job goes back and the room is taken by the waiter)...
		d3, _ := w.Result()
		_, w, _ = e.PopOrWait([][]byte{b("q")}, PopDelay)
		e.Nack(b("q"), d3.ID, 0)
		if !flowReady(w) {
			t.Fatal("NACK made room but the waiter was not served")
		}
		// ...CANCEL, and expiry.
		d4, _ := w.Result()
		_, w, _ = e.PopOrWait([][]byte{b("q")}, PopDelay)
		e.Cancel(b("q"), [][]byte{d4.ID})
		if !flowReady(w) {
			t.Fatal("CANCEL made room but the waiter was not served")
		}
		_, w, _ = e.PopOrWait([][]byte{b("q")}, PopDelay)
		sleep(999 * time.Millisecond)
		if flowReady(w) {
			t.Fatal("served before any reservation ended")
		}
		sleep(time.Millisecond) // the reservations taken at 0 expire
		if !flowReady(w) {
			t.Fatal("expiry made room but the waiter was not served")
		}
		// Both reservations taken at 0 expired; the waiter holds one.
		if info, _ := e.Limit(b("q")); info.Reserved != 1 || info.Concurrency != 2 || info.Tokens != -1 {
			t.Fatalf("limit info %+v", info)
		}
		flowCheck(t, e)
		// TOUCH of a job at the limit does not let another in.
		if _, ok := e.Pop([][]byte{b("q")}); !ok {
			t.Fatal("no pop with room for one more")
		}
		d, _ := w.Result()
		e.Touch(b("q"), d.ID)
		if _, ok := e.Pop([][]byte{b("q")}); ok {
			t.Fatal("TOUCH let a third job in")
		}
		// OFF: the waiters go at once.
		_, w, _ = e.PopOrWait([][]byte{b("q")}, PopDelay)
		flowLimit(t, e, "q", LimitSpec{})
		if !flowReady(w) {
			t.Fatal("OFF did not serve the waiter")
		}
		if _, ok := e.Limit(b("q")); ok {
			t.Fatal("a limit after OFF")
		}
	})
}

func TestFlowGroupConcurrencyNeverExceeded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		flowLimit(t, e, "q", LimitSpec{GroupConcurrency: 2})
		rng := rand.New(rand.NewPCG(5, 6))
		groups := []string{"", "a", "b", "c"}
		var held []Delivery
		for step := range 20_000 {
			switch r := rng.IntN(100); {
			case r < 30:
				g := groups[rng.IntN(len(groups))]
				e.Add(AddArgs{Queue: b("q"), Group: []byte(g), Payload: []byte(g), Priority: uint8(rng.IntN(2)),
					AckTimeout: int64(50 + rng.IntN(100)), Retry: -1})
			case r < 70:
				d, ok := e.Pop([][]byte{b("q")})
				if ok {
					held = append(held, d)
					continue
				}
				// Nothing to take: every group with ready jobs is at its limit.
				e.mu.Lock()
				// (flowCheck holds that a lane is in its ring iff it has
				// ready jobs and its group room: First is 0 iff none has.)
				if qi, ok := e.queueFor(b("q"), false); ok && e.queues[qi].Ready > 0 && e.queues[qi].Order.First() != 0 {
					e.mu.Unlock()
					t.Fatalf("step %d: pop got nothing though a group has ready jobs and room", step)
				}
				e.mu.Unlock()
			case r < 85 && len(held) > 0:
				i := rng.IntN(len(held))
				d := held[i]
				held = append(held[:i], held[i+1:]...)
				if rng.IntN(2) == 0 {
					e.Ack(b("q"), [][]byte{d.ID})
				} else {
					e.Nack(b("q"), d.ID, int64(rng.IntN(2)*20))
				}
			default:
				sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
			}
			for g, n := range flowReservedByGroup(e, "q") {
				if n > 2 {
					t.Fatalf("step %d: group %q has %d reserved jobs under GROUPCONCURRENCY 2", step, g, n)
				}
			}
			if step%500 == 0 {
				flowCheck(t, e)
			}
		}
		flowCheck(t, e)
	})
}

// TestFlowRateExactCount: RATE 100 per 1000 ms, pops at every millisecond:
// 100 go at 0, then 100 as each window's tokens come back, never more
// than 100 in any 1000 ms.
func TestFlowRateExactCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		flowLimit(t, e, "q", LimitSpec{Rate: 100, Per: 1000})
		for i := range 1000 {
			add(t, e, "q", 0, fmt.Sprint(i))
		}
		var at []int64
		start := e.Now()
		for ms := range 3500 {
			for {
				if _, ok := e.Pop([][]byte{b("q")}); !ok {
					break
				}
				at = append(at, int64(ms))
			}
			if ms == 10 {
				if info, _ := e.Limit(b("q")); info.Tokens != 0 || info.Rate != 100 || info.Per != 1000 {
					t.Fatalf("limit info %+v", info)
				}
			}
			sleep(time.Millisecond)
		}
		if len(at) != 400 {
			t.Fatalf("%d jobs in 3500 ms, want 400", len(at))
		}
		for i, ms := range at {
			if want := int64(i/100) * 1000; ms != want {
				t.Fatalf("job %d went at %d ms, want %d", i, ms, want)
			}
		}
		// A waiter is served when the next token comes back, by the timer.
		_, w, _ := e.PopOrWait([][]byte{b("q")}, PopDelay)
		if w == nil {
			t.Fatal("served with the bucket empty")
		}
		sleep(time.Duration(start+4000-e.Now()-1) * time.Millisecond)
		if flowReady(w) {
			t.Fatal("served before a token came back")
		}
		sleep(time.Millisecond)
		if !flowReady(w) {
			t.Fatal("not served when a token came back")
		}
		// Every take spends a token: list pops and moves too.
		for range 99 {
			if _, ok, _ := e.Move(b("q"), b("other"), MoveEnds{}); !ok {
				t.Fatal("move with tokens left")
			}
		}
		if _, ok := e.ListPop(b("q"), 1, true); ok {
			t.Fatal("RPOP past the rate")
		}
	})
}

func TestFlowLimitedKeyIsSkipped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		flowLimit(t, e, "a", LimitSpec{Concurrency: 1})
		addOpts(t, e, AddArgs{Queue: b("a"), Payload: b("a1"), AckTimeout: 1000, Retry: -1})
		addOpts(t, e, AddArgs{Queue: b("a"), Payload: b("a2"), AckTimeout: 1000, Retry: -1})
		da, _ := e.Pop([][]byte{b("a")})
		add(t, e, "b", 0, "b1")
		// a is at its limit: the pop naming both takes from b.
		if p, ok := popPayload(e, "a", "b"); !ok || p != "b1" {
			t.Fatalf("pop a b: %q %v", p, ok)
		}
		// Parked on both; b gets a job: served from b while a is held.
		_, w1, _ := e.PopOrWait([][]byte{b("a"), b("b")}, PopDelay)
		_, w2, _ := e.PopOrWait([][]byte{b("a")}, PopDelay)
		if w1 == nil || w2 == nil {
			t.Fatal("served while a is at its limit and b is empty")
		}
		add(t, e, "b", 0, "b2")
		if !flowReady(w1) {
			t.Fatal("the waiter on a and b was not served by b")
		}
		if d, _ := w1.Result(); string(d.Payload) != "b2" {
			t.Fatalf("w1 got %q", d.Payload)
		}
		if flowReady(w2) {
			t.Fatal("w2 served from a at its limit")
		}
		// Room on a: its waiter gets a2.
		e.Ack(b("a"), [][]byte{da.ID})
		if !flowReady(w2) {
			t.Fatal("room freed on a did not wake its waiter")
		}
		if d, _ := w2.Result(); string(d.Payload) != "a2" {
			t.Fatalf("w2 got %q", d.Payload)
		}
	})
}

// TestFlowGroupLimitDoesNotBlockTheFIFO: the oldest waiter cannot be served
// by the held group, but the next group's jobs still go to it.
func TestFlowGroupLimitDoesNotBlockTheFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		flowLimit(t, e, "q", LimitSpec{GroupConcurrency: 1})
		for _, g := range []string{"a", "a", "a"} {
			addOpts(t, e, AddArgs{Queue: b("q"), Group: b(g), Payload: b(g), AckTimeout: 1000, Retry: -1})
		}
		da, _ := e.Pop([][]byte{b("q")})
		_, w1, _ := e.PopOrWait([][]byte{b("q")}, PopDelay)
		_, w2, _ := e.PopOrWait([][]byte{b("q")}, PopLeft)
		if w1 == nil || w2 == nil {
			t.Fatal("served from a held group")
		}
		if got := flowRange(e, "q"); len(got) != 2 {
			t.Fatalf("LRANGE of held jobs: %q", got)
		}
		addOpts(t, e, AddArgs{Queue: b("q"), Group: b("b"), Payload: b("b"), AckTimeout: 1000, Retry: -1})
		if !flowReady(w1) || flowReady(w2) {
			t.Fatal("group b's job did not go to the oldest waiter")
		}
		e.Ack(b("q"), [][]byte{da.ID})
		if !flowReady(w2) {
			t.Fatal("group a's room did not wake the next waiter")
		}
		flowCheck(t, e)
	})
}

func TestFlowLimitOutlivesItsQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		flowLimit(t, e, "q", LimitSpec{Concurrency: 1, GroupConcurrency: 1})
		if _, ok := e.queueFor(b("q"), false); ok {
			t.Fatal("a limit made a queue")
		}
		check := func(what string) {
			t.Helper()
			addOpts(t, e, AddArgs{Queue: b("q"), Payload: b("1"), AckTimeout: 1000, Retry: -1})
			addOpts(t, e, AddArgs{Queue: b("q"), Payload: b("2"), AckTimeout: 1000, Retry: -1})
			if _, ok := e.Pop([][]byte{b("q")}); !ok {
				t.Fatalf("%s: first pop", what)
			}
			if _, ok := e.Pop([][]byte{b("q")}); ok {
				t.Fatalf("%s: the limit is gone", what)
			}
			flowCheck(t, e)
		}
		check("a new queue")
		e.Del([][]byte{b("q")})
		check("after DEL")
		e.Flush()
		check("after FLUSHALL")
	})
}

// flowChurn applies random writes that use groups, priorities and limits.
func flowChurn(t *testing.T, e *Engine, rng *rand.Rand, n int, ids *[]string) {
	t.Helper()
	for i := range n {
		q := []byte(fmt.Sprintf("f%d", rng.IntN(3)))
		var tk uint64
		switch r := rng.IntN(20); {
		case r < 9:
			a := AddArgs{Queue: q, Payload: []byte(fmt.Sprint("p", i)), Delay: []int64{0, 0, 0, 30, 500}[rng.IntN(5)],
				AckTimeout: []int64{0, 100, 100_000}[rng.IntN(3)], Retry: int64(rng.IntN(3)) - 1,
				Priority: uint8(rng.IntN(3) * rng.IntN(4))}
			if g := rng.IntN(5); g > 0 {
				a.Group = []byte(fmt.Sprint("g", g))
			}
			if rng.IntN(5) == 0 {
				a.DeadLetter = []byte("fdlq")
			}
			res, err := e.Add(a)
			if err != nil {
				t.Fatal(err)
			}
			*ids = append(*ids, string(res.ID))
			tk = res.Ticket
		case r < 14:
			if d, ok := e.Pop([][]byte{q}); ok {
				tk = d.Ticket
			}
		case r < 15:
			if ds, ok := e.ListPop(q, 1, rng.IntN(2) == 0); ok {
				tk = ds[0].Ticket
			}
		case r < 16:
			if d, ok, _ := e.Move(q, []byte(fmt.Sprintf("f%d", rng.IntN(3))), MoveEnds{FromRight: rng.IntN(2) == 0}); ok {
				tk = d.Ticket
			}
		case r < 18 && len(*ids) > 0:
			id := []byte((*ids)[rng.IntN(len(*ids))])
			switch rng.IntN(3) {
			case 0:
				_, tk, _ = e.Ack(q, [][]byte{id})
			case 1:
				_, tk, _ = e.Nack(q, id, []int64{0, 70}[rng.IntN(2)])
			default:
				_, tk, _ = e.Cancel(q, [][]byte{id})
			}
		case r < 19:
			s := LimitSpec{}
			if rng.IntN(4) > 0 {
				s = LimitSpec{Concurrency: int64(rng.IntN(2) * (1 + rng.IntN(5))), GroupConcurrency: int64(rng.IntN(2) * (1 + rng.IntN(2)))}
				if rng.IntN(2) == 0 {
					s.Rate, s.Per = int64(1+rng.IntN(20)), int64(1+rng.IntN(100))
				}
			}
			var err error
			if tk, err = e.SetLimit(q, s); err != nil {
				t.Fatal(err)
			}
		default:
			sleep(time.Duration(rng.IntN(40)) * time.Millisecond)
		}
		if err := e.WaitDurable(tk); err != nil {
			t.Fatal(err)
		}
	}
}

// flowCanon rewrites dump's ready lists lane by lane (priority from high to
// low, then group), keeping each lane's order: the state without the
// rotation of the rings.
func flowCanon(d string) string {
	lines := strings.Split(d, "\n")
	for i, line := range lines {
		pre, rest, ok := strings.Cut(line, ": ready ")
		if !ok {
			continue
		}
		ready, tail, _ := strings.Cut(rest, " | delayed")
		jobs := strings.Fields(ready)
		lane := func(j string) (int, string) {
			k := strings.LastIndexByte(j, '[')
			if k < 0 {
				return 0, ""
			}
			g, p, _ := strings.Cut(strings.TrimSuffix(j[k+1:], "]"), "/")
			n, _ := strconv.Atoi(p)
			return n, g
		}
		slices.SortStableFunc(jobs, func(a, b string) int {
			pa, ga := lane(a)
			pb, gb := lane(b)
			return cmp.Or(cmp.Compare(pb, pa), strings.Compare(ga, gb))
		})
		lines[i] = pre + ": ready " + strings.Join(jobs, " ") + " | delayed" + tail
	}
	return strings.Join(lines, "\n")
}

func TestFlowRestartAndRewriteKeepEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		rng := rand.New(rand.NewPCG(11, 12))
		var ids []string
		e := mustNew(t, exact(fs, FsyncAlways))
		for round := range 6 {
			flowChurn(t, e, rng, 600, &ids)
			flowCheck(t, e)
			if round%2 == 1 {
				if err := e.Rewrite(); err != nil {
					t.Fatal(err)
				}
				flowChurn(t, e, rng, 100, &ids) // writes while it runs
				waitRewrite(e)
			}
			before := dump(e)
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			e = mustNew(t, exact(fs, FsyncAlways))
			after := dump(e)
			if round%2 == 1 {
				// A rewrite that ran under pops may resume the round-robin
				// at another group (see docs/decisions/flow-control.md): each group's jobs,
				// priorities and everything else are exact.
				before, after = flowCanon(before), flowCanon(after)
			}
			if after != before {
				e.Close()
				t.Fatalf("round %d: state after restart differs:\n%s", round, diffLines(strings.ReplaceAll(before, " ", "\n"), strings.ReplaceAll(after, " ", "\n")))
			}
			flowCheck(t, e)
		}
		if e.limits.Len() == 0 {
			t.Fatal("the churn set no limit")
		}
		e.Close()
	})
}

func TestFlowFollowersAndSnapshot(t *testing.T) {
	// A snapshot carries limits, groups, priorities and the rings' order.
	followersAgree(t, 13, flowChurn, replDump, "limit f", "prio=")
}

func TestFlowInTransaction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, exact(fs, FsyncAlways))
		for i := range 3 {
			addOpts(t, e, AddArgs{Queue: b("q"), Payload: b(fmt.Sprint(i)), AckTimeout: 1000, Retry: -1, Group: b("g")})
		}
		var got []bool
		ticket, err := e.Atomic(func(tx *Engine) {
			if _, err := tx.SetLimit(b("q"), LimitSpec{GroupConcurrency: 1}); err != nil {
				t.Error(err)
			}
			for range 2 {
				_, ok := tx.Pop([][]byte{b("q")})
				got = append(got, ok)
			}
			if info, ok := tx.Limit(b("q")); !ok || info.GroupConcurrency != 1 || info.Reserved != 1 {
				t.Errorf("limit inside: %+v %v", info, ok)
			}
		})
		if err != nil || e.WaitDurable(ticket) != nil {
			t.Fatal(err)
		}
		if !got[0] || got[1] {
			t.Fatalf("pops inside the transaction: %v, want [true false]", got)
		}
		before := dump(e)
		e.Close()
		e = mustNew(t, exact(fs, FsyncAlways))
		defer e.Close()
		if after := dump(e); after != before {
			t.Fatalf("after restart\nbefore:\n%s\nafter:\n%s", before, after)
		}
		if _, ok := e.Pop([][]byte{b("q")}); ok {
			t.Fatal("the group limit did not survive the restart")
		}
	})
}

func TestFlowLimitRecord(t *testing.T) {
	r := record.Rec{Op: record.Limit, Time: 1234, Queue: b("q"), Limit: LimitSpec{Concurrency: 3, Rate: 100, Per: 1000, GroupConcurrency: 2}}
	enc := r.Encode(nil)
	var got record.Rec
	if err := got.Decode(enc); err != nil || got.Op != record.Limit || got.Time != 1234 || string(got.Queue) != "q" || got.Limit != r.Limit {
		t.Fatalf("decode: %+v %v", got, err)
	}
	off := record.Rec{Op: record.Limit, Time: 1, Queue: b("q")}
	if err := got.Decode(off.Encode(nil)); err != nil || !got.Limit.IsZero() {
		t.Fatalf("OFF: %+v %v", got, err)
	}
	bad := record.Rec{Op: record.Limit, Time: 1, Queue: b("q"), Limit: LimitSpec{Rate: 5}} // RATE without its window
	if err := got.Decode(bad.Encode(nil)); err == nil {
		t.Fatal("a rate with no window decoded")
	}
	if err := got.Decode(append(enc, 0)); err == nil {
		t.Fatal("trailing bytes decoded")
	}
}
