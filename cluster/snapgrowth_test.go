package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/delayd/delayd/engine"
)

// With SnapshotGrowth a node snapshots once the log since its last
// snapshot reaches SnapshotMinBytes, then only once it grew by the given
// share of that snapshot's size, however many entries came: here 200%, so
// a log past the minimum but short of twice the snapshot, in hundreds of
// small entries, makes none, and one twice the snapshot makes the next.
func TestSnapshotsWaitForTheLogToGrow(t *testing.T) {
	const minBytes = 4 << 20
	n := startNode(t, Config{Bootstrap: true, SnapshotThreshold: 16, SnapshotGrowth: 200, SnapshotMinBytes: minBytes})
	leaderOf(t, []*testNode{n})
	payload := make([]byte, 400)
	next := 0
	add := func(count, every int) {
		t.Helper()
		var tk uint64
		for range count {
			res, err := n.eng.Add(engine.AddArgs{Queue: []byte("q"), ID: []byte(fmt.Sprint("j", next)), Payload: payload,
				Delay: 3_600_000, AckTimeout: -1, Retry: -1})
			if err != nil {
				t.Fatal(err)
			}
			next++
			tk = res.Ticket
			if next%every == 0 { // small entries: many of them
				if err := n.eng.WaitDurable(tk); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := n.eng.WaitDurable(tk); err != nil {
			t.Fatal(err)
		}
	}
	latest := func() (uint64, int64) {
		metas, err := n.c.snaps.List()
		if err != nil || len(metas) == 0 {
			return 0, 0
		}
		return metas[0].Index, metas[0].Size
	}
	// quiet waits for a whole look of snapshotLoop after the caller's
	// writes and says whether it took no snapshot.
	quiet := func() bool {
		before, _ := latest()
		looked := n.c.snapLooks.Load()
		waitFor(t, 10*time.Second, "a whole look of snapshotLoop", func() bool { return n.c.snapLooks.Load() >= looked+2 })
		after, _ := latest()
		return after == before
	}

	// About 5 MB of log: a first snapshot once past the minimum, then none
	// once the snapshots caught up with the writes.
	add(12_000, 64)
	waitFor(t, 10*time.Second, "the first snapshot", func() bool { i, _ := latest(); return i > 0 })
	waitFor(t, 30*time.Second, "the snapshots to catch up", quiet)
	last, size := latest()
	// About 5 MB more in entries of 4 adds: past the minimum, short of
	// twice the snapshot.
	add(12_000, 4)
	grown := n.c.store.BytesAfter(last)
	if grown < minBytes || grown >= 2*size {
		t.Fatalf("the log grew %d bytes past a %d-byte snapshot: the test wants it between %d and %d", grown, size, minBytes, 2*size)
	}
	if !quiet() {
		i, _ := latest()
		t.Fatalf("a snapshot at %d with the log %d bytes past the last (%d bytes at %d): wanted none before %d", i, grown, size, last, 2*size)
	}
	// Past twice the snapshot: the next one comes.
	add(12_000, 64)
	waitFor(t, 10*time.Second, "the next snapshot", func() bool { i, _ := latest(); return i > last })
}
