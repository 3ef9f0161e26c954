package engine

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayd/delayd/jobs"
)

// Replication tests. A fakeRepl stands in for Raft: it keeps each engine's
// proposals in order until the test commits them (into the group's log) or
// fails them; followers apply the group's log with ApplyBatch. Everything
// runs in a synctest bubble, so time moves only when the test sleeps.

var errLost = errors.New("leadership lost")

type fakeProp struct {
	batch []byte
	done  chan struct{}
	err   error
}

func (p *fakeProp) Error() error {
	<-p.done
	return p.err
}

// fakeRepl is one engine's Replicator.
type fakeRepl struct {
	mu      sync.Mutex
	pending []*fakeProp
	closed  bool // after the test: proposals fail at once, so Close never hangs
	// auto commits every proposal at once into log (a lone leader).
	auto bool
	log  [][]byte
	// gate, when set, holds Propose until it is closed (back pressure).
	gate chan struct{}
}

func (r *fakeRepl) setAuto(on bool) {
	r.mu.Lock()
	r.auto = on
	r.mu.Unlock()
}

func (r *fakeRepl) setGate(gate chan struct{}) {
	r.mu.Lock()
	r.gate = gate
	r.mu.Unlock()
}

func (r *fakeRepl) Propose(b []byte) Proposal {
	p := &fakeProp{batch: b, done: make(chan struct{})}
	r.mu.Lock()
	if gate := r.gate; gate != nil {
		r.mu.Unlock()
		<-gate
		r.mu.Lock()
	}
	defer r.mu.Unlock()
	switch {
	case r.closed:
		p.err = errLost
		close(p.done)
	case r.auto:
		r.log = append(r.log, b)
		close(p.done)
	default:
		r.pending = append(r.pending, p)
	}
	return p
}

// take waits until the flusher has proposed everything pending and
// returns the proposals not yet completed, oldest first.
func (r *fakeRepl) take() []*fakeProp {
	synctest.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	ps := r.pending
	r.pending = nil
	return ps
}

// settle completes every proposal made so far with err (nil: committed)
// and returns their batches.
func (r *fakeRepl) settle(err error) [][]byte {
	var out [][]byte
	for _, p := range r.take() {
		p.err = err
		out = append(out, p.batch)
		close(p.done)
	}
	synctest.Wait()
	return out
}

func (r *fakeRepl) close() {
	r.mu.Lock()
	r.closed = true
	ps := r.pending
	r.pending = nil
	r.mu.Unlock()
	for _, p := range ps {
		p.err = errLost
		close(p.done)
	}
}

// node is one member of a test group.
type node struct {
	e       *Engine
	r       *fakeRepl
	applied int // entries of the group's log in e's state
}

// group is a replicated group: log holds the committed batches in order.
type group struct {
	t     *testing.T
	log   [][]byte
	nodes []*node
}

// newGroup starts n engines, the first leading. skew shifts each node's
// clock (nil: none), as machines' clocks differ.
func newGroup(t *testing.T, n int, opts Options, skew []time.Duration) *group {
	t.Helper()
	g := &group{t: t}
	for i := range n {
		o := opts
		r := &fakeRepl{}
		o.Replicator, o.Follower = r, i > 0
		if i < len(skew) && skew[i] != 0 {
			d := skew[i]
			o.Now = func() time.Time { return time.Now().Add(d) }
		}
		e := newEngine(t, o)
		t.Cleanup(r.close) // runs before e.Close: proposals left pending must not hang it
		g.nodes = append(g.nodes, &node{e: e, r: r})
	}
	return g
}

// commit commits every proposal of n into the log: n applied them already.
func (g *group) commit(n *node) {
	g.t.Helper()
	if n.applied != len(g.log) {
		g.t.Fatalf("the leader had not applied the log's %d entries before proposing (%d)", len(g.log), n.applied)
	}
	g.log = append(g.log, n.r.settle(nil)...)
	n.applied = len(g.log)
}

// catchUp applies to n every entry of the log it has not applied.
func (g *group) catchUp(n *node) {
	g.t.Helper()
	for ; n.applied < len(g.log); n.applied++ {
		if err := n.e.ApplyBatch(g.log[n.applied]); err != nil {
			g.t.Fatalf("apply entry %d: %v", n.applied, err)
		}
	}
	synctest.Wait()
}

// sync commits the leader's proposals, brings every follower up to date
// and checks that they all hold the leader's state.
func (g *group) sync(leader *node) {
	g.t.Helper()
	g.commit(leader)
	want := replDump(leader.e)
	for _, n := range g.nodes {
		if n == leader {
			continue
		}
		g.catchUp(n)
		if got := replDump(n.e); got != want {
			g.t.Fatalf("a follower differs from the leader:\n%s", diffLines(want, got))
		}
	}
}

// replDump renders every job and what decides its future, deterministically:
// per queue, the ready list in order, delayed jobs in firing order, reserved
// jobs in expiry order, each with id, payload, due, deliveries, add order,
// ack timeout, retries and dead-letter queue; then the id and add order
// counters. Queues holding no job (kept for their waiters) are left out.
func replDump(e *Engine) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var names []string
	for name, qi := range e.byName {
		if e.queues[qi].isKey() {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var sb strings.Builder
	var buf [jobs.SIDLen]byte
	job := func(s uint32) {
		j := e.jobs.At(s)
		fmt.Fprintf(&sb, "  %s=%q due=%d del=%d seq=%d ack=%d retry=%d dl=%q",
			e.jobs.ID(j, &buf), e.jobs.Payload(j), j.Due, j.Deliveries, j.Seq, j.AckTimeout, j.Retry, e.jobs.DeadLetters[s])
		if j.State == jobs.StateReserved {
			d, _ := e.wheel.Due(s)
			fmt.Fprintf(&sb, " until=%d", d)
		}
		if g, p := e.laneOf(s); g != nil || p != 0 {
			fmt.Fprintf(&sb, " group=%q prio=%d", g, p)
		}
		if o := e.jobs.Origins[s]; o != nil {
			fmt.Fprintf(&sb, " origin=%q/%d/%d/%q", o.Queue, o.AckTimeout, o.Retry, o.DeadLetter)
		}
		if r := e.reasonOf(s); r != "" {
			fmt.Fprintf(&sb, " reason=%q", r)
		}
		sb.WriteString("\n")
	}
	for _, name := range names {
		qi := e.byName[name]
		q := &e.queues[qi]
		fmt.Fprintf(&sb, "%s: %d delayed %d ready %d reserved\n", name, q.Delayed, q.Ready, q.Reserved)
		q.Order.Each(&e.jobs.Slab, func(s uint32) bool {
			job(s)
			return true
		})
		for _, st := range []uint8{jobs.StateDelayed, jobs.StateReserved} {
			var held []uint32
			for s := range e.jobs.Len() {
				if j := e.jobs.At(s); j.State == st && j.Queue == qi {
					held = append(held, s)
				}
			}
			due := func(s uint32) int64 { d, _ := e.wheel.Due(s); return d }
			slices.SortFunc(held, func(a, b uint32) int {
				return cmp.Or(cmp.Compare(due(a), due(b)), cmp.Compare(e.jobs.At(a).Seq, e.jobs.At(b).Seq))
			})
			fmt.Fprintf(&sb, " %s:\n", jobs.StateNames[st])
			for _, s := range held {
				job(s)
			}
		}
	}
	for _, r := range e.limitRecs(nil, 0) {
		fmt.Fprintf(&sb, "limit %s=%+v\n", r.queue, r.limit)
	}
	for _, r := range e.pauseRecs(nil, 0) {
		fmt.Fprintf(&sb, "paused %s\n", r.queue)
	}
	fmt.Fprintf(&sb, "jobs=%d lastSID=%d seq=%d\n", e.njobs, e.lastSID, e.seq)
	return sb.String()
}

func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var sb strings.Builder
	for i := range max(len(w), len(g)) {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		mark := "  "
		if a != b {
			mark = "!="
		}
		fmt.Fprintf(&sb, "%s want %s\n   got  %s\n", mark, a, b)
	}
	return sb.String()
}

// waitDurable waits for a ticket, failing the test if it has not resolved
// after a (fake) minute: no reply may hang.
func waitDurable(t *testing.T, e *Engine, ticket uint64) error {
	t.Helper()
	ch := make(chan error, 1)
	go func() { ch <- e.WaitDurable(ticket) }()
	select {
	case err := <-ch:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("WaitDurable(%d) hangs", ticket)
		return nil
	}
}

func mustPop(t *testing.T, e *Engine, q string) Delivery {
	t.Helper()
	d, ok := e.Pop([][]byte{b(q)})
	if !ok {
		t.Fatalf("pop %s: nothing ready", q)
	}
	return d
}

func ok3[T any](t *testing.T) func(T, uint64, error) uint64 {
	return func(_ T, ticket uint64, err error) uint64 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return ticket
	}
}

// workload runs every kind of write on the leader, with time moving, and
// checks the followers after each step.
func workload(t *testing.T, g *group, ln *node) {
	L := ln.e
	okInt, okBool := ok3[int](t), ok3[bool](t)

	// Adds: delays, ADDAT in the future and the past, client ids, REPLACE,
	// ack timeouts, retries, a dead-letter queue.
	add(t, L, "a", 0, "a0")
	add(t, L, "a", 50, "a50")
	a5000 := add(t, L, "a", 5000, "a5000")
	addAt(t, L, "a", L.Now()+70, "cid-1", "at70")
	addAt(t, L, "b", L.Now()-1000, "past", "past")
	w1 := addOpts(t, L, AddArgs{Queue: b("w"), Payload: b("w1"), AckTimeout: 100, Retry: 1, DeadLetter: b("dead")})
	addOpts(t, L, AddArgs{Queue: b("w"), ID: b("w2"), Payload: b("w2"), AckTimeout: 200, Retry: -1})
	addOpts(t, L, AddArgs{Queue: b("w"), ID: b("w3"), Payload: b("w3"), AckTimeout: 300, Retry: -1})
	addOpts(t, L, AddArgs{Queue: b("w"), ID: b("w4"), Payload: b("w4"), AckTimeout: 300, Retry: -1})
	if res, err := L.Add(AddArgs{Queue: b("a"), ID: b("cid-1"), Payload: b("replaced"), Delay: 30, Replace: true}); err != nil || !res.Added {
		t.Fatalf("replace: %+v %v", res, err)
	}
	g.sync(ln)

	sleep(60 * time.Millisecond) // a50 and the replaced cid-1 fire
	g.sync(ln)
	if p, _ := popPayload(L, "a"); p != "a0" {
		t.Fatalf("pop a: %q", p)
	}
	for _, want := range []string{"w1", "w2", "w3", "w4"} {
		if d := mustPop(t, L, "w"); string(d.Payload) != want || !d.Reserved {
			t.Fatalf("pop w: %+v, want %s reserved", d, want)
		}
	}
	g.sync(ln)

	sleep(50 * time.Millisecond)
	okBool(L.Touch(b("w"), b("w2")))
	okBool(L.Nack(b("w"), b("w3"), 40))
	okInt(L.Ack(b("w"), [][]byte{b("w4")}))
	okInt(L.Cancel(b("a"), [][]byte{b(a5000)}))
	g.sync(ln)

	// w3 comes back from its NACK, w1's reservation expires (a redelivery
	// left), then w1's expires again (none left: dead-lettered).
	sleep(60 * time.Millisecond)
	g.sync(ln)
	for _, want := range []string{"w3", "w1"} {
		if d := mustPop(t, L, "w"); string(d.Payload) != want {
			t.Fatalf("pop w after expiry: %+v, want %s", d, want)
		}
	}
	g.sync(ln)
	sleep(500 * time.Millisecond)
	g.sync(ln)
	if s := L.QueueStats(b("dead")); s.Ready != 1 {
		t.Fatalf("dead letters %+v, want w1 in it: %s", s, replDump(L))
	}
	_ = w1

	// Lists: pushes at both ends, pops, LMOVE, LREM.
	okInt(L.Push(b("l"), [][]byte{b("x"), b("y"), b("z"), b("y")}, false))
	okInt(L.Push(b("l"), [][]byte{b("h")}, true))
	if ds, ok := L.ListPop(b("l"), 1, true); !ok || string(ds[0].Payload) != "y" {
		t.Fatalf("rpop: %+v", ds)
	}
	if _, ok, err := L.Move(b("l"), b("l2"), MoveEnds{ToRight: true}); !ok || err != nil {
		t.Fatal("lmove", err)
	}
	if _, ok, err := L.Move(b("l"), b("l2"), MoveEnds{FromRight: true}); !ok || err != nil {
		t.Fatal("lmove", err)
	}
	okInt(L.Rem(b("l"), 0, b("y")))
	g.sync(ln)

	// Blocked clients served on the leader: their pops and moves are
	// records like any other.
	w := waitFor(t, L, PopDelay, "bw", "bw2")
	addOpts(t, L, AddArgs{Queue: b("bw2"), Payload: b("served"), AckTimeout: 1000})
	if got := served(t, w); got != "served" {
		t.Fatalf("waiter got %q", got)
	}
	// Its client left as the job was handed over: the job goes back.
	if d, _ := w.Result(); !L.Requeue(d) {
		t.Fatal("requeue refused")
	}
	_, mw, err := L.MoveOrWait(b("src"), b("dst"), MoveEnds{})
	if err != nil || mw == nil {
		t.Fatal("MoveOrWait", err)
	}
	okInt(L.Push(b("src"), [][]byte{b("m1"), b("m2")}, false))
	if got := served(t, mw); got != "m1" {
		t.Fatalf("move waiter got %q", got)
	}
	g.sync(ln)

	// A transaction of several writes.
	var txErr error
	ticket, err := L.Atomic(func(tx *Engine) {
		_, err1 := tx.Add(AddArgs{Queue: b("t"), ID: b("t1"), Payload: b("t1"), Delay: 20})
		_, err2 := tx.Add(AddArgs{Queue: b("t"), ID: b("t2"), Payload: b("t2"), AckTimeout: 50, Retry: -1})
		_, ok := tx.Pop([][]byte{b("t")})
		_, _, err3 := tx.Cancel(b("l"), [][]byte{b("nothing")})
		_, _, err4 := tx.Push(b("t"), [][]byte{b("tp")}, true)
		_, _, err5 := tx.Nack(b("t"), b("t2"), 10)
		txErr = errors.Join(err1, err2, err3, err4, err5)
		if !ok {
			txErr = errors.Join(txErr, errors.New("no pop in the transaction"))
		}
	})
	if err != nil || txErr != nil || ticket == 0 {
		t.Fatal("transaction", ticket, err, txErr)
	}
	g.sync(ln)
	sleep(30 * time.Millisecond)
	g.sync(ln)

	// DEL, then FLUSHALL and life after it: ids and add order go on.
	okInt(L.Del([][]byte{b("l2"), b("missing")}))
	g.sync(ln)
	if _, err := L.Flush(); err != nil {
		t.Fatal(err)
	}
	g.sync(ln)
	add(t, L, "after", 10, "f1")
	addOpts(t, L, AddArgs{Queue: b("after"), Payload: b("f2"), AckTimeout: 10, Retry: 0, DeadLetter: b("dead2")})
	sleep(5 * time.Millisecond)
	mustPop(t, L, "after")
	g.sync(ln)
	sleep(time.Second)
	g.sync(ln)
}

// TestFollowersHoldTheLeadersState: a follower fed the leader's committed
// batches holds exactly the leader's jobs after every step of a workload
// with every kind of write, time moving, reservations expiring and dead
// letters.
func TestFollowersHoldTheLeadersState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 3, Options{}, nil)
		workload(t, g, g.nodes[0])
		// A follower that joins late catches up from the whole log.
		if s := replDump(g.nodes[0].e); !strings.Contains(s, "dead2") {
			t.Fatalf("f2 was not dead-lettered:\n%s", s)
		}
	})
}

// TestFollowerReplayMatchesWithTickLargerThanOne: the same with a coarse
// wheel tick, where jobs fire at the end of their tick.
func TestFollowerReplayMatchesWithTickLargerThanOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 2, Options{Tick: 10}, nil)
		workload(t, g, g.nodes[0])
	})
}

// TestFollowerHasNoClock: with no record, nothing moves on a follower
// however long it waits; the next record moves its jobs exactly as the
// leader moved them.
func TestFollowerHasNoClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 2, Options{}, nil)
		ln, fn := g.nodes[0], g.nodes[1]
		L, F := ln.e, fn.e
		add(t, L, "q", 100, "d100")
		addOpts(t, L, AddArgs{Queue: b("r"), ID: b("r1"), Payload: b("r1"), AckTimeout: 50, Retry: -1})
		mustPop(t, L, "r")
		g.sync(ln)
		before := replDump(F)
		start := F.Now()

		sleep(10 * time.Second) // the leader's timer moves its jobs; nothing is committed
		if got := replDump(F); got != before {
			t.Fatalf("the follower's jobs moved without a record:\n%s", diffLines(before, got))
		}
		if F.Now() != start || F.Len(b("q")) != 0 || len(F.Peek(b("q"), 10)) != 0 || state(F, "r", "r1") != "reserved" {
			t.Fatalf("follower: now %d (was %d), len %d, r1 %s", F.Now(), start, F.Len(b("q")), state(F, "r", "r1"))
		}
		if L.Len(b("q")) != 1 || state(L, "r", "r1") != "ready" {
			t.Fatal("the leader's timer did not move its jobs")
		}
		add(t, L, "other", 0, "x") // a record at the leader's time
		g.sync(ln)
		if F.Len(b("q")) != 1 || state(F, "r", "r1") != "ready" || F.Now() < start+10_000 {
			t.Fatalf("after the record: len %d, r1 %s, now %d", F.Len(b("q")), state(F, "r", "r1"), F.Now()-start)
		}
	})
}

// TestLeaderTimeReachesFollowers: a leader whose timer moves jobs tells its
// followers so, although no client wrote: their reads are not stale forever,
// and a follower taking over later holds what the leader held.
func TestLeaderTimeReachesFollowers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 2, Options{}, nil)
		ln, fn := g.nodes[0], g.nodes[1]
		add(t, ln.e, "q", 100, "d100")
		g.sync(ln)
		sleep(200 * time.Millisecond)
		g.sync(ln)
		if fn.e.Len(b("q")) != 1 {
			t.Fatalf("the follower does not see the job the leader's timer fired:\n%s", replDump(fn.e))
		}
	})
}

// TestFollowerRefusesWritesAndServesReads: every write and pop on a
// follower is refused with ErrNotLeader (or, for the calls that return no
// error, does nothing); reads show the replicated jobs.
func TestFollowerRefusesWritesAndServesReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 2, Options{}, nil)
		ln, fn := g.nodes[0], g.nodes[1]
		add(t, ln.e, "q", 0, "ready")
		addAt(t, ln.e, "q", ln.e.Now()+1000, "later", "later")
		addOpts(t, ln.e, AddArgs{Queue: b("r"), ID: b("r1"), Payload: b("r1"), AckTimeout: 5000})
		mustPop(t, ln.e, "r")
		g.sync(ln)
		F := fn.e
		before := replDump(F)

		refused := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, ErrNotLeader) {
				t.Errorf("%s on a follower: %v, want ErrNotLeader", what, err)
			}
		}
		_, err := F.Add(AddArgs{Queue: b("q"), Payload: b("x")})
		refused("Add", err)
		_, _, err = F.PopOrWait([][]byte{b("q")}, PopDelay)
		refused("PopOrWait", err)
		_, _, err = F.PopOrWait([][]byte{b("empty")}, PopLeft)
		refused("PopOrWait on an empty queue", err)
		_, _, err = F.Cancel(b("q"), [][]byte{b("later")})
		refused("Cancel", err)
		_, _, err = F.Ack(b("r"), [][]byte{b("r1")})
		refused("Ack", err)
		_, _, err = F.Nack(b("r"), b("r1"), 0)
		refused("Nack", err)
		_, _, err = F.Touch(b("r"), b("r1"))
		refused("Touch", err)
		_, _, err = F.Push(b("q"), [][]byte{b("p")}, false)
		refused("Push", err)
		_, _, err = F.Move(b("q"), b("q2"), MoveEnds{})
		refused("Move", err)
		_, _, err = F.MoveOrWait(b("empty"), b("q2"), MoveEnds{})
		refused("MoveOrWait", err)
		_, _, err = F.Rem(b("q"), 0, b("ready"))
		refused("Rem", err)
		_, _, err = F.Del([][]byte{b("q")})
		refused("Del", err)
		_, err = F.Flush()
		refused("Flush", err)
		if _, ok := F.Pop([][]byte{b("q")}); ok {
			t.Error("Pop on a follower took a job")
		}
		if _, ok := F.ListPop(b("q"), 1, false); ok {
			t.Error("ListPop on a follower took a job")
		}
		tk, err := F.Atomic(func(tx *Engine) {
			_, err := tx.Add(AddArgs{Queue: b("q"), Payload: b("x")})
			refused("Add in a transaction", err)
		})
		if tk != 0 || err != nil {
			t.Errorf("Atomic on a follower: %d %v", tk, err)
		}
		if got := replDump(F); got != before {
			t.Fatalf("a refused call changed the follower:\n%s", diffLines(before, got))
		}

		// Reads.
		if F.Len(b("q")) != 1 || string(F.Peek(b("q"), 1)[0].Payload) != "ready" ||
			state(F, "q", "later") != "delayed" || state(F, "r", "r1") != "reserved" ||
			!F.Exists(b("r")) || F.QueueStats(b("q")).Delayed != 1 || F.Info().Jobs != 3 ||
			len(F.Keys(nil)) != 2 || len(F.Range(b("q"), 0, -1)) != 1 {
			t.Fatalf("reads on the follower:\n%s", replDump(F))
		}
		if !F.Following() || ln.e.Following() {
			t.Fatal("Following is wrong")
		}
	})
}

// TestFailover: a follower that takes over hands out jobs due in the gap
// (late, never early), keeps reservations' absolute deadlines (an ACK after
// the failover works), makes server ids above every replicated one, and
// continues the add order.
func TestFailover(t *testing.T) {
	for _, tc := range []struct {
		name string
		skew []time.Duration
	}{
		{"same clocks", nil},
		{"new leader's clock behind", []time.Duration{0, -5 * time.Second}},
		{"new leader's clock ahead", []time.Duration{0, 3 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { failover(t, tc.skew) })
		})
	}
}

func failover(t *testing.T, skew []time.Duration) {
	g := newGroup(t, 2, Options{}, skew)
	ln, fn := g.nodes[0], g.nodes[1]
	L, F := ln.e, fn.e
	t0 := L.Now()
	addAt(t, L, "q", t0+1000, "gap1", "gap1")
	addAt(t, L, "q", t0+1000, "gap2", "gap2")
	addAt(t, L, "q", t0+20_000, "late", "late")
	addOpts(t, L, AddArgs{Queue: b("r"), ID: b("held"), Payload: b("held"), AckTimeout: 30_000})
	addOpts(t, L, AddArgs{Queue: b("r"), ID: b("gone"), Payload: b("gone"), AckTimeout: 2000, Retry: -1})
	mustPop(t, L, "r")
	mustPop(t, L, "r")
	var ids []string
	for range 5 {
		ids = append(ids, add(t, L, "ids", 0, "x"))
	}
	g.sync(ln)
	last := L.Now() // the time of the last committed record

	// The leader dies; the gap lasts 10 s.
	L.Follow()
	sleep(10 * time.Second)
	if F.Len(b("q")) != 0 || state(F, "r", "gone") != "reserved" {
		t.Fatal("jobs moved on the follower during the gap")
	}
	F.Lead()
	if F.Following() {
		t.Fatal("still following after Lead")
	}
	now := F.Now()
	if now < last {
		t.Fatalf("the new leader's clock reads %d, before the last replicated time %d", now, last)
	}
	// Jobs due in the gap are ready, in (due, add order); later ones not.
	if got := payloads(F, "q"); !slices.Equal(got, []string{"gap1", "gap2"}) {
		t.Fatalf("after Lead, ready %v", got)
	}
	if state(F, "q", "late") != "delayed" || state(F, "r", "gone") != "ready" {
		t.Fatalf("late %s, gone %s", state(F, "q", "late"), state(F, "r", "gone"))
	}
	// The held reservation keeps its absolute deadline, and can be ACKed.
	if j, _ := F.Get(b("r"), b("held")); j.State != "reserved" || j.AckDeadline != t0+30_000 {
		t.Fatalf("held after failover: %+v, want deadline %d", j, t0+30_000)
	}
	if n, _, err := F.Ack(b("r"), [][]byte{b("held")}); n != 1 || err != nil {
		t.Fatalf("ack after failover: %d %v", n, err)
	}
	// New server ids are above every replicated one.
	id := add(t, F, "ids", 0, "new")
	if id <= slices.Max(ids) {
		t.Fatalf("new id %s not above replicated %s", id, slices.Max(ids))
	}
	// Add order goes on: a job due with "late" fires after it.
	addAt(t, F, "q", t0+20_000, "late2", "late2")
	// Never early: nothing is handed out before its due time on the new
	// leader's clock, including a job added with a delay now.
	add(t, F, "d", 100, "d100")
	var lateOrder []string
	for range 40 {
		sleep(500 * time.Millisecond)
		for _, q := range []string{"q", "d"} {
			for {
				d, ok := F.Pop([][]byte{b(q)})
				if !ok {
					break
				}
				if d.Due > F.Now() {
					t.Fatalf("%s handed out at %d, before its due time %d", d.ID, F.Now(), d.Due)
				}
				if string(d.ID) == "late" || string(d.ID) == "late2" {
					lateOrder = append(lateOrder, string(d.ID))
				}
			}
		}
	}
	if !slices.Equal(lateOrder, []string{"late", "late2"}) {
		t.Fatalf("jobs of equal due time handed out as %v", lateOrder)
	}

	// The old leader follows the new one and holds its state.
	g.sync(fn)
}

// TestSteppedDownLeaderFollowsExactly: a leader steps down cleanly (all its
// batches committed) and follows a new leader whose clock is behind its own:
// it must hold the new leader's state, although its own timer had moved
// jobs the new leader's clock has not reached yet.
func TestSteppedDownLeaderFollowsExactly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 2, Options{}, []time.Duration{0, -3 * time.Second})
		ln, fn := g.nodes[0], g.nodes[1]
		L, F := ln.e, fn.e
		add(t, L, "q", 1000, "early")
		add(t, L, "q", 2000, "later")
		g.sync(ln)
		sleep(1500 * time.Millisecond) // the leader's timer fires "early"
		g.commit(ln)
		g.catchUp(fn)
		L.Follow()
		F.Lead()
		add(t, F, "q", 0, "new") // at the new leader's time
		sleep(4 * time.Second)   // the new leader's timer fires "later"
		add(t, F, "q", 0, "newer")
		g.sync(fn)
		if got := payloads(F, "q"); !slices.Equal(got, []string{"early", "new", "later", "newer"}) {
			t.Fatalf("new leader's order %v", got)
		}
	})
}

// TestFailedBatch: a batch that does not commit fails its writes with
// ErrNotCommitted and every write after it with ErrNotLeader until the
// engine is rebuilt; tickets still pending then fail too; the rebuilt
// engine holds exactly the committed state and leads again.
func TestFailedBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 2, Options{}, nil)
		ln, fn := g.nodes[0], g.nodes[1]
		L, F := ln.e, fn.e
		add(t, L, "q", 0, "committed")
		addOpts(t, L, AddArgs{Queue: b("r"), ID: b("r1"), Payload: b("r1"), AckTimeout: 1000})
		add(t, L, "q", 100, "delayed")
		g.sync(ln)
		snap := F.Snapshot() // a settled follower's snapshot
		if !F.Settled() {
			t.Fatal("a follower is always settled")
		}
		tail := len(g.log)
		mustPop(t, L, "r")
		g.sync(ln) // committed after the snapshot: the tail

		// Batch A: a pop and an add. Batch B: in flight behind it.
		d := mustPop(t, L, "q")
		resA, _ := L.Add(AddArgs{Queue: b("q"), ID: b("lost"), Payload: b("lost")})
		propsA := ln.r.take()
		resB, _ := L.Add(AddArgs{Queue: b("q"), ID: b("lostB"), Payload: b("lostB")})
		synctest.Wait()
		if L.Settled() {
			t.Fatal("Settled with batches in flight")
		}
		for _, p := range propsA {
			p.err = errLost
			close(p.done)
		}
		synctest.Wait()
		for _, tk := range []uint64{d.Ticket, resA.Ticket} {
			if err := waitDurable(t, L, tk); !errors.Is(err, ErrNotCommitted) {
				t.Fatalf("ticket %d of the failed batch: %v", tk, err)
			}
		}
		if _, err := L.Add(AddArgs{Queue: b("q"), Payload: b("x")}); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("a write after a failed batch: %v", err)
		}
		if _, _, err := L.PopOrWait([][]byte{b("q")}, PopDelay); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("a pop after a failed batch: %v", err)
		}
		if L.Settled() {
			t.Fatal("Settled after a failed batch")
		}

		// Rebuild from the snapshot and the committed tail. B is still in
		// flight: its ticket fails at Rebuilt rather than hang.
		L.Reset()
		if err := L.Restore(bytes.NewReader(snap)); err != nil {
			t.Fatal(err)
		}
		for _, entry := range g.log[tail:] {
			if err := L.ApplyBatch(entry); err != nil {
				t.Fatal(err)
			}
		}
		L.Rebuilt()
		if err := waitDurable(t, L, resB.Ticket); !errors.Is(err, ErrNotCommitted) {
			t.Fatalf("ticket of a batch in flight at Rebuilt: %v", err)
		}
		ln.r.settle(errLost) // B fails late: the rebuilt engine must not care
		if got, want := replDump(L), replDump(F); got != want {
			t.Fatalf("rebuilt leader differs from the committed state:\n%s", diffLines(want, got))
		}
		L.Lead()
		if !L.Settled() {
			t.Fatal("not Settled after Rebuilt")
		}
		if _, err := L.Add(AddArgs{Queue: b("q"), ID: b("again"), Payload: b("again")}); err != nil {
			t.Fatalf("a write after the rebuild: %v", err)
		}
		if p, _ := popPayload(L, "q"); p != "committed" {
			t.Fatalf("the job the failed pop took is back? got %q", p)
		}
		g.sync(ln)
		sleep(time.Second)
		g.sync(ln)
	})
}

// TestRebuildFailsPendingTickets: tickets of records the flusher was still
// proposing, or had not taken yet, when the engine is rebuilt fail too, and
// no record of the dropped state is proposed after Rebuilt.
func TestRebuildFailsPendingTickets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 1, Options{}, nil)
		ln := g.nodes[0]
		L := ln.e
		rA, _ := L.Add(AddArgs{Queue: b("q"), Payload: b("A")})
		propsA := ln.r.take()
		gate := make(chan struct{})
		ln.r.setGate(gate)
		rB, _ := L.Add(AddArgs{Queue: b("q"), Payload: b("B")}) // the flusher blocks proposing it
		synctest.Wait()
		rC, _ := L.Add(AddArgs{Queue: b("q"), Payload: b("C")}) // pending behind it
		for _, p := range propsA {
			p.err = errLost
			close(p.done)
		}
		synctest.Wait()
		rebuilt := make(chan struct{})
		go func() {
			L.Reset()
			L.Rebuilt()
			close(rebuilt)
		}()
		synctest.Wait()
		ln.r.setGate(nil)
		close(gate)
		<-rebuilt
		for _, tk := range []uint64{rA.Ticket, rB.Ticket, rC.Ticket} {
			if err := waitDurable(t, L, tk); !errors.Is(err, ErrNotCommitted) {
				t.Fatalf("ticket %d: %v", tk, err)
			}
		}
		L.Lead()
		if _, err := L.Add(AddArgs{Queue: b("q"), ID: b("new"), Payload: b("new")}); err != nil {
			t.Fatal(err)
		}
		var proposed []string
		for _, p := range ln.r.take() {
			p.err = nil
			eachRecord(p.batch, func(rb []byte) {
				var r rec
				if err := r.decode(rb); err == nil && r.op == opAdd {
					proposed = append(proposed, string(r.payload))
					if string(r.payload) == "B" {
						p.err = errLost // B fails late: its outcome no longer matters
					}
				}
			})
			close(p.done)
		}
		synctest.Wait()
		if !slices.Equal(proposed, []string{"B", "new"}) {
			t.Fatalf("proposed after the failure: %v, want B (in flight) and new", proposed)
		}
		if _, err := L.Add(AddArgs{Queue: b("q"), Payload: b("x")}); err != nil {
			t.Fatalf("a write after the rebuild: %v", err)
		}
		if got := payloads(L, "q"); !slices.Equal(got, []string{"new", "x"}) {
			t.Fatalf("rebuilt state: %v", got)
		}
	})
}

// TestSnapshotRoundTrip: a snapshot restored into another engine holds the
// same jobs; a truncated one is refused; Settled says when a leader's
// state is exactly the committed one.
func TestSnapshotRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 2, Options{}, nil)
		ln, fn := g.nodes[0], g.nodes[1]
		L, F := ln.e, fn.e
		ln.r.setAuto(true)
		rng := rand.New(rand.NewPCG(7, 8))
		var ids []string
		churn(t, L, rng, 3000, &ids)
		for i := range 20_000 {
			a := AddArgs{Queue: []byte(fmt.Sprintf("bulk%d", i%50)), Payload: []byte(fmt.Sprint(i)),
				Delay: int64(rng.IntN(3) * rng.IntN(100_000)), AckTimeout: int64(rng.IntN(2) * 1000)}
			if i%7 == 0 {
				a.ID = []byte(fmt.Sprint("c", i))
			}
			if i%11 == 0 {
				a.DeadLetter, a.Retry = b("dlq"), 2
			}
			if _, err := L.Add(a); err != nil {
				t.Fatal(err)
			}
		}
		for range 3000 {
			L.Pop([][]byte{[]byte(fmt.Sprintf("bulk%d", rng.IntN(50)))})
		}
		synctest.Wait()
		if !L.Settled() {
			t.Fatal("not Settled with everything committed")
		}
		want := replDump(L)
		snap := L.Snapshot()
		if err := F.Restore(bytes.NewReader(snap)); err != nil {
			t.Fatal(err)
		}
		if got := replDump(F); got != want {
			t.Fatalf("restored state differs:\n%s", diffLines(want, got))
		}
		// A snapshot of the restored engine is the same snapshot.
		if again := F.Snapshot(); !bytes.Equal(again, snap) {
			t.Fatal("snapshot of a restored engine differs")
		}

		// Truncated anywhere, it is refused.
		for range 25 {
			cut := rng.IntN(len(snap))
			x := newEngine(t, Options{Replicator: &fakeRepl{closed: true}, Follower: true})
			if err := x.Restore(bytes.NewReader(snap[:cut])); err == nil {
				t.Fatalf("a snapshot cut at %d of %d restored", cut, len(snap))
			}
			x.Close()
		}

		// Settled: false while a batch is pending or in flight.
		ln.r.setAuto(false)
		add(t, L, "s", 0, "x")
		if L.Settled() {
			t.Fatal("Settled with a batch in flight")
		}
		ln.r.settle(nil)
		if !L.Settled() {
			t.Fatal("not Settled after the commit")
		}
	})
}

// TestSmallSnapshotCutAtEveryOffset: every strict prefix of a snapshot is
// refused, and Restore of the whole needs nothing else.
func TestSmallSnapshotCutAtEveryOffset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 1, Options{}, nil)
		L := g.nodes[0].e
		g.nodes[0].r.setAuto(true)
		add(t, L, "q", 0, "a")
		add(t, L, "q", 100, "b")
		addOpts(t, L, AddArgs{Queue: b("r"), ID: b("r"), Payload: b("r"), AckTimeout: 100})
		mustPop(t, L, "r")
		synctest.Wait()
		snap := L.Snapshot()
		for cut := range len(snap) {
			x := newEngine(t, Options{Replicator: &fakeRepl{closed: true}, Follower: true})
			if err := x.Restore(bytes.NewReader(snap[:cut])); err == nil {
				t.Fatalf("a snapshot cut at %d of %d restored", cut, len(snap))
			}
			x.Close()
		}
		x := newEngine(t, Options{Replicator: &fakeRepl{closed: true}, Follower: true})
		if err := x.Restore(bytes.NewReader(snap)); err != nil {
			t.Fatal(err)
		}
		if got, want := replDump(x), replDump(L); got != want {
			t.Fatalf("restored:\n%s", diffLines(want, got))
		}
	})
}

// TestWaitersAcrossRoleChanges: a client blocked on the leader stays parked
// when it follows (the commands layer unblocks it) and is never served from
// replicated records, which would take a job no record took; a follower's
// blocking pop is refused. A FLUSHALL replayed under it keeps it intact.
func TestWaitersAcrossRoleChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 2, Options{}, nil)
		ln, fn := g.nodes[0], g.nodes[1]
		L, F := ln.e, fn.e
		w := waitFor(t, L, PopDelay, "q")
		mw, err := func() (*Waiter, error) { _, w, err := L.MoveOrWait(b("src"), b("dst"), MoveEnds{}); return w, err }()
		if err != nil {
			t.Fatal(err)
		}
		g.sync(ln)
		L.Follow()
		F.Lead()
		add(t, F, "q", 0, "for nobody on the old leader")
		okInt := ok3[int](t)
		okInt(F.Push(b("src"), [][]byte{b("m")}, false))
		g.sync(fn)
		for _, w := range []*Waiter{w, mw} {
			select {
			case <-w.Ready():
				d, _ := w.Result()
				t.Fatalf("a follower served a parked client from a replicated record: %q", d.Payload)
			default:
			}
		}
		if _, _, err := L.PopOrWait([][]byte{b("q")}, PopDelay); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("blocking pop on a follower: %v", err)
		}
		// A FLUSHALL and more records with the clients still parked.
		if _, err := F.Flush(); err != nil {
			t.Fatal(err)
		}
		add(t, F, "q", 0, "after flush")
		g.sync(fn)
		// The commands layer unblocks them now.
		for _, w := range []*Waiter{w, mw} {
			if d, ok := L.CancelWait(w); ok {
				t.Fatalf("cancelled waiter had a job %q", d.Payload)
			}
		}
		if n := L.Info().Waiters; n != 0 {
			t.Fatalf("%d waiters left", n)
		}
		g.sync(fn)
		// And the old leader can lead again, with its waiters' queues sane.
		F.Follow()
		L.Lead()
		w2 := waitFor(t, L, PopDelay, "empty")
		add(t, L, "empty", 0, "x")
		if got := served(t, w2); got != "x" {
			t.Fatalf("waiter got %q", got)
		}
		g.sync(ln)
	})
}

// TestLeadServesParkedClients: clients still parked when a node leads again
// (Follow, then Lead, without the commands layer unblocking them) are
// served from what the node now holds, with records like any pop.
func TestLeadServesParkedClients(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 2, Options{}, nil)
		ln, fn := g.nodes[0], g.nodes[1]
		L, F := ln.e, fn.e
		w := waitFor(t, L, PopDelay, "q")
		g.sync(ln)
		L.Follow()
		F.Lead()
		add(t, F, "q", 0, "x")
		g.sync(fn)
		F.Follow()
		L.Lead()
		if got := served(t, w); got != "x" {
			t.Fatalf("waiter got %q", got)
		}
		g.sync(ln)
	})
}

// TestResetKeepsWaitersAndReadsDuringRebuild: between Reset and Restore a
// read must not crash, and parked clients survive the rebuild.
func TestResetKeepsWaitersAndReadsDuringRebuild(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 2, Options{}, nil)
		ln, fn := g.nodes[0], g.nodes[1]
		L, F := ln.e, fn.e
		add(t, L, "q", 50, "x")
		g.sync(ln)
		w := waitFor(t, L, PopDelay, "empty")
		snap := F.Snapshot()
		L.Reset()
		_ = L.Len(b("q"))
		_ = L.Peek(b("q"), 1)
		_ = L.Range(b("q"), 0, -1)
		_ = L.Version(b("q"))
		_ = L.Snapshot()
		if err := L.Restore(bytes.NewReader(snap)); err != nil {
			t.Fatal(err)
		}
		L.Rebuilt()
		L.Lead()
		add(t, L, "empty", 0, "y")
		if got := served(t, w); got != "y" {
			t.Fatalf("waiter got %q", got)
		}
	})
}

// TestFollowersMatchUnderAMovingClock: the leader's clock moves while an
// operation runs (here by 0.3 ms at every reading, as a busy machine's
// does between two readings), and jobs fall due every millisecond; a
// follower still holds exactly the leader's state after random writes of
// every kind.
func TestFollowersMatchUnderAMovingClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var reads atomic.Int64
		r := &fakeRepl{auto: true}
		L := newEngine(t, Options{Replicator: r, Now: func() time.Time {
			return time.Now().Add(time.Duration(reads.Add(1)) * 300 * time.Microsecond)
		}})
		t.Cleanup(r.close)
		fr := &fakeRepl{}
		F := newEngine(t, Options{Replicator: fr, Follower: true})
		t.Cleanup(fr.close)
		applied := 0
		rng := rand.New(rand.NewPCG(3, 4))
		var ids []string
		for round := range 60 {
			for i := range 200 { // jobs due at every millisecond from now on
				L.Add(AddArgs{Queue: []byte(fmt.Sprintf("q%d", i%3)), Delay: int64(i), Payload: []byte("tick"),
					AckTimeout: int64(i % 2 * 7), Retry: -1})
			}
			churn(t, L, rng, 50, &ids)
			synctest.Wait()
			r.mu.Lock()
			log := r.log[applied:]
			applied = len(r.log)
			r.mu.Unlock()
			for _, batch := range log {
				if err := F.ApplyBatch(batch); err != nil {
					t.Fatal(err)
				}
			}
			if want, got := replDump(L), replDump(F); got != want {
				t.Fatalf("round %d: the follower differs:\n%s", round, diffLines(want, got))
			}
		}
	})
}

// With a window of two, a third batch waits for a commit, and the writes
// made meanwhile go out as one larger batch (fewer Raft entries), in order.
func TestReplicaWindowGathersBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 2, Options{ReplicaWindow: 2}, nil)
		ln, fn := g.nodes[0], g.nodes[1]
		L := ln.e
		var tickets []uint64
		addOne := func(id string) {
			res, err := L.Add(AddArgs{Queue: b("q"), ID: b(id), Payload: b(id)})
			if err != nil {
				t.Fatal(err)
			}
			tickets = append(tickets, res.Ticket)
			synctest.Wait() // the flusher proposes what it may
		}
		addOne("a")
		addOne("b")
		addOne("c")
		addOne("d")
		first := ln.r.take()
		if len(first) != 2 {
			t.Fatalf("%d batches in flight, want the window's 2", len(first))
		}
		for _, p := range first {
			close(p.done) // committed
			g.log = append(g.log, p.batch)
		}
		synctest.Wait()
		rest := ln.r.take()
		if len(rest) != 1 {
			t.Fatalf("the writes made while the window was full went out as %d batches, want 1", len(rest))
		}
		for _, id := range []string{"c", "d"} {
			if !bytes.Contains(rest[0].batch, []byte(id)) {
				t.Fatalf("the gathered batch lacks %q", id)
			}
		}
		close(rest[0].done)
		g.log = append(g.log, rest[0].batch)
		ln.applied = len(g.log)
		for _, tk := range tickets {
			if err := waitDurable(t, L, tk); err != nil {
				t.Fatalf("ticket %d: %v", tk, err)
			}
		}
		g.catchUp(fn)
		if want, got := replDump(L), replDump(fn.e); want != got {
			t.Fatalf("the follower differs:\n%s", diffLines(want, got))
		}
	})
}
