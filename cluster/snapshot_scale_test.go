package cluster

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayd/delayd/engine"
)

// TestSnapshotScale measures, at DELAYD_SNAPSHOT_JOBS jobs (skipped
// without it), what docs/decisions/raft-snapshots.md reports: the
// longest a leader's lock is held while it takes a snapshot under writes,
// and how long a wiped follower takes to hold every job again.
//
//	DELAYD_SNAPSHOT_JOBS=1000000 go test ./cluster -run TestSnapshotScale -count=1 -v -timeout 30m
func TestSnapshotScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("DELAYD_SNAPSHOT_JOBS"))
	if n <= 0 {
		t.Skip("set DELAYD_SNAPSHOT_JOBS to the job count")
	}
	// A short log behind each snapshot, so the new node must take one.
	short := func(c *Cluster) { c.trailingLogs = 64 }
	first := startNode(t, Config{Bootstrap: true}, short)
	nodes := []*testNode{first}
	leaderOf(t, nodes)
	for range 2 {
		x := startNode(t, Config{}, short)
		if err := first.c.Join(x.c.ID(), x.cfg.BusAddr, x.cfg.AnnounceAddr); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, x)
	}
	l := leaderOf(t, nodes)
	start := time.Now()
	l = fill(t, nodes, n)
	t.Logf("filled %d jobs in %v", n, time.Since(start).Round(time.Millisecond))
	waitFor(t, 5*time.Minute, "every follower to hold every job", func() bool {
		for _, x := range nodes {
			if st := x.eng.QueueStats([]byte("scale")); st.Delayed != n {
				return false
			}
		}
		return true
	})

	// (a) The leader's snapshot while a client writes: the longest wait of
	// its adds is the longest hold of the lock (plus one commit round).
	var worst atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			t0 := time.Now()
			res, err := l.eng.Add(engine.AddArgs{Queue: []byte("probe"), Payload: []byte("p"), Delay: 3_600_000, AckTimeout: -1, Retry: -1})
			if err == nil {
				err = l.eng.WaitDurable(res.Ticket)
			}
			if d := int64(time.Since(t0)); d > worst.Load() {
				worst.Store(d)
			}
			if err != nil {
				t.Errorf("after %v: %v", time.Since(t0), err)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	time.Sleep(200 * time.Millisecond)
	base := time.Duration(worst.Swap(0))
	before := snapshotIndex(l.c)
	start = time.Now()
	err := l.c.takeSnapshot(l.c.r())
	took := time.Since(start)
	time.Sleep(50 * time.Millisecond)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if snapshotIndex(l.c) == before {
		t.Fatal("no snapshot was taken")
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("leader snapshot of %d jobs: took %v, longest add wait %v (before it: %v); heap in use %d MiB",
		n, took.Round(time.Millisecond), time.Duration(worst.Load()).Round(time.Microsecond), base.Round(time.Microsecond), ms.HeapInuse>>20)

	// (b) A follower wiped: stopped, its directory removed, started empty
	// at the same bus address; it must hold every job again.
	var f *testNode
	for _, x := range nodes {
		if x != l {
			f = x
			break
		}
	}
	cfg := f.cfg
	f.stop()
	if err := os.RemoveAll(cfg.Dir); err != nil {
		t.Fatal(err)
	}
	cfg.Dir, cfg.NodeID = "", ""
	start = time.Now()
	g := startNode(t, cfg, short)
	if err := l.c.Join(g.c.ID(), cfg.BusAddr, cfg.AnnounceAddr); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Minute, "the wiped follower to hold every job", func() bool {
		return g.eng.QueueStats([]byte("scale")).Delayed == n
	})
	from, _ := l.c.store.FirstIndex()
	t.Logf("wiped follower back with %d jobs in %v (its snapshot at %d; the leader's log from %d to %d)",
		n, time.Since(start).Round(time.Millisecond), snapshotIndex(g.c), from, l.c.r().LastIndex())
}

// fill adds n delayed jobs (an hour out) to queue "scale" on the leader,
// again on the next one when leadership moves (the ids make that safe),
// and returns the leader.
func fill(t *testing.T, nodes []*testNode, n int) *testNode {
	const workers = 16
	var wg sync.WaitGroup
	var next atomic.Int64
	var mu sync.Mutex
	l := leaderOf(t, nodes)
	leader := func(stale *testNode) *testNode {
		mu.Lock()
		defer mu.Unlock()
		if l == stale {
			time.Sleep(50 * time.Millisecond)
			l = leaderOf(t, nodes)
		}
		return l
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ln := leader(nil)
			var last uint64
			for i := next.Add(1) - 1; i < int64(n); {
				res, err := ln.eng.Add(engine.AddArgs{Queue: []byte("scale"), ID: []byte(fmt.Sprint("j", i)),
					Payload: []byte("0123456789abcdef"), Delay: 3_600_000, AckTimeout: -1, Retry: -1})
				if err == nil {
					last = res.Ticket
					if i%256 == 0 {
						err = ln.eng.WaitDurable(last)
					}
				}
				if err != nil {
					ln = leader(ln) // TRYAGAIN: this one again, on the leader
					continue
				}
				i = next.Add(1) - 1
			}
			// An error here leaves adds no one retries: the wait for
			// every job on every node then fails the test.
			ln.eng.WaitDurable(last)
		}()
	}
	wg.Wait()
	// Adds answered with an error before their batch's wait are added
	// again, one at a time.
	for i := range n {
		id := fmt.Sprint("j", i)
		if _, ok := leaderOf(t, nodes).eng.Get([]byte("scale"), []byte(id)); !ok {
			add(t, nodes, "scale", id, 3_600_000)
		}
	}
	return leaderOf(t, nodes)
}

func snapshotIndex(c *Cluster) uint64 {
	if metas, err := c.snaps.List(); err == nil && len(metas) > 0 {
		return metas[0].Index
	}
	return 0
}
