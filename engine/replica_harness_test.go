package engine

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/record"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
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
	b = bytes.Clone(b) // the journal gathers the next batch in its array
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
	for _, r := range record.LimitRecs(nil, &e.limits, 0) {
		fmt.Fprintf(&sb, "limit %s=%+v\n", r.Queue, r.Limit)
	}
	for _, r := range record.PauseRecs(nil, &e.limits, 0) {
		fmt.Fprintf(&sb, "paused %s\n", r.Queue)
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

// eachRecord calls fn for each length-prefixed record in buf.
func eachRecord(buf []byte, fn func([]byte)) {
	for len(buf) > 0 {
		n, k := binary.Uvarint(buf)
		fn(buf[k : k+int(n)])
		buf = buf[k+int(n):]
	}
}
