package cluster

import (
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/delayd/delayd/engine"
)

// Three nodes in one process, on real loopback sockets, with real Raft:
// what the engine's replication seam and the state machine do together.
// The chaos test (integration_test) does the same with real processes and
// faults; these are the quick, exact checks.

type testNode struct {
	c   *Cluster
	eng *engine.Engine
	dir string
	cfg Config
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startNode starts a node; before runs on its Cluster before Start.
func startNode(t testing.TB, cfg Config, before ...func(*Cluster)) *testNode {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	if cfg.BusAddr == "" {
		cfg.BusAddr = freeAddr(t)
	}
	if cfg.AnnounceAddr == "" {
		cfg.AnnounceAddr = freeAddr(t) // no RESP server here: only what MOVED would name
	}
	// Not much shorter: on a loaded 2-core machine a shorter timeout makes
	// leadership flap mid-test.
	cfg.ElectionTimeout = time.Second
	if cfg.Fsync == "" {
		cfg.Fsync = "everysec"
	}
	if os.Getenv("DELAYD_CLUSTER_VERBOSE") == "1" {
		cfg.Logger = zerolog.New(os.Stderr)
	} else {
		cfg.Logger = zerolog.Nop()
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.versionOf = func(string) (int, error) { return FormatVersion, nil } // no RESP server to ask
	eng, err := engine.New(engine.Options{Replicator: c, Follower: true, ReplicaWindow: ReplicaWindow, Logger: cfg.Logger})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range before {
		f(c)
	}
	if err := c.Start(eng, nil); err != nil {
		t.Fatal(err)
	}
	n := &testNode{c: c, eng: eng, dir: cfg.Dir, cfg: cfg}
	t.Cleanup(n.stop)
	return n
}

func (n *testNode) stop() {
	if n.c == nil {
		return
	}
	n.eng.Stop()
	n.c.Close()
	n.eng.Close()
	n.c = nil
}

// waitFor polls cond until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func leaderOf(t testing.TB, nodes []*testNode) *testNode {
	t.Helper()
	var l *testNode
	waitFor(t, 10*time.Second, "a leader that takes writes", func() bool {
		for _, n := range nodes {
			if n.c != nil && n.c.Writable() {
				l = n
				return true
			}
		}
		return false
	})
	return l
}

func startGroup(t testing.TB, size int) []*testNode {
	t.Helper()
	first := startNode(t, Config{Bootstrap: true})
	nodes := []*testNode{first}
	leaderOf(t, nodes)
	for i := 1; i < size; i++ {
		n := startNode(t, Config{})
		if err := first.c.Join(n.c.ID(), n.cfg.BusAddr, n.cfg.AnnounceAddr); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	return nodes
}

// add adds a job with a client id on whichever node leads, retrying as a
// client would when leadership moves (the id makes a retry idempotent).
func add(t *testing.T, nodes []*testNode, queue, id string, delay int64) {
	t.Helper()
	for try := 0; ; try++ {
		eng := leaderOf(t, nodes).eng
		res, err := eng.Add(engine.AddArgs{Queue: []byte(queue), ID: []byte(id), Payload: []byte("p-" + id), Delay: delay, AckTimeout: -1, Retry: -1})
		if err == nil {
			err = eng.WaitDurable(res.Ticket)
		}
		if err == nil {
			return
		}
		if try == 20 || !(errors.Is(err, engine.ErrNotLeader) || errors.Is(err, engine.ErrNotCommitted)) {
			t.Fatalf("add %s: %v", id, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestReplicatesAndFailsOver(t *testing.T) {
	nodes := startGroup(t, 3)
	l := leaderOf(t, nodes)
	for i := range 100 {
		add(t, nodes, "q", fmt.Sprint("job", i), int64(i%3)*60_000)
	}
	// Every follower has every job, delayed ones still delayed (their
	// clocks do not move jobs).
	for _, n := range nodes {
		waitFor(t, 5*time.Second, "the jobs on every node", func() bool {
			st := n.eng.QueueStats([]byte("q"))
			return st.Ready+st.Delayed == 100
		})
		if st := n.eng.QueueStats([]byte("q")); st.Ready != 34 {
			t.Fatalf("node %s: %d ready, want 34", n.c.ID()[:8], st.Ready)
		}
	}
	// A follower refuses writes.
	for _, n := range nodes {
		if n == l {
			continue
		}
		if _, err := n.eng.Add(engine.AddArgs{Queue: []byte("q"), Payload: []byte("x"), AckTimeout: -1, Retry: -1}); !errors.Is(err, engine.ErrNotLeader) {
			t.Fatalf("a follower took a write: %v", err)
		}
	}
	// A pop on the leader is replicated as the job it took.
	l = leaderOf(t, nodes)
	d, ok := l.eng.Pop([][]byte{[]byte("q")})
	if !ok {
		t.Fatal("nothing to pop")
	}
	if err := l.eng.WaitDurable(d.Ticket); err != nil {
		t.Skipf("leadership moved during the pop (%v): the machine is too loaded for this check", err)
	}
	// Kill the leader; another takes over with all 99 jobs.
	l.stop()
	var rest []*testNode
	for _, n := range nodes {
		if n != l {
			rest = append(rest, n)
		}
	}
	nl := leaderOf(t, rest)
	st := nl.eng.QueueStats([]byte("q"))
	if st.Ready+st.Delayed != 99 {
		t.Fatalf("new leader holds %d jobs, want 99", st.Ready+st.Delayed)
	}
	if _, ok := nl.eng.Get([]byte("q"), d.ID); ok {
		t.Fatalf("the job popped on the old leader is back")
	}
	add(t, rest, "q", "after", 0)
}

func TestRestartRestoresFromSnapshotAndLog(t *testing.T) {
	nodes := startGroup(t, 3)
	l := leaderOf(t, nodes)
	for i := range 50 {
		add(t, nodes, "r", fmt.Sprint("a", i), 60_000)
	}
	l = leaderOf(t, nodes)
	if err := l.c.r().Snapshot().Error(); err != nil {
		t.Fatalf("leader snapshot while idle: %v", err)
	}
	for i := range 50 {
		add(t, nodes, "r", fmt.Sprint("b", i), 0)
	}
	// Restart a follower from its data dir: it restores and catches up.
	var f *testNode
	for _, n := range nodes {
		if n != l {
			f = n
			break
		}
	}
	cfg := f.cfg
	f.stop()
	cfg.NodeID = ""
	g := startNode(t, cfg)
	waitFor(t, 10*time.Second, "the restarted follower to catch up", func() bool {
		st := g.eng.QueueStats([]byte("r"))
		return st.Ready == 50 && st.Delayed == 50
	})
}

// A job added while a worker waits goes straight to it; the pop must reach
// the followers too (found by the chaos test: such jobs came back after a
// failover).
func TestServedWaiterReplicates(t *testing.T) {
	nodes := startGroup(t, 3)
	l := leaderOf(t, nodes)
	_, w, err := l.eng.PopOrWait([][]byte{[]byte("s")}, engine.PopDelay)
	if err != nil || w == nil {
		t.Fatalf("park: %v %v", w, err)
	}
	res, err := l.eng.Add(engine.AddArgs{Queue: []byte("s"), ID: []byte("first"), Payload: []byte("p"), AckTimeout: 0, Retry: -1})
	if err != nil {
		t.Fatal(err)
	}
	<-w.Ready()
	d, ok := w.Result()
	if !ok {
		t.Fatal("the waiter got nothing")
	}
	if err := l.eng.WaitDurable(max(res.Ticket, d.Ticket)); err != nil {
		t.Fatal(err)
	}
	add(t, nodes, "s", "second", 0)
	for _, n := range nodes {
		waitFor(t, 5*time.Second, "the second job on every node", func() bool {
			_, ok := n.eng.Get([]byte("s"), []byte("second"))
			return ok
		})
		if _, ok := n.eng.Get([]byte("s"), []byte("first")); ok {
			t.Fatalf("node %s still holds the job a waiter took", n.c.ID()[:8])
		}
	}
}

// A client still parked on a node that stopped leading (before the
// commands layer unblocks it) must not be handed a job by a replicated
// add: that pop would be logged nowhere.
func TestReplayDoesNotServeParkedClients(t *testing.T) {
	nodes := startGroup(t, 3)
	l := leaderOf(t, nodes)
	var f *testNode
	for _, n := range nodes {
		if n != l {
			f = n
			break
		}
	}
	// Park on the follower's engine as if it had been the leader.
	f.eng.Lead()
	_, w, err := f.eng.PopOrWait([][]byte{[]byte("parked")}, engine.PopDelay)
	if err != nil || w == nil {
		t.Fatalf("park: %v %v", w, err)
	}
	f.eng.Follow()
	add(t, nodes, "parked", "j1", 0)
	waitFor(t, 5*time.Second, "the job on the follower", func() bool {
		_, ok := f.eng.Get([]byte("parked"), []byte("j1"))
		return ok
	})
	select {
	case <-w.Ready():
		t.Fatal("a replicated add served a client parked on a follower")
	default:
	}
	f.eng.CancelWait(w)
}
