package cluster

import (
	"errors"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// rejoinRig is a group of three holding rejoinJobs jobs, its leader's log
// compacted under a snapshot, and hooks on every node's snapshot sends:
// those to the id in old are held at their start until release closes
// (held closes when the first is), and what they return goes to oldDone.
type rejoinRig struct {
	nodes   []*testNode
	mu      sync.Mutex
	old     raft.ServerID
	hold    bool
	held    chan struct{}
	release chan struct{}
	oldDone chan error
	once    sync.Once
}

const rejoinJobs = 2000

func (r *rejoinRig) isOld(id raft.ServerID) (old, hold bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.old != "" && id == r.old, r.hold
}

func (r *rejoinRig) hooks(c *Cluster) {
	c.trailingLogs = 64 // a short log behind each snapshot: a new node needs one
	c.trans.beforeInstall = func(id raft.ServerID) {
		if old, hold := r.isOld(id); old && hold {
			r.once.Do(func() { close(r.held) })
			<-r.release
		}
	}
	c.trans.afterInstall = func(id raft.ServerID, err error) {
		if old, _ := r.isOld(id); old {
			select {
			case r.oldDone <- err:
			default:
			}
		}
	}
}

// newRejoinRig starts the group, its nodes snapshotting every threshold
// entries (0: the default, which these tests never reach).
func newRejoinRig(t *testing.T, hold bool, threshold uint64) *rejoinRig {
	r := &rejoinRig{hold: hold, held: make(chan struct{}), release: make(chan struct{}), oldDone: make(chan error, 16)}
	first := startNode(t, Config{Bootstrap: true, SnapshotThreshold: threshold}, r.hooks)
	r.nodes = []*testNode{first}
	leaderOf(t, r.nodes)
	for range 2 {
		x := startNode(t, Config{SnapshotThreshold: threshold}, r.hooks)
		if err := first.c.Join(x.c.ID(), x.cfg.BusAddr, x.cfg.AnnounceAddr); err != nil {
			t.Fatal(err)
		}
		r.nodes = append(r.nodes, x)
	}
	fill(t, r.nodes, rejoinJobs)
	// An entry each, past the 64 kept behind the snapshot.
	for i := range 200 {
		add(t, r.nodes, "one", strconv.Itoa(i), 3_600_000)
	}
	l := leaderOf(t, r.nodes)
	if err := l.c.takeSnapshot(l.c.r()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the leader's log compacted under its snapshot", func() bool {
		from, _ := l.c.store.FirstIndex()
		return from > 1
	})
	return r
}

// wipe stops a follower, removes its directory and starts it again at its
// bus address with a new id (not joined: the test joins it), as in before.
func (r *rejoinRig) wipe(t *testing.T, l *testNode, before ...func(*Cluster)) (*testNode, Config) {
	var f *testNode
	for _, x := range r.nodes {
		if x != l {
			f = x
			break
		}
	}
	r.mu.Lock()
	r.old = raft.ServerID(f.c.ID())
	r.mu.Unlock()
	cfg := f.cfg
	f.stop()
	if err := os.RemoveAll(cfg.Dir); err != nil {
		t.Fatal(err)
	}
	cfg.Dir, cfg.NodeID = "", ""
	return startNode(t, cfg, append([]func(*Cluster){r.hooks}, before...)...), cfg
}

// A node whose data dir was wiped, started again at its old bus address
// with a new id, restores the leader's snapshot once. The leader's
// replication to the old id reaches the address too, and hashicorp/raft
// makes a last attempt to bring a removed member up to date: that
// attempt's snapshot is held here until the new id's install is done,
// and then must not be sent (the build before sent it, and the node
// restored the snapshot twice).
func TestWipedNodeRestoresOneSnapshot(t *testing.T) {
	r := newRejoinRig(t, true, 0)
	l := leaderOf(t, r.nodes)
	g, cfg := r.wipe(t, l)
	select {
	case <-r.held:
	case <-time.After(30 * time.Second):
		close(r.release)
		t.Fatal("the leader sent no snapshot to the old id at the wiped node's address")
	}
	if err := l.c.Join(g.c.ID(), cfg.BusAddr, cfg.AnnounceAddr); err != nil {
		close(r.release)
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the wiped node to hold every job", func() bool {
		return g.eng.QueueStats([]byte("scale")).Delayed == rejoinJobs
	})
	close(r.release)
	select {
	case err := <-r.oldDone:
		if !errors.Is(err, errNotMember) {
			t.Errorf("the old id's snapshot: %v, want it refused (%v)", err, errNotMember)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the old id's snapshot never ended")
	}
	if n := g.c.fsm.restores.Load(); n != 1 {
		t.Errorf("the wiped node restored %d snapshots, want 1", n)
	}
}

// A node started with --cluster-join and no state holds the snapshots
// sent to it until its join is answered, and then takes the last: the
// leader's replication to the id its address had reaches it first, and
// the snapshot it sends is not restored besides the one for its new id.
func TestJoiningNodeHoldsSnapshotsUntilJoined(t *testing.T) {
	r := newRejoinRig(t, false, 0)
	l := leaderOf(t, r.nodes)
	// As New does with --cluster-join (no RESP server here to join through:
	// the test joins it, and opens the gate as joinLoop would).
	g, cfg := r.wipe(t, l, func(c *Cluster) {
		c.waitUntil = time.Now().Add(time.Hour)
		c.waitJoin.Store(true) // publishes waitUntil to admitSnapshots
	})
	waitFor(t, 30*time.Second, "a snapshot held by the wiped node", func() bool {
		g.c.trans.heldMu.Lock()
		defer g.c.trans.heldMu.Unlock()
		return len(g.c.trans.held) > 0
	})
	if n := g.c.fsm.restores.Load(); n != 0 {
		t.Errorf("the node restored %d snapshots before its join", n)
	}
	if err := l.c.Join(g.c.ID(), cfg.BusAddr, cfg.AnnounceAddr); err != nil {
		t.Fatal(err)
	}
	// The new id's replication finds the empty log too, and sends its own.
	waitFor(t, 30*time.Second, "a second snapshot held", func() bool {
		g.c.trans.heldMu.Lock()
		defer g.c.trans.heldMu.Unlock()
		return len(g.c.trans.held) > 1
	})
	g.c.waitJoin.Store(false)
	waitFor(t, 30*time.Second, "the wiped node to hold every job", func() bool {
		return g.eng.QueueStats([]byte("scale")).Delayed == rejoinJobs
	})
	select {
	case err := <-r.oldDone:
		if err == nil {
			t.Errorf("the old id's snapshot was taken")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the old id's snapshot never ended")
	}
	if n := g.c.fsm.restores.Load(); n != 1 {
		t.Errorf("the wiped node restored %d snapshots, want 1", n)
	}
}

// A leader sending a snapshot takes none of its own meanwhile: that would
// compact its log past the one being sent, which the follower, once it
// restored it, could not catch up from, and it would be sent another.
func TestLeaderKeepsLogWhileSendingSnapshot(t *testing.T) {
	r := newRejoinRig(t, true, 32)
	l := leaderOf(t, r.nodes)
	g, cfg := r.wipe(t, l, func(c *Cluster) {
		c.waitUntil = time.Now().Add(time.Hour)
		c.waitJoin.Store(true) // the old id's snapshot is held, then refused
	})
	r.mu.Lock()
	r.old = raft.ServerID(g.c.ID()) // hold the new id's
	r.mu.Unlock()
	if err := l.c.Join(g.c.ID(), cfg.BusAddr, cfg.AnnounceAddr); err != nil {
		t.Fatal(err)
	}
	g.c.waitJoin.Store(false)
	select {
	case <-r.held:
	case <-time.After(30 * time.Second):
		close(r.release)
		t.Fatal("the leader sent no snapshot to the new id")
	}
	sent := snapshotIndex(l.c)
	// Past the 64 entries kept behind a snapshot, and past the threshold.
	for i := range 150 {
		add(t, r.nodes, "two", strconv.Itoa(i), 3_600_000)
	}
	// snapshotLoop looks every second: three looks.
	deadline := time.Now().Add(3500 * time.Millisecond)
	for time.Now().Before(deadline) && snapshotIndex(l.c) == sent {
		time.Sleep(50 * time.Millisecond)
	}
	if now := snapshotIndex(l.c); now != sent {
		t.Errorf("the leader took a snapshot at %d while sending the one at %d", now, sent)
	}
	close(r.release)
	waitFor(t, 30*time.Second, "the wiped node to hold every job", func() bool {
		return g.eng.QueueStats([]byte("scale")).Delayed == rejoinJobs && g.eng.QueueStats([]byte("two")).Delayed == 150
	})
	if n := g.c.fsm.restores.Load(); n != 1 {
		t.Errorf("the wiped node restored %d snapshots, want 1", n)
	}
}

// A snapshot being sent when its receiver is removed stops at the next
// check: a removal in the middle of a long transfer cuts it short.
func TestMemberReaderStopsOnRemoval(t *testing.T) {
	member := true
	asks := 0
	r := &memberReader{r: zeros{}, ok: func() bool { asks++; return member }}
	buf := make([]byte, 32<<10)
	read := 0
	for read < 3*memberCheck {
		n, err := r.Read(buf)
		if err != nil {
			t.Fatalf("after %d bytes: %v", read, err)
		}
		read += n
	}
	if asks != 3 {
		t.Errorf("asked %d times in %d bytes, want 3", asks, read)
	}
	member = false
	for read < 5*memberCheck {
		n, err := r.Read(buf)
		read += n
		if errors.Is(err, errNotMember) {
			if read > 4*memberCheck {
				t.Errorf("stopped after %d bytes, want by %d", read, 4*memberCheck)
			}
			return
		}
	}
	t.Fatal("the stream went on after its receiver was removed")
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }
