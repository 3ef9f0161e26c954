package cluster

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rs/zerolog"

	"github.com/delayd/delayd/engine"
	"github.com/delayd/delayd/record"
)

// A snapshot taken while a client goes on writing (on the leader, then on
// a follower) restores, with the log's engine batches after its index, to
// exactly the leader's jobs: the streamed snapshot (a capture at one index
// and the batches up to Raft's) is the state at the index Raft labels it
// with.
func TestStreamedSnapshotUnderWrites(t *testing.T) {
	nodes := startGroup(t, 3)
	l := leaderOf(t, nodes)
	var f *testNode
	for _, n := range nodes {
		if n != l {
			f = n
			break
		}
	}
	const pre = 3000
	for i := range pre {
		res, err := l.eng.Add(engine.AddArgs{Queue: []byte(fmt.Sprint("q", i%3)), ID: []byte(fmt.Sprint("a", i)),
			Payload: []byte(fmt.Sprint("p", i)), Delay: int64(i%2) * 3_600_000, AckTimeout: -1, Retry: -1})
		if err != nil {
			t.Fatal(err)
		}
		if i == pre-1 {
			if err := l.eng.WaitDurable(res.Ticket); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A client adds, pops and cancels throughout.
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
			q := []byte(fmt.Sprint("q", i%3))
			res, err := l.eng.Add(engine.AddArgs{Queue: q, ID: []byte(fmt.Sprint("w", i)), Payload: []byte("x"),
				Delay: int64(i%2) * 3_600_000, AckTimeout: -1, Retry: -1})
			if err != nil {
				t.Error(err)
				return
			}
			tk := res.Ticket
			if d, ok := l.eng.Pop([][]byte{q}); ok {
				tk = max(tk, d.Ticket)
			}
			if i%5 == 0 {
				if _, c, _ := l.eng.Cancel(q, [][]byte{[]byte(fmt.Sprint("a", i%pre))}); c > tk {
					tk = c
				}
			}
			if err := l.eng.WaitDurable(tk); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	time.Sleep(100 * time.Millisecond)
	for _, n := range []*testNode{l, f} {
		before := snapshotIndex(n.c)
		if err := n.c.takeSnapshot(n.c.r()); err != nil {
			t.Fatalf("node %s: %v", n.c.ID()[:8], err)
		}
		if snapshotIndex(n.c) == before {
			t.Fatalf("node %s took no snapshot", n.c.ID()[:8])
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	for _, n := range nodes {
		if left, _ := filepath.Glob(filepath.Join(n.dir, "raft", capturePrefix+"*")); len(left) > 0 {
			t.Errorf("node %s kept capture files after its snapshots: %v", n.c.ID()[:8], left)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	add(t, nodes, "q0", "last", 0) // commits after everything the client wrote
	for _, n := range []*testNode{l, f} {
		waitFor(t, 10*time.Second, "the node to apply the last write", func() bool {
			_, ok := n.eng.Get([]byte("q0"), []byte("last"))
			return ok
		})
		x := restoreNewest(t, n)
		for _, q := range []string{"q0", "q1", "q2"} {
			if got, want := x.QueueStats([]byte(q)), l.eng.QueueStats([]byte(q)); got.Ready != want.Ready || got.Delayed != want.Delayed {
				t.Fatalf("node %s: %s restored from its snapshot and log: %+v, the leader %+v", n.c.ID()[:8], q, got, want)
			}
		}
		for i := range pre {
			q, id := []byte(fmt.Sprint("q", i%3)), []byte(fmt.Sprint("a", i))
			_, got := x.Get(q, id)
			if _, want := l.eng.Get(q, id); got != want {
				t.Fatalf("node %s: job a%d restored %v, on the leader %v", n.c.ID()[:8], i, got, want)
			}
		}
	}
}

// restoreNewest builds a new engine from n's newest snapshot and the
// engine batches of n's log after it, as a restart does.
func restoreNewest(t *testing.T, n *testNode) *engine.Engine {
	t.Helper()
	x, err := engine.New(engine.Options{Replicator: &Cluster{}, Follower: true, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Stop(); x.Close() })
	metas, err := n.c.snaps.List()
	if err != nil || len(metas) == 0 {
		t.Fatalf("no snapshot: %v", err)
	}
	meta, rc, err := n.c.snaps.Open(metas[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	fsm := &fsm{c: &Cluster{eng: x, log: zerolog.Nop()}, members: map[string]member{}}
	if _, _, err := fsm.restoreFrom(rc); err != nil {
		t.Fatalf("snapshot %s: %v", meta.ID, err)
	}
	last, err := n.c.store.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	for i := meta.Index + 1; i <= last; i++ {
		var l raft.Log
		if err := n.c.store.GetLog(i, &l); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if l.Type == raft.LogCommand && len(l.Data) > 0 && l.Data[0] == entryEngine {
			if err := x.ApplyBatch(l.Data[1:]); err != nil {
				t.Fatalf("entry %d: %v", i, err)
			}
		}
	}
	return x
}

// A capture streamed for members of an older version is the capture
// downgraded as a whole would be: a reason left out, the rest as it was.
func TestDowngradeStream(t *testing.T) {
	var in []byte
	for i := range 50 {
		r := record.Rec{Op: record.Add, Time: 1000, Queue: []byte("q"), SID: uint64(i + 1), Due: 2000, Seq: uint64(i + 1),
			Payload: []byte(fmt.Sprint("p", i)), Retry: -1}
		if i%3 == 0 {
			r.Reason = []byte("boom")
		}
		in = record.AppendSnap(in, r.Encode(nil))
	}
	want, err := downgrade(in, minFormat)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(want, in) {
		t.Fatal("nothing to downgrade: the test checks nothing")
	}
	var got bytes.Buffer
	if err := downgradeStream(&got, bytes.NewReader(in), minFormat); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("streamed downgrade differs: %d bytes, want %d", got.Len(), len(want))
	}
	if err := downgradeStream(io.Discard, bytes.NewReader(in[:len(in)-3]), minFormat); err == nil {
		t.Fatal("a capture cut short was streamed")
	}
}
