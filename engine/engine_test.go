package engine

import (
	"bytes"
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/record"
)

// Every test runs inside a synctest bubble: time.Now and the engine's timer
// use a fake clock that jumps when every goroutine is blocked, so waiting a
// minute takes no time and each step lands on an exact millisecond.

func newEngine(t *testing.T, opts Options) *Engine {
	t.Helper()
	e, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func b(s string) []byte { return []byte(s) }

func add(t *testing.T, e *Engine, q string, delay int64, payload string) string {
	t.Helper()
	res, err := e.Add(AddArgs{Queue: b(q), Delay: delay, Payload: b(payload)})
	if err != nil || !res.Added {
		t.Fatalf("add %s %d %s: %+v err=%v", q, delay, payload, res, err)
	}
	return string(res.ID)
}

func addAt(t *testing.T, e *Engine, q string, at int64, id, payload string) {
	t.Helper()
	if res, err := e.Add(AddArgs{Queue: b(q), At: true, Due: at, ID: b(id), Payload: b(payload)}); err != nil || !res.Added {
		t.Fatalf("addat %s %d %s: %+v err=%v", q, at, id, res, err)
	}
}

// sleep advances the fake clock and lets the engine's goroutine run.
func sleep(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

func popPayload(e *Engine, qs ...string) (string, bool) {
	var names [][]byte
	for _, q := range qs {
		names = append(names, b(q))
	}
	d, ok := e.Pop(names)
	return string(d.Payload), ok
}

func drain(e *Engine, q string) []string {
	var out []string
	for {
		p, ok := popPayload(e, q)
		if !ok {
			return out
		}
		out = append(out, p)
	}
}

func TestNeverEarlyAndOnTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		for _, delay := range []int64{1, 63, 64, 65, 4095, 4096, 262144, 3_600_000} {
			add(t, e, "q", delay, fmt.Sprint(delay))
			sleep(time.Duration(delay-1) * time.Millisecond)
			if p, ok := popPayload(e, "q"); ok {
				t.Fatalf("delay %d: popped %q a millisecond early", delay, p)
			}
			sleep(time.Millisecond)
			if p, ok := popPayload(e, "q"); !ok || p != fmt.Sprint(delay) {
				t.Fatalf("delay %d: at due time got %q %v", delay, p, ok)
			}
		}
	})
}

func TestTickLargerThanOneNeverEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{Tick: 10})
		add(t, e, "q", 3, "x")
		sleep(2 * time.Millisecond)
		if _, ok := popPayload(e, "q"); ok {
			t.Fatal("popped before due with tick 10")
		}
		sleep(10 * time.Millisecond)
		if p, ok := popPayload(e, "q"); !ok || p != "x" {
			t.Fatalf("not ready by the end of its tick: %q %v", p, ok)
		}
	})
}

func TestEqualDueKeepsAddOrderAcrossLevels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		due := e.Now() + 300_000
		// "a" waits five minutes in a high level; the others are added later,
		// closer to the due time, into lower levels, all for the same ms.
		addAt(t, e, "q", due, "a", "a")
		sleep(299 * time.Second)
		addAt(t, e, "q", due, "b", "b")
		addAt(t, e, "q", due-1, "early", "early")
		sleep(999 * time.Millisecond)
		addAt(t, e, "q", due, "c", "c")
		sleep(time.Millisecond)
		got := drain(e, "q")
		want := []string{"early", "a", "b", "c"}
		if !slices.Equal(got, want) {
			t.Fatalf("order %v, want %v", got, want)
		}
	})
}

func TestReadyNowJoinsTailAfterDueJobs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		add(t, e, "q", 5, "delayed")
		add(t, e, "q", 0, "now1")
		sleep(10 * time.Millisecond)
		addAt(t, e, "q", e.Now()-1000, "past", "past") // due long ago, added last
		if got, want := drain(e, "q"), []string{"now1", "delayed", "past"}; !slices.Equal(got, want) {
			t.Fatalf("order %v, want %v", got, want)
		}
		j, ok := e.Get(b("q"), b("past"))
		if ok {
			t.Fatalf("popped job still there: %+v", j)
		}
	})
}

func TestAddAtPastKeepsGivenDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		at := e.Now() - 5000
		addAt(t, e, "q", at, "x", "p")
		j, ok := e.Get(b("q"), b("x"))
		if !ok || j.State != "ready" || j.Due != at {
			t.Fatalf("got %+v %v, want ready with due %d", j, ok, at)
		}
		add(t, e, "q", 0, "now")
		id := add(t, e, "q", 0, "now2")
		j, _ = e.Get(b("q"), b(id))
		if j.Due != e.Now() {
			t.Fatalf("delay 0 due %d, want now %d", j.Due, e.Now())
		}
	})
}

func TestIDsAndReplace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		first := add(t, e, "a", 100, "x")
		second := add(t, e, "b", 100, "y")
		third := add(t, e, "a", 100, "z")
		if !(first < second && second < third) || len(first) != 16 {
			t.Fatalf("server ids not increasing: %s %s %s", first, second, third)
		}
		addAt(t, e, "q", e.Now()+1000, "job-1", "v1")
		// Same id, no REPLACE: nothing changes (a safe producer retry).
		res, err := e.Add(AddArgs{Queue: b("q"), ID: b("job-1"), Payload: b("v2")})
		if err != nil || res.Added || res.ID != nil {
			t.Fatalf("duplicate add: %+v %v", res, err)
		}
		if j, _ := e.Get(b("q"), b("job-1")); string(j.Payload) != "v1" || j.State != "delayed" {
			t.Fatalf("duplicate add changed the job: %+v", j)
		}
		// REPLACE with delay 0: new payload, ready now.
		res, err = e.Add(AddArgs{Queue: b("q"), ID: b("job-1"), Payload: b("v3"), Replace: true})
		if err != nil || !res.Added {
			t.Fatalf("replace: %+v %v", res, err)
		}
		j, _ := e.Get(b("q"), b("job-1"))
		if string(j.Payload) != "v3" || j.State != "ready" {
			t.Fatalf("after replace: %+v", j)
		}
		if s := e.QueueStats(b("q")); s.Delayed != 0 || s.Ready != 1 {
			t.Fatalf("stats after replace %+v", s)
		}
		// A client id that looks like the next server id does not collide.
		next := jobs.NextSID(e.lastSID, e.Now())
		var buf [jobs.SIDLen]byte
		addAt(t, e, "q", 0, string(jobs.RenderSID(&buf, next)), "squatter")
		got := add(t, e, "q", 0, "server")
		if got == string(jobs.RenderSID(&buf, next)) {
			t.Fatal("server id collided with a client id")
		}
	})
}

func TestLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{MaxPayload: 4, MaxJobs: 2})
		if _, err := e.Add(AddArgs{Queue: b("q"), Payload: b("12345")}); err != ErrPayloadTooLarge {
			t.Fatalf("payload over max: %v", err)
		}
		add(t, e, "q", 10, "1234") // exactly the max is fine
		add(t, e, "q", 10, "b")
		if _, err := e.Add(AddArgs{Queue: b("q"), Payload: b("c")}); err != ErrMaxJobs {
			t.Fatalf("over max jobs: %v", err)
		}
		if n, _, _ := e.Cancel(b("q"), nil); n != 0 {
			t.Fatal("cancel of nothing")
		}
	})
}

func TestCancelEveryState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		delayed := add(t, e, "q", 10_000, "d")
		ready := add(t, e, "q", 0, "r")
		far := add(t, e, "q", 86_400_000*30, "far") // a high overflow level
		if n, _, _ := e.Cancel(b("q"), [][]byte{b(delayed), b("nope"), b(ready), b(far), b(ready)}); n != 3 {
			t.Fatalf("cancelled %d, want 3", n)
		}
		sleep(time.Hour * 24 * 31)
		if _, ok := popPayload(e, "q"); ok {
			t.Fatal("a cancelled job was delivered")
		}
		if e.Exists(b("q")) || len(e.byName) != 0 || e.njobs != 0 {
			t.Fatalf("empty queue left something behind: %v %d", e.byName, e.njobs)
		}
	})
}

func TestWaitersServedOldestFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		var ws []*Waiter
		for range 3 {
			_, w, err := e.PopOrWait([][]byte{b("q")}, PopDelay)
			if err != nil || w == nil {
				t.Fatal("expected to block")
			}
			ws = append(ws, w)
		}
		add(t, e, "q", 50, "first")
		add(t, e, "q", 50, "second")
		sleep(49 * time.Millisecond)
		for i, w := range ws {
			select {
			case <-w.Ready():
				t.Fatalf("waiter %d served before due", i)
			default:
			}
		}
		sleep(time.Millisecond)
		for i, want := range []string{"first", "second"} {
			select {
			case <-ws[i].Ready():
				d, ok := ws[i].Result()
				if !ok || string(d.Payload) != want {
					t.Fatalf("waiter %d got %q, want %q", i, d.Payload, want)
				}
			default:
				t.Fatalf("waiter %d not served at due time", i)
			}
		}
		if _, ok := e.CancelWait(ws[2]); ok {
			t.Fatal("third waiter got a job")
		}
		if e.Exists(b("q")) || len(e.byName) != 0 {
			t.Fatal("queue kept after its last waiter left")
		}
	})
}

func TestWaiterOnSeveralKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		_, w, _ := e.PopOrWait([][]byte{b("k1"), b("k2")}, PopDelay)
		add(t, e, "k2", 0, "from-k2")
		<-w.Ready()
		d, ok := w.Result()
		if !ok || string(d.Queue) != "k2" || string(d.Payload) != "from-k2" {
			t.Fatalf("got %+v", d)
		}
		add(t, e, "k1", 0, "left")
		if s := e.QueueStats(b("k1")); s.Ready != 1 {
			t.Fatalf("the resolved waiter took a second job: %+v", s)
		}
		// Keys are tried in the order given.
		add(t, e, "k2", 0, "k2-job")
		if d, _ := e.Pop([][]byte{b("k2"), b("k1")}); string(d.Payload) != "k2-job" {
			t.Fatalf("pop order: %q", d.Payload)
		}
	})
}

func TestGoneClientJobGoesBackToHead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		_, w, _ := e.PopOrWait([][]byte{b("q")}, PopDelay)
		add(t, e, "q", 0, "one")
		add(t, e, "q", 0, "two")
		<-w.Ready()
		// The client left as the job was handed over: the connection cancels
		// and gets the job back, which returns to the head.
		d, ok := e.CancelWait(w)
		if !ok || string(d.Payload) != "one" {
			t.Fatalf("cancel after serve: %+v %v", d, ok)
		}
		e.Requeue(d)
		if got := drain(e, "q"); !slices.Equal(got, []string{"one", "two"}) {
			t.Fatalf("after requeue %v", got)
		}
		if j, ok := e.Get(b("q"), d.ID); ok {
			t.Fatalf("requeued job not popped: %+v", j)
		}
	})
}

func TestCloseReleasesWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := New(Options{})
		_, w, _ := e.PopOrWait([][]byte{b("q")}, PopDelay)
		e.Close()
		<-w.Ready()
		if _, ok := w.Result(); ok {
			t.Fatal("released waiter reports a job")
		}
		if _, err := e.Add(AddArgs{Queue: b("q")}); err != ErrClosed {
			t.Fatalf("add after close: %v", err)
		}
	})
}

func TestPeekAndBinaryPayloads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		all := make([]byte, 256)
		for i := range all {
			all[i] = byte(i)
		}
		big := bytes.Repeat([]byte("x"), jobs.MaxSmall+1) // outside the arena's classes
		for _, p := range [][]byte{all, {}, []byte("a\r\nb"), big} {
			if _, err := e.Add(AddArgs{Queue: b("q"), Payload: p}); err != nil {
				t.Fatal(err)
			}
		}
		pk := e.Peek(b("q"), 10)
		if len(pk) != 4 || !bytes.Equal(pk[0].Payload, all) || len(pk[1].Payload) != 0 || !bytes.Equal(pk[3].Payload, big) {
			t.Fatalf("peek: %d pairs", len(pk))
		}
		if s := e.QueueStats(b("q")); s.Ready != 4 {
			t.Fatalf("peek removed jobs: %+v", s)
		}
		for _, want := range [][]byte{all, {}, []byte("a\r\nb"), big} {
			d, _ := e.Pop([][]byte{b("q")})
			if !bytes.Equal(d.Payload, want) {
				t.Fatalf("payload changed: %d bytes, want %d", len(d.Payload), len(want))
			}
		}
	})
}

func TestIdleEngineDoesNotTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		add(t, e, "q", 3_600_000, "x")
		sleep(time.Hour)
		if _, ok := popPayload(e, "q"); !ok {
			t.Fatal("not ready after an hour")
		}
		// With nothing pending the timer goroutine is parked, not ticking:
		// the bubble would not advance a whole day in one step otherwise.
		start := time.Now()
		sleep(24 * time.Hour)
		if time.Since(start) != 24*time.Hour {
			t.Fatal("clock did not jump")
		}
	})
}

// TestModel runs random operations against the engine and a plain reference
// (slices, sorted on each step) and compares every reply. The reference
// states the rules directly: at each step every event due by now (a delayed
// job's due time, a reservation's ack deadline) happens in (time, order)
// order; an expired or NACKed delivery goes back to the tail, or, out of
// retries, to its dead-letter queue or away.
func TestModel(t *testing.T) {
	rounds := 40
	if testing.Short() {
		rounds = 5
	}
	for seed := range uint64(rounds) {
		synctest.Test(t, func(t *testing.T) {
			runModel(t, seed, 3000)
		})
	}
}

type refJob struct {
	id, payload string
	due         int64 // delayed: when ready; reserved: the ack deadline
	seq         int
	ack         int64
	retry       int64
	dl          string
	deliveries  int
}

type refQueue struct {
	delayed, ready, reserved []refJob
}

type reference struct {
	queues map[string]*refQueue
	seq    int
}

func (r *reference) q(name string) *refQueue {
	if r.queues[name] == nil {
		r.queues[name] = &refQueue{}
	}
	return r.queues[name]
}

func (r *reference) advance(now int64) {
	type event struct {
		queue    string
		j        refJob
		reserved bool
	}
	var events []event
	for name, q := range r.queues {
		for _, j := range q.delayed {
			if j.due <= now {
				events = append(events, event{name, j, false})
			}
		}
		for _, j := range q.reserved {
			if j.due <= now {
				events = append(events, event{name, j, true})
			}
		}
		q.delayed = slices.DeleteFunc(q.delayed, func(j refJob) bool { return j.due <= now })
		q.reserved = slices.DeleteFunc(q.reserved, func(j refJob) bool { return j.due <= now })
	}
	slices.SortFunc(events, func(a, b event) int {
		return cmp.Or(cmp.Compare(a.j.due, b.j.due), cmp.Compare(a.j.seq, b.j.seq))
	})
	for _, ev := range events {
		if ev.reserved {
			r.endDelivery(ev.queue, ev.j, now, 0)
		} else {
			r.q(ev.queue).ready = append(r.q(ev.queue).ready, ev.j)
		}
	}
}

func (r *reference) endDelivery(queue string, j refJob, now, due int64) {
	if j.retry >= 0 && int64(j.deliveries) > j.retry {
		if j.dl != "" {
			r.seq++
			j.seq, j.ack, j.retry, j.dl = r.seq, 0, -1, ""
			r.q("dlq").ready = append(r.q("dlq").ready, j)
		}
		return
	}
	r.seq++
	j.seq = r.seq
	if due > now {
		j.due = due
		r.q(queue).delayed = append(r.q(queue).delayed, j)
		return
	}
	r.q(queue).ready = append(r.q(queue).ready, j)
}

func (r *reference) has(qn, id string) bool {
	q := r.q(qn)
	for _, l := range [][]refJob{q.delayed, q.ready, q.reserved} {
		for _, j := range l {
			if j.id == id {
				return true
			}
		}
	}
	return false
}

// take removes a job from whichever list holds it.
func (r *reference) take(qn, id string, lists ...*[]refJob) (refJob, bool) {
	q := r.q(qn)
	if len(lists) == 0 {
		lists = []*[]refJob{&q.delayed, &q.ready, &q.reserved}
	}
	for _, l := range lists {
		for i, j := range *l {
			if j.id == id {
				*l = slices.Delete(*l, i, i+1)
				return j, true
			}
		}
	}
	return refJob{}, false
}

func runModel(t *testing.T, seed uint64, ops int) {
	rng := rand.New(rand.NewPCG(seed, 99))
	e := newEngine(t, Options{})
	ref := &reference{queues: map[string]*refQueue{}}
	queues := []string{"a", "b", "c"}
	var ids []string
	delays := []int64{0, 1, 2, 63, 64, 65, 500, 4096, 70_000, 300_000, 5_000_000}
	acks := []int64{0, 0, 1, 100, 5000}
	pick := func() string { return ids[rng.IntN(len(ids))] }
	for op := range ops {
		now := e.Now()
		qn := queues[rng.IntN(len(queues))]
		if rng.IntN(8) == 0 {
			qn = "dlq"
		}
		switch r := rng.IntN(100); {
		case r < 35: // add, sometimes with a chosen id, sometimes replacing
			if qn == "dlq" {
				continue // the dead-letter queue only gets jobs by dead-lettering
			}
			delay := delays[rng.IntN(len(delays))] + rng.Int64N(3)
			payload := fmt.Sprintf("p%d", op)
			a := AddArgs{Queue: b(qn), Delay: delay, Payload: b(payload),
				AckTimeout: acks[rng.IntN(len(acks))], Retry: int64(rng.IntN(4)) - 1}
			var id string
			if rng.IntN(3) == 0 && len(ids) > 0 {
				id = pick()
				a.ID = b(id)
				a.Replace = rng.IntN(2) == 0
			} else if rng.IntN(2) == 0 {
				// Only server ids are dead-lettered here: they are unique
				// everywhere, so none is renamed in the dead-letter queue
				// (TestDeadLetterRenamesTakenID covers that).
				a.DeadLetter = b("dlq")
			}
			res, err := e.Add(a)
			if err != nil {
				t.Fatal(err)
			}
			ref.advance(now)
			if id != "" && ref.has(qn, id) {
				if !a.Replace {
					if res.Added {
						t.Fatalf("op %d: add of existing id %s without REPLACE changed it", op, id)
					}
					continue
				}
				ref.take(qn, id)
			}
			if !res.Added {
				t.Fatalf("op %d: add refused", op)
			}
			if id == "" {
				id = string(res.ID)
				ids = append(ids, id)
			}
			ref.seq++
			j := refJob{id: id, payload: payload, due: now + delay, seq: ref.seq,
				ack: a.AckTimeout, retry: a.Retry, dl: string(a.DeadLetter)}
			if delay == 0 {
				ref.q(qn).ready = append(ref.q(qn).ready, j)
			} else {
				ref.q(qn).delayed = append(ref.q(qn).delayed, j)
			}
		case r < 42: // cancel
			if len(ids) == 0 {
				continue
			}
			id := pick()
			ref.advance(now)
			_, existed := ref.take(qn, id)
			want := 0
			if existed {
				want = 1
			}
			if got, _, _ := e.Cancel(b(qn), [][]byte{b(id)}); got != want {
				t.Fatalf("op %d: cancel %s/%s = %d, want %d", op, qn, id, got, want)
			}
		case r < 62: // pop
			ref.advance(now)
			d, ok := e.Pop([][]byte{b(qn)})
			q := ref.q(qn)
			if ok != (len(q.ready) > 0) {
				t.Fatalf("op %d: pop %s ok=%v, reference has %d ready", op, qn, ok, len(q.ready))
			}
			if !ok {
				continue
			}
			want := q.ready[0]
			q.ready = q.ready[1:]
			want.deliveries++
			if string(d.ID) != want.id || string(d.Payload) != want.payload || int(d.Deliveries) != want.deliveries {
				t.Fatalf("op %d: pop %s got %s/%s/%d, want %s/%s/%d", op, qn, d.ID, d.Payload, d.Deliveries,
					want.id, want.payload, want.deliveries)
			}
			if want.ack > 0 {
				ref.seq++
				want.seq, want.due = ref.seq, now+want.ack
				q.reserved = append(q.reserved, want)
			}
		case r < 70: // ack
			if len(ids) == 0 {
				continue
			}
			id := pick()
			ref.advance(now)
			_, want := ref.take(qn, id, &ref.q(qn).reserved)
			if n, _, _ := e.Ack(b(qn), [][]byte{b(id)}); (n == 1) != want {
				t.Fatalf("op %d: ack %s/%s = %d, want %v", op, qn, id, n, want)
			}
		case r < 76: // nack, now or later
			if len(ids) == 0 {
				continue
			}
			id := pick()
			delay := []int64{0, 0, 30, 5000}[rng.IntN(4)]
			ref.advance(now)
			j, want := ref.take(qn, id, &ref.q(qn).reserved)
			if ok, _, _ := e.Nack(b(qn), b(id), delay); ok != want {
				t.Fatalf("op %d: nack %s/%s = %v, want %v", op, qn, id, ok, want)
			}
			if want {
				ref.endDelivery(qn, j, now, now+delay)
			}
		case r < 80: // touch
			if len(ids) == 0 {
				continue
			}
			id := pick()
			ref.advance(now)
			q := ref.q(qn)
			i := slices.IndexFunc(q.reserved, func(j refJob) bool { return j.id == id })
			if ok, _, _ := e.Touch(b(qn), b(id)); ok != (i >= 0) {
				t.Fatalf("op %d: touch %s/%s = %v, want %v", op, qn, id, ok, i >= 0)
			}
			if i >= 0 {
				ref.seq++
				q.reserved[i].seq, q.reserved[i].due = ref.seq, now+q.reserved[i].ack
			}
		default: // time passes, by steps of every size
			steps := []time.Duration{time.Millisecond, 7 * time.Millisecond, 64 * time.Millisecond, time.Second, time.Minute}
			sleep(steps[rng.IntN(len(steps))])
			ref.advance(e.Now())
			for _, qn := range append(queues, "dlq") {
				q := ref.q(qn)
				want := QueueStats{Delayed: len(q.delayed), Ready: len(q.ready), Reserved: len(q.reserved)}
				got := e.QueueStats(b(qn))
				if got.Delayed != want.Delayed || got.Ready != want.Ready || got.Reserved != want.Reserved {
					t.Fatalf("op %d: stats %s = %+v, want %+v", op, qn, got, want)
				}
			}
		}
	}
}

func TestRecordsStayUnderTheLogLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		if _, err := New(Options{MaxPayload: MaxPayload + 1}); err == nil {
			t.Fatal("a max payload over what a log record holds was accepted")
		}
		e := newEngine(t, Options{})
		long := bytes.Repeat([]byte("k"), MaxKey+1)
		if _, err := e.Add(AddArgs{Queue: long, Payload: b("x")}); err != ErrKeyTooLong {
			t.Fatalf("long queue name: %v", err)
		}
		if _, err := e.Add(AddArgs{Queue: b("q"), DeadLetter: long, Payload: b("x")}); err != ErrKeyTooLong {
			t.Fatalf("long dead-letter name: %v", err)
		}
		if _, _, err := e.Push(long, [][]byte{b("x")}, false); err != ErrKeyTooLong {
			t.Fatalf("long list name: %v", err)
		}
		if r := (&record.Rec{Op: record.Add, Queue: long[:MaxKey], ID: long[:256], DeadLetter: long[:MaxKey],
			Payload: make([]byte, MaxPayload)}).Encode(nil); len(r) > aof.MaxRecordSize {
			t.Fatalf("the largest record is %d bytes, over aof.MaxRecordSize", len(r))
		}
	})
}

// waitRewrite waits for a running log rewrite to end.
func waitRewrite(e *Engine) {
	for {
		e.mu.Lock()
		running := e.journal.Rewriting()
		e.mu.Unlock()
		if !running {
			return
		}
		sleep(time.Millisecond)
	}
}
