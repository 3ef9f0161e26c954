package engine

import (
	"bytes"
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/record"
)

// Tests of the commands the dashboard's screens and buttons are views of:
// DELAY.UPCOMING, DELAY.PAUSE / DELAY.RESUME, DELAY.REQUEUE.

func opsUpcomingIDs(e *Engine, q string, n int) []string {
	var out []string
	for _, u := range e.Upcoming(b(q), n) {
		out = append(out, fmt.Sprintf("%s@%d=%s", u.ID, u.Due, u.Payload))
	}
	return out
}

// TestOpsUpcomingOrderAndBound: the next delayed jobs of a queue, in the
// order they will become ready (due, then add order), at most count, among
// other queues' delayed jobs and reservations, near and far.
func TestOpsUpcomingOrderAndBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		rng := rand.New(rand.NewPCG(1, 2))
		type want struct {
			id      string
			due     int64
			seq     int
			payload string
		}
		var mine []want
		for i := range 3000 {
			q := "noise"
			if i%3 == 0 {
				q = "q"
			}
			delay := []int64{5, 70, 3000, 200_000, 9_000_000, 40_000_000_000}[rng.IntN(6)] + rng.Int64N(50)
			if i%10 == 0 {
				delay = 5000 // equal due times keep add order
			}
			due := e.Now() + delay
			id := fmt.Sprint("j", i)
			addOpts(t, e, AddArgs{Queue: b(q), ID: b(id), Payload: b(fmt.Sprint("p", i)), At: true, Due: due, Retry: -1})
			if q == "q" {
				mine = append(mine, want{id, due, i, fmt.Sprint("p", i)})
			}
		}
		// Ready and reserved jobs of q are not upcoming.
		addOpts(t, e, AddArgs{Queue: b("q"), ID: b("ready"), Payload: b("r"), Retry: -1})
		addOpts(t, e, AddArgs{Queue: b("q"), ID: b("held"), Payload: b("h"), Retry: -1, AckTimeout: 60_000})
		addOpts(t, e, AddArgs{Queue: b("q"), ID: b("ready2"), Payload: b("r"), Retry: -1})
		if d := mustPop(t, e, "q"); string(d.ID) != "ready" {
			t.Fatalf("popped %s", d.ID)
		}
		if d := mustPop(t, e, "q"); string(d.ID) != "held" || !d.Reserved {
			t.Fatalf("popped %+v", d)
		}
		check := func(what string) {
			t.Helper()
			now := e.Now()
			mine = slices.DeleteFunc(mine, func(w want) bool { return w.due <= now })
			slices.SortFunc(mine, func(a, b want) int { return cmp.Or(cmp.Compare(a.due, b.due), cmp.Compare(a.seq, b.seq)) })
			for _, n := range []int{1, 10, 100, 5000} {
				var exp []string
				for _, w := range mine[:min(n, len(mine))] {
					exp = append(exp, fmt.Sprintf("%s@%d=%s", w.id, w.due, w.payload))
				}
				if got := opsUpcomingIDs(e, "q", n); !slices.Equal(got, exp) {
					t.Fatalf("%s, count %d: got %d jobs, first diff at %d:\n got %v\nwant %v", what, n, len(got), firstDiff(got, exp),
						got[:min(5, len(got))], exp[:min(5, len(exp))])
				}
				// Upcoming walks the wheel or, past its budget, scans the
				// slab: both answer the same.
				e.mu.Lock()
				qi := e.byName["q"]
				l := jobs.Listing{T: &e.jobs, Queue: qi, State: jobs.StateDelayed}
				walked, _ := e.wheel.Earliest(nil, n, -1, 0, l.Mine)
				scanned := l.Scan(n, e.queues[qi].Delayed, nil)
				e.mu.Unlock()
				if !slices.Equal(walked, scanned) || len(walked) != len(exp) {
					t.Fatalf("%s, count %d: the walk and the scan differ", what, n)
				}
			}
		}
		check("at start")
		sleep(4 * time.Second)
		check("after 4 s, some fired")
		sleep(300 * time.Second)
		check("after 304 s, coarser buckets cascaded")
		if got := e.Upcoming(b("q"), 0); got != nil {
			t.Fatalf("count 0: %v", got)
		}
		if got := e.Upcoming(b("none"), 10); got != nil {
			t.Fatalf("no such queue: %v", got)
		}
	})
}

// TestOpsPauseResume: a paused queue keeps its jobs and their timing but
// hands nothing out; pops skip it; its waiters are served on RESUME.
func TestOpsPauseResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		if _, err := e.SetPaused(b("q"), true); err != nil {
			t.Fatal(err)
		}
		if _, ok := e.queueFor(b("q"), false); ok {
			t.Fatal("a pause made a queue")
		}
		if st := e.QueueStats(b("q")); !st.Paused {
			t.Fatal("STATS of an empty paused name says not paused")
		}
		add(t, e, "q", 0, "a")
		add(t, e, "other", 0, "o")
		if _, ok := e.Pop([][]byte{b("q")}); ok {
			t.Fatal("popped a paused queue")
		}
		if p, ok := popPayload(e, "q", "other"); !ok || p != "o" {
			t.Fatalf("a pop naming a paused queue first did not skip it: %q %v", p, ok)
		}
		if _, ok := e.ListPop(b("q"), 1, false); ok {
			t.Fatal("LPOP took from a paused queue")
		}
		if _, ok, _ := e.Move(b("q"), b("x"), MoveEnds{}); ok {
			t.Fatal("LMOVE took from a paused queue")
		}
		if ds, w, err := e.MPopOrWait([][]byte{b("q")}, 5); err != nil || len(ds) != 0 || w == nil {
			t.Fatalf("MPOP on a paused queue: %v %v %v", ds, w, err)
		} else {
			e.CancelWait(w)
		}
		// Blocked clients stay blocked: jobs arriving and jobs falling due
		// while paused are not handed out.
		w1 := waitFor(t, e, PopDelay, "q2")
		e.SetPaused(b("q2"), true)
		w2 := waitFor(t, e, PopLeft, "q2")
		add(t, e, "q2", 0, "now")
		add(t, e, "q2", 100, "later")
		if got := opsUpcomingIDs(e, "q2", 10); len(got) != 1 {
			t.Fatalf("upcoming while paused: %v", got)
		}
		sleep(100 * time.Millisecond)
		if flowReady(w1) || flowReady(w2) {
			t.Fatal("a waiter was served by a paused queue")
		}
		if st := e.QueueStats(b("q2")); !st.Paused || st.Ready != 2 || st.Delayed != 0 {
			t.Fatalf("the delayed job did not become ready on time while paused: %+v", st)
		}
		if pairs := e.Peek(b("q2"), 5); len(pairs) != 2 {
			t.Fatalf("PEEK of a paused queue: %v", pairs)
		}
		// Pausing twice changes nothing and logs nothing.
		if tk, err := e.SetPaused(b("q2"), true); err != nil || tk != 0 {
			t.Fatalf("pausing again: %d %v", tk, err)
		}
		if _, err := e.SetPaused(b("q2"), false); err != nil {
			t.Fatal(err)
		}
		if got := []string{served(t, w1), served(t, w2)}; !slices.Equal(got, []string{"now", "later"}) {
			t.Fatalf("RESUME served %v, want the oldest waiter first", got)
		}
		if e.Paused(b("q2")) || e.QueueStats(b("q2")).Paused {
			t.Fatal("still paused")
		}
		if e.limits.Of("q2") != nil {
			t.Fatal("a resumed name with no limit left its registry entry")
		}
	})
}

// TestOpsPauseAndLimit: a pause and a limit share the name's entry; each
// outlives the other's removal, and DELAY.LIMIT's view ignores the pause.
func TestOpsPauseAndLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		flowLimit(t, e, "q", LimitSpec{Concurrency: 1})
		for i := range 3 {
			addOpts(t, e, AddArgs{Queue: b("q"), Payload: b(fmt.Sprint(i)), AckTimeout: 1000, Retry: -1})
		}
		e.SetPaused(b("q"), true)
		if info, ok := e.Limit(b("q")); !ok || info.Concurrency != 1 {
			t.Fatalf("the limit under a pause: %+v %v", info, ok)
		}
		flowLimit(t, e, "q", LimitSpec{}) // OFF
		if !e.Paused(b("q")) {
			t.Fatal("LIMIT OFF resumed the queue")
		}
		if _, ok := e.Limit(b("q")); ok {
			t.Fatal("a paused name shows a limit after LIMIT OFF")
		}
		flowLimit(t, e, "q", LimitSpec{Concurrency: 1})
		if _, ok := e.Pop([][]byte{b("q")}); ok {
			t.Fatal("popped a paused queue with a limit")
		}
		e.SetPaused(b("q"), false)
		d := mustPop(t, e, "q")
		if _, ok := e.Pop([][]byte{b("q")}); ok {
			t.Fatal("RESUME dropped the limit")
		}
		// At its limit and paused: an ACK makes room, but hands nothing out
		// until RESUME.
		e.SetPaused(b("q"), true)
		e.Ack(b("q"), [][]byte{d.ID})
		if _, ok := e.Pop([][]byte{b("q")}); ok {
			t.Fatal("an ACK on a paused queue let a pop through")
		}
		e.SetPaused(b("q"), false)
		mustPop(t, e, "q")
	})
}

// TestOpsPauseSurvivesRestartRewriteAndFlush: a pause is logged, written
// by a rewrite, and belongs to the name (FLUSHALL and DEL keep it).
func TestOpsPauseSurvivesRestartRewriteAndFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, exact(fs, FsyncAlways))
		restart := func() {
			t.Helper()
			before := dump(e)
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			e = mustNew(t, exact(fs, FsyncAlways))
			if after := dump(e); after != before {
				t.Fatalf("after restart:\n%s", diffLines(before, after))
			}
		}
		tk, _ := e.SetPaused(b("q"), true)
		e.WaitDurable(tk)
		e.SetPaused(b("limited"), true)
		flowLimit(t, e, "limited", LimitSpec{Rate: 5, Per: 1000})
		add(t, e, "q", 0, "a")
		restart()
		if !e.Paused(b("q")) || !e.Paused(b("limited")) {
			t.Fatal("a restart resumed")
		}
		if _, ok := e.Pop([][]byte{b("q")}); ok {
			t.Fatal("popped a paused queue after restart")
		}
		if err := e.Rewrite(); err != nil {
			t.Fatal(err)
		}
		opsWaitRewrite(e)
		if n := countOps(t, fs, record.Pause); n != 2 {
			t.Fatalf("the rewritten log holds %d pause records, want 2", n)
		}
		restart()
		if !e.Paused(b("q")) {
			t.Fatal("a rewrite resumed")
		}
		e.Flush()
		e.Del([][]byte{b("q")})
		restart()
		if !e.Paused(b("q")) || !e.Paused(b("limited")) {
			t.Fatal("FLUSHALL or DEL resumed")
		}
		e.SetPaused(b("q"), false)
		restart()
		if e.Paused(b("q")) || !e.Paused(b("limited")) {
			t.Fatal("RESUME did not survive a restart")
		}
		e.Close()
	})
}

// TestOpsPauseFollowerAndSnapshot: followers and a restored snapshot hold
// the leader's pauses; a follower serves no one either way.
func TestOpsPauseFollowerAndSnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 2, Options{}, nil)
		ln, fn := g.nodes[0], g.nodes[1]
		if _, err := ln.e.SetPaused(b("q"), true); err != nil {
			t.Fatal(err)
		}
		add(t, ln.e, "q", 0, "a")
		ln.e.SetPaused(b("r"), true)
		ln.e.SetPaused(b("r"), false)
		g.sync(ln)
		if !fn.e.Paused(b("q")) || fn.e.Paused(b("r")) {
			t.Fatal("the follower's pauses differ")
		}
		x := newEngine(t, Options{Replicator: &fakeRepl{closed: true}, Follower: true})
		if err := x.Restore(bytes.NewReader(ln.e.Snapshot())); err != nil {
			t.Fatal(err)
		}
		if !x.Paused(b("q")) || x.Paused(b("r")) || replDump(x) != replDump(ln.e) {
			t.Fatalf("the restored state differs:\n%s", diffLines(replDump(ln.e), replDump(x)))
		}
	})
}

// opsDeadLetter adds a job that may be delivered twice and dead-letters it
// (two deliveries, two NACKs).
func opsDeadLetter(t *testing.T, e *Engine, q, id string, a AddArgs) {
	t.Helper()
	a.Queue, a.ID, a.Retry, a.DeadLetter = b(q), b(id), 1, b("dlq")
	if a.AckTimeout == 0 {
		a.AckTimeout = 1000
	}
	if a.Payload == nil {
		a.Payload = b("p-" + id)
	}
	addOpts(t, e, a)
	for range 2 {
		d := mustPop(t, e, q)
		if string(d.ID) != id {
			t.Fatalf("popped %s, want %s", d.ID, id)
		}
		if ok, _, _ := e.Nack(b(q), d.ID, 0); !ok {
			t.Fatal("nack")
		}
	}
	if state(e, "dlq", id) != "ready" {
		t.Fatalf("%s is not dead-lettered", id)
	}
}

func requeueOK(t *testing.T, e *Engine, q, id, to string, want int) {
	t.Helper()
	var idb, tob []byte
	if id != "" {
		idb = b(id)
	}
	if to != "" {
		tob = b(to)
	}
	n, tk, err := e.RequeueDead(b(q), idb, tob)
	if err != nil || n != want {
		t.Fatalf("REQUEUE %s %q %q: %d %v, want %d", q, id, to, n, err, want)
	}
	if err := e.WaitDurable(tk); err != nil {
		t.Fatal(err)
	}
}

// TestOpsRequeueBackToOrigin: a dead-lettered job goes back to its queue
// with its options and deliveries at 0; failing again sends it back to the
// dead-letter queue, and it can be requeued again.
func TestOpsRequeueBackToOrigin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		opsDeadLetter(t, e, "q", "j", AddArgs{AckTimeout: 700, Group: b("g"), Priority: 3})
		if j, _ := e.Get(b("dlq"), b("j")); j.Deliveries != 2 {
			t.Fatalf("in the DLQ: %+v", j)
		}
		requeueOK(t, e, "dlq", "j", "", 1)
		if e.Exists(b("dlq")) {
			t.Fatal("the dead-letter queue still holds the job")
		}
		j, ok := e.Get(b("q"), b("j"))
		if !ok || j.State != "ready" || j.Deliveries != 0 {
			t.Fatalf("requeued: %+v %v", j, ok)
		}
		if g, p := e.laneOf(opsSlot(e, "q", "j")); string(g) != "g" || p != 3 {
			t.Fatalf("group and priority lost: %q %d", g, p)
		}
		for round := range 2 {
			d := mustPop(t, e, "q")
			if !d.Reserved || d.Deliveries != 1 {
				t.Fatalf("round %d: the ack timeout was not given back: %+v", round, d)
			}
			sleep(700 * time.Millisecond) // expires
			d = mustPop(t, e, "q")
			if d.Deliveries != 2 {
				t.Fatalf("round %d: retry not given back: %+v", round, d)
			}
			sleep(700 * time.Millisecond) // out of deliveries: back to the DLQ
			if state(e, "dlq", "j") != "ready" || state(e, "q", "j") != "gone" {
				t.Fatalf("round %d: the job failed again but is not dead-lettered", round)
			}
			requeueOK(t, e, "dlq", "j", "", 1)
		}
		// Not there, or not ready: nothing.
		requeueOK(t, e, "dlq", "j", "", 0)
		requeueOK(t, e, "nosuch", "", "", 0)
	})
}

func opsSlot(e *Engine, q, id string) uint32 {
	e.mu.Lock()
	defer e.mu.Unlock()
	qi, _ := e.queueFor(b(q), false)
	s, _ := e.jobs.Lookup(&e.queues[qi].run, qi, b(id))
	return s
}

// TestOpsRequeueAllAndToKey: ALL requeues every ready job of the queue to
// its own origin; a job with no origin stays unless a to-key is given;
// delayed and reserved jobs stay; an id taken in the target gets a new
// server id.
func TestOpsRequeueAllAndToKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		opsDeadLetter(t, e, "a", "1", AddArgs{})
		opsDeadLetter(t, e, "b", "2", AddArgs{AckTimeout: 5000})
		opsDeadLetter(t, e, "a", "3", AddArgs{})
		addOpts(t, e, AddArgs{Queue: b("dlq"), ID: b("plain"), Payload: b("x"), Retry: -1})
		addOpts(t, e, AddArgs{Queue: b("dlq"), ID: b("later"), Payload: b("x"), Retry: -1, Delay: 1000})
		addOpts(t, e, AddArgs{Queue: b("dlq"), ID: b("held"), Payload: b("x"), Retry: -1, AckTimeout: 1000})
		if d := mustPop(t, e, "dlq"); string(d.ID) != "1" {
			t.Fatalf("popped %s", d.ID)
		} else {
			e.Requeue(d) // handed back (the client left): it keeps its origin
		}
		// Reserve "held": pop the jobs before it and put them back.
		var back []Delivery
		for {
			d := mustPop(t, e, "dlq")
			if string(d.ID) == "held" {
				break
			}
			back = append(back, d)
		}
		for _, d := range slices.Backward(back) {
			e.Requeue(d)
		}
		requeueOK(t, e, "dlq", "held", "x", 0)
		requeueOK(t, e, "dlq", "later", "x", 0)
		requeueOK(t, e, "dlq", "", "", 3)
		if got := payloads(e, "a"); !slices.Equal(got, []string{"p-1", "p-3"}) {
			t.Fatalf("queue a: %v", got)
		}
		if got := payloads(e, "b"); !slices.Equal(got, []string{"p-2"}) {
			t.Fatalf("queue b: %v", got)
		}
		if st := e.QueueStats(b("dlq")); st.Ready != 1 || st.Delayed != 1 || st.Reserved != 1 {
			t.Fatalf("left in the dlq: %+v", st)
		}
		// With a to-key: the origin's options, the to-key's queue; a job
		// with no origin keeps its own options.
		opsDeadLetter(t, e, "a4", "4", AddArgs{})
		addOpts(t, e, AddArgs{Queue: b("elsewhere"), ID: b("4"), Payload: b("taken"), Retry: -1})
		requeueOK(t, e, "dlq", "", "elsewhere", 2)
		var ids []string
		for _, p := range e.Peek(b("elsewhere"), 10) {
			ids = append(ids, string(p.ID))
		}
		if len(ids) != 3 || ids[0] != "4" || ids[1] != "plain" || ids[2] == "4" {
			t.Fatalf("elsewhere holds %v: want 4, plain, then 4 under a new server id", ids)
		}
		if _, ok := jobs.ParseSID(b(ids[2])); !ok {
			t.Fatalf("the requeued job whose id was taken got %q, not a server id", ids[2])
		}
		if j, _ := e.Get(b("elsewhere"), b(ids[2])); j.Deliveries != 0 || string(j.Payload) != "p-4" {
			t.Fatalf("requeued to a taken id: %+v", j)
		}
		// It failed in a: to-key moves it, with a's options.
		mustPop(t, e, "elsewhere")
		mustPop(t, e, "elsewhere")
		if d := mustPop(t, e, "elsewhere"); !d.Reserved || d.Deliveries != 1 {
			t.Fatalf("the origin's ack timeout did not follow to the to-key: %+v", d)
		}
		// The target's waiters are served.
		w := waitFor(t, e, PopLeft, "c")
		opsDeadLetter(t, e, "c2", "5", AddArgs{})
		requeueOK(t, e, "dlq", "5", "c", 1)
		if got := served(t, w); got != "p-5" {
			t.Fatalf("the waiter got %q", got)
		}
	})
}

// TestOpsRequeueIsOneRecordAndSurvives: each requeued job is one record;
// origins survive restarts and rewrites, and requeues replay exactly.
func TestOpsRequeueIsOneRecordAndSurvives(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, exact(fs, FsyncAlways))
		restart := func(what string) {
			t.Helper()
			before := dump(e)
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			e = mustNew(t, exact(fs, FsyncAlways))
			if after := dump(e); after != before {
				t.Fatalf("%s:\n%s", what, diffLines(before, after))
			}
		}
		opsDeadLetter(t, e, "a", "1", AddArgs{Group: b("g")})
		// Dead-lettered by expiry: not logged, derived again on replay.
		addOpts(t, e, AddArgs{Queue: b("a"), ID: b("2"), Payload: b("p-2"), Retry: 0, AckTimeout: 100, DeadLetter: b("dlq")})
		mustPop(t, e, "a")
		sleep(100 * time.Millisecond)
		restart("after dead-lettering")
		if !strings.Contains(dump(e), "<a/1000/1/dlq>") || !strings.Contains(dump(e), "<a/100/0/dlq>") {
			t.Fatalf("origins lost:\n%s", dump(e))
		}
		if err := e.Rewrite(); err != nil {
			t.Fatal(err)
		}
		opsWaitRewrite(e)
		restart("after a rewrite")
		adds := countOps(t, fs, record.Add)
		requeueOK(t, e, "dlq", "", "", 2)
		if n := countOps(t, fs, record.Requeue); n != 2 {
			t.Fatalf("%d requeue records for 2 jobs", n)
		}
		if countOps(t, fs, record.Add) != adds || countOps(t, fs, record.Cancel) != 0 {
			t.Fatal("a requeue logged an add or a cancel")
		}
		restart("after requeue")
		if err := e.Rewrite(); err != nil {
			t.Fatal(err)
		}
		opsWaitRewrite(e)
		restart("after requeue and a rewrite")
		if st := e.QueueStats(b("a")); st.Ready != 2 {
			t.Fatalf("a: %+v", st)
		}
		e.Close()
	})
}

// TestOpsInTransaction: the three commands inside MULTI, logged as the
// transaction's unit and replayed.
func TestOpsInTransaction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, exact(fs, FsyncAlways))
		opsDeadLetter(t, e, "q", "1", AddArgs{})
		add(t, e, "q", 500, "later")
		var up []Upcoming
		var n int
		var popped bool
		ticket, err := e.Atomic(func(tx *Engine) {
			if _, err := tx.SetPaused(b("q"), true); err != nil {
				t.Error(err)
			}
			n, _, _ = tx.RequeueDead(b("dlq"), nil, nil)
			_, popped = tx.Pop([][]byte{b("q")})
			up = tx.Upcoming(b("q"), 5)
		})
		if err != nil || e.WaitDurable(ticket) != nil {
			t.Fatal(err)
		}
		if n != 1 || popped || len(up) != 1 || string(up[0].Payload) != "later" {
			t.Fatalf("inside: requeued %d, popped %v, upcoming %v", n, popped, up)
		}
		before := dump(e)
		e.Close()
		e = mustNew(t, exact(fs, FsyncAlways))
		defer e.Close()
		if after := dump(e); after != before {
			t.Fatalf("after restart:\n%s", diffLines(before, after))
		}
		if !e.Paused(b("q")) || state(e, "q", "1") != "ready" {
			t.Fatal("the transaction's effects did not survive")
		}
	})
}

// opsChurn mixes adds that dead-letter, pops, NACKs, expiries, pauses and
// requeues over a few queues.
func opsChurn(t *testing.T, e *Engine, rng *rand.Rand, n int) {
	t.Helper()
	for i := range n {
		q := []byte(fmt.Sprintf("o%d", rng.IntN(3)))
		var tk uint64
		var err error
		switch r := rng.IntN(20); {
		case r < 7:
			a := AddArgs{Queue: q, Payload: []byte(fmt.Sprint("p", i)), Delay: []int64{0, 0, 40}[rng.IntN(3)],
				AckTimeout: []int64{0, 50, 100}[rng.IntN(3)], Retry: int64(rng.IntN(2)), DeadLetter: []byte("odlq"),
				Priority: uint8(rng.IntN(2) * 4)}
			if rng.IntN(3) == 0 {
				a.ID = []byte(fmt.Sprint("id", rng.IntN(20)))
			}
			var res AddResult
			res, err = e.Add(a)
			tk = res.Ticket
		case r < 12:
			if d, ok := e.Pop([][]byte{q, []byte("odlq")}); ok {
				tk = d.Ticket
				if rng.IntN(2) == 0 && d.Reserved {
					_, tk, err = e.Nack(d.Queue, d.ID, 0)
				}
			}
		case r < 14:
			tk, err = e.SetPaused(q, rng.IntN(2) == 0)
		case r < 16:
			var to []byte
			if rng.IntN(3) == 0 {
				to = []byte(fmt.Sprintf("o%d", rng.IntN(3)))
			}
			_, tk, err = e.RequeueDead([]byte("odlq"), nil, to)
		case r < 17:
			if ds, ok := e.ListPop([]byte("odlq"), 1, false); ok && rng.IntN(2) == 0 {
				e.Requeue(ds[0]) // the client left
			}
		default:
			sleep(time.Duration(rng.IntN(60)) * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := e.WaitDurable(tk); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOpsChurnRestartsAndRewrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		rng := rand.New(rand.NewPCG(5, 6))
		e := mustNew(t, exact(fs, FsyncAlways))
		sawOrigin, sawPause := false, false
		for round := range 6 {
			opsChurn(t, e, rng, 400)
			if round%2 == 1 {
				if err := e.Rewrite(); err != nil {
					t.Fatal(err)
				}
				opsChurn(t, e, rng, 50) // writes while it runs
				opsWaitRewrite(e)
			}
			before := dump(e)
			sawOrigin = sawOrigin || strings.Contains(before, "<o")
			sawPause = sawPause || strings.Contains(before, "paused o")
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			e = mustNew(t, exact(fs, FsyncAlways))
			if after := dump(e); after != before {
				e.Close()
				t.Fatalf("round %d: state after restart differs:\n%s", round, diffLines(strings.ReplaceAll(before, " ", "\n"), strings.ReplaceAll(after, " ", "\n")))
			}
		}
		e.Close()
		if !sawOrigin || !sawPause || countOps(t, fs, record.Requeue) == 0 {
			t.Fatalf("the churn checked too little: origin %v, pause %v", sawOrigin, sawPause)
		}
	})
}

func TestOpsChurnFollowersAndSnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 2, Options{}, nil)
		ln, fn := g.nodes[0], g.nodes[1]
		ln.r.setAuto(true)
		rng := rand.New(rand.NewPCG(7, 8))
		opsChurn(t, ln.e, rng, 1500)
		if _, err := ln.e.SetPaused(b("o1"), !ln.e.Paused(b("o1"))); err != nil {
			t.Fatal(err)
		}
		ln.e.SetPaused(b("o2"), true)
		synctest.Wait()
		ln.r.mu.Lock()
		g.log = append(g.log, ln.r.log...) // auto: every batch committed
		ln.r.mu.Unlock()
		ln.applied = len(g.log)
		g.catchUp(fn)
		want := replDump(ln.e)
		if !strings.Contains(want, "origin=") || !strings.Contains(want, "paused ") {
			t.Fatalf("the churn left no origin or no pause:\n%s", want)
		}
		if got := replDump(fn.e); got != want {
			t.Fatalf("the follower differs:\n%s", diffLines(want, got))
		}
		snap := ln.e.Snapshot()
		x := newEngine(t, Options{Replicator: &fakeRepl{closed: true}, Follower: true})
		if err := x.Restore(bytes.NewReader(snap)); err != nil {
			t.Fatal(err)
		}
		if got := replDump(x); got != want {
			t.Fatalf("the restored state differs:\n%s", diffLines(want, got))
		}
	})
}

// opsWaitRewrite waits for a background rewrite to finish.
func opsWaitRewrite(e *Engine) {
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

// TestOpsReservedByDeadline: DELAY.RESERVED lists a queue's reserved jobs
// by ack deadline (TOUCH moves one to the back), bounded by count, and the
// wheel walk and the slab scan agree.
func TestOpsReservedByDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		for i, ack := range []int64{5000, 1000, 3000, 1000, 90_000_000} {
			addOpts(t, e, AddArgs{Queue: b("q"), ID: b(fmt.Sprint("r", i)), Payload: b(fmt.Sprint("p", i)), Retry: -1, AckTimeout: ack})
			mustPop(t, e, "q")
		}
		// Noise: other queues' reservations and delayed jobs, and q's own
		// delayed and ready jobs, which are not reserved.
		for i := range 200 {
			addOpts(t, e, AddArgs{Queue: b("other"), Payload: b("x"), Retry: -1, AckTimeout: int64(500 + i)})
			mustPop(t, e, "other")
			addOpts(t, e, AddArgs{Queue: b("q"), Payload: b("later"), Retry: -1, Delay: int64(100 + i)})
		}
		ids := func(n int) []string {
			var out []string
			for _, r := range e.Reserved(b("q"), n) {
				out = append(out, fmt.Sprintf("%s@%d/%d=%s", r.ID, r.AckDeadline-e.Now(), r.Deliveries, r.Payload))
			}
			return out
		}
		if got, want := ids(10), []string{"r1@1000/1=p1", "r3@1000/1=p3", "r2@3000/1=p2", "r0@5000/1=p0", "r4@90000000/1=p4"}; !slices.Equal(got, want) {
			t.Fatalf("DELAY.RESERVED q:\n got %v\nwant %v", got, want)
		}
		if got := ids(2); !slices.Equal(got, []string{"r1@1000/1=p1", "r3@1000/1=p3"}) {
			t.Fatalf("count 2: %v", got)
		}
		sleep(500 * time.Millisecond)
		if _, _, err := e.Touch(b("q"), b("r1")); err != nil {
			t.Fatal(err)
		}
		if got := ids(2); !slices.Equal(got, []string{"r3@500/1=p3", "r1@1000/1=p1"}) {
			t.Fatalf("after TOUCH r1: %v", got)
		}
		e.mu.Lock()
		qi := e.byName["q"]
		l := jobs.Listing{T: &e.jobs, Queue: qi, State: jobs.StateReserved,
			Deadline: func(s uint32) int64 { d, _ := e.wheel.Due(s); return d }}
		walked, _ := e.wheel.Earliest(nil, 10, -1, 0, l.Mine)
		scanned := l.Scan(10, e.queues[qi].Reserved, nil)
		e.mu.Unlock()
		if !slices.Equal(walked, scanned) || len(walked) != 5 {
			t.Fatalf("the walk %v and the scan %v differ", walked, scanned)
		}
		sleep(600 * time.Millisecond) // r3's deadline passes: back to ready
		if got := ids(10); len(got) != 4 || strings.HasPrefix(got[0], "r3") {
			t.Fatalf("after r3 expired: %v", got)
		}
		if got := e.Reserved(b("none"), 10); got != nil {
			t.Fatalf("no such queue: %v", got)
		}
	})
}
