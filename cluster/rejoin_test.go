package cluster

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// rejoinRig is a group of three holding rejoinJobs jobs, its leader's log
// compacted under a snapshot, and hooks on every node's snapshot sends:
// those to an id in hold wait at their start until release closes; each
// send's start and result are recorded by id.
type rejoinRig struct {
	nodes   []*testNode
	release chan struct{}

	mu      sync.Mutex
	hold    map[raft.ServerID]bool
	started map[raft.ServerID]int
	ended   map[raft.ServerID][]error
}

const rejoinJobs = 2000

func (r *rejoinRig) hooks(c *Cluster) {
	c.trailingLogs = 64 // a short log behind each snapshot: a new node needs one
	c.trans.beforeInstall = func(id raft.ServerID) {
		r.mu.Lock()
		r.started[id]++
		hold := r.hold[id]
		r.mu.Unlock()
		if hold {
			<-r.release
		}
	}
	c.trans.afterInstall = func(id raft.ServerID, err error) {
		r.mu.Lock()
		r.ended[id] = append(r.ended[id], err)
		r.mu.Unlock()
	}
}

func (r *rejoinRig) holdSends(id string) {
	r.mu.Lock()
	r.hold[raft.ServerID(id)] = true
	r.mu.Unlock()
}

// waitSent waits until a send to id started, or (ended) ended, and returns
// the first one's result.
func (r *rejoinRig) waitSent(t *testing.T, id string, ended bool) error {
	t.Helper()
	var err error
	waitFor(t, 30*time.Second, "a snapshot sent to "+id[:8], func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		if !ended {
			return r.started[raft.ServerID(id)] > 0
		}
		if e := r.ended[raft.ServerID(id)]; len(e) > 0 {
			err = e[0]
			return true
		}
		return false
	})
	return err
}

// newRejoinRig starts the group (its nodes snapshot at the default
// threshold, which these tests never reach: they take snapshots).
func newRejoinRig(t *testing.T) *rejoinRig {
	r := &rejoinRig{release: make(chan struct{}), hold: map[raft.ServerID]bool{},
		started: map[raft.ServerID]int{}, ended: map[raft.ServerID][]error{}}
	t.Cleanup(func() {
		select {
		case <-r.release:
		default:
			close(r.release) // a failed test's held sends end, and the nodes stop
		}
	})
	first := startNode(t, Config{Bootstrap: true}, r.hooks)
	r.nodes = []*testNode{first}
	leaderOf(t, r.nodes)
	for range 2 {
		x := startNode(t, Config{}, r.hooks)
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
// bus address with a new id (not joined: the test joins it); holdOld holds
// the snapshots sent to its old id. It returns the node, its config and
// its old id.
func (r *rejoinRig) wipe(t *testing.T, l *testNode, holdOld bool) (*testNode, Config, string) {
	var f *testNode
	for _, x := range r.nodes {
		if x != l {
			f = x
			break
		}
	}
	old := f.c.ID()
	if holdOld {
		r.holdSends(old)
	}
	cfg := f.cfg
	f.stop()
	if err := os.RemoveAll(cfg.Dir); err != nil {
		t.Fatal(err)
	}
	cfg.Dir, cfg.NodeID = "", ""
	return startNode(t, cfg, r.hooks), cfg, old
}

// A node whose data dir was wiped, started again at its old bus address
// with a new id, restores the leader's snapshot once. The leader's
// replication to the old id reaches the address too, and hashicorp/raft
// makes a last attempt to bring a removed member up to date: that
// attempt's snapshot is held here until the new id's install is done,
// and then must not be sent (the build before sent it, and the node
// restored the snapshot twice; the node now refuses it too, see below).
func TestWipedNodeRestoresOneSnapshot(t *testing.T) {
	r := newRejoinRig(t)
	l := leaderOf(t, r.nodes)
	g, cfg, old := r.wipe(t, l, true)
	r.waitSent(t, old, false)
	if err := l.c.Join(g.c.ID(), cfg.BusAddr, cfg.AnnounceAddr); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the wiped node to hold every job", func() bool {
		return g.eng.QueueStats([]byte("scale")).Delayed == rejoinJobs
	})
	close(r.release)
	if err := r.waitSent(t, old, true); !errors.Is(err, errNotMember) {
		t.Errorf("the old id's snapshot: %v, want it not sent (%v)", err, errNotMember)
	}
	if n := g.c.fsm.restores.Load(); n != 1 {
		t.Errorf("the wiped node restored %d snapshots, want 1", n)
	}
}

// The snapshot the leader sends to the old id as soon as the wiped node
// listens, before its join, is refused by the node: it names the id it is
// meant for.
func TestWipedNodeRefusesOldIDsSnapshot(t *testing.T) {
	r := newRejoinRig(t)
	l := leaderOf(t, r.nodes)
	g, cfg, old := r.wipe(t, l, false)
	if err := r.waitSent(t, old, true); err == nil || !strings.Contains(err.Error(), errNotForMe.Error()) {
		t.Errorf("the old id's snapshot: %v, want it refused (%v)", err, errNotForMe)
	}
	if n := g.c.fsm.restores.Load(); n != 0 {
		t.Errorf("the node restored %d snapshots before its join", n)
	}
	if err := l.c.Join(g.c.ID(), cfg.BusAddr, cfg.AnnounceAddr); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the wiped node to hold every job", func() bool {
		return g.eng.QueueStats([]byte("scale")).Delayed == rejoinJobs
	})
	if n := g.c.fsm.restores.Load(); n != 1 {
		t.Errorf("the wiped node restored %d snapshots, want 1", n)
	}
}

// A leader sending a snapshot keeps its log whole meanwhile, even when it
// takes a snapshot of its own: compacted past the one being sent, the
// follower, once it restored that one, could not catch up from the log,
// and would be sent another.
func TestLeaderKeepsLogWhileSendingSnapshot(t *testing.T) {
	r := newRejoinRig(t)
	l := leaderOf(t, r.nodes)
	g, cfg, _ := r.wipe(t, l, false)
	r.holdSends(g.c.ID())
	if err := l.c.Join(g.c.ID(), cfg.BusAddr, cfg.AnnounceAddr); err != nil {
		t.Fatal(err)
	}
	r.waitSent(t, g.c.ID(), false)
	sent := snapshotIndex(l.c)
	// Past the 64 entries kept behind a snapshot.
	for i := range 150 {
		add(t, r.nodes, "two", strconv.Itoa(i), 3_600_000)
	}
	if err := l.c.takeSnapshot(l.c.r()); err != nil {
		t.Fatal(err)
	}
	if now := snapshotIndex(l.c); now == sent {
		t.Fatalf("no snapshot taken after the one at %d", sent)
	}
	if first, _ := l.c.store.FirstIndex(); first > sent+1 {
		t.Errorf("the leader's log starts at %d, past the snapshot being sent (%d)", first, sent)
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
