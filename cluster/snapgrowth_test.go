package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/delayd/delayd/engine"
)

// With SnapshotGrowth a node snapshots once the log since its last
// snapshot reaches SnapshotMinBytes, then only once it grew by the given
// share of that snapshot's size, however many entries came: a state of
// 20k jobs written again by small entries is not captured every
// SnapshotThreshold entries.
func TestSnapshotsWaitForTheLogToGrow(t *testing.T) {
	n := startNode(t, Config{Bootstrap: true, SnapshotThreshold: 16, SnapshotGrowth: 100, SnapshotMinBytes: 256 << 10})
	leaderOf(t, []*testNode{n})
	add := func(from, to, every int, payload []byte) {
		t.Helper()
		var tk uint64
		for i := from; i < to; i++ {
			res, err := n.eng.Add(engine.AddArgs{Queue: []byte("q"), ID: []byte(fmt.Sprint("j", i)), Payload: payload,
				Delay: 3_600_000, AckTimeout: -1, Retry: -1})
			if err != nil {
				t.Fatal(err)
			}
			tk = res.Ticket
			if i%every == 0 { // small entries: many of them
				if err := n.eng.WaitDurable(tk); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := n.eng.WaitDurable(tk); err != nil {
			t.Fatal(err)
		}
	}
	snaps := func() (int, int64) {
		metas, err := n.c.snaps.List()
		if err != nil || len(metas) == 0 {
			return 0, 0
		}
		return len(metas), metas[0].Size
	}
	// 20k jobs of 100 bytes: about 3 MB of log, far past the minimum.
	add(0, 20_000, 64, make([]byte, 100))
	waitFor(t, 10*time.Second, "the first snapshot", func() bool { c, _ := snaps(); return c > 0 })
	_, size := snaps()
	last, _ := n.c.snaps.List()
	// The log since it: well under its size, in hundreds of entries
	// (more than SnapshotThreshold).
	before := n.c.store.BytesAfter(last[0].Index)
	add(20_000, 21_000, 4, nil)
	grown := n.c.store.BytesAfter(last[0].Index)
	if grown >= size || grown <= before {
		t.Fatalf("the log grew from %d to %d bytes against a %d-byte snapshot: the test does not test", before, grown, size)
	}
	looked := n.c.snapLooks.Load()
	waitFor(t, 10*time.Second, "a whole look of snapshotLoop", func() bool { return n.c.snapLooks.Load() >= looked+2 })
	if metas, _ := n.c.snaps.List(); metas[0].Index != last[0].Index {
		t.Fatalf("a snapshot at %d with the log %d bytes past the last (%d bytes): wanted none before %d", metas[0].Index, grown, size, size)
	}
	// Grown past the snapshot's size: the next one comes.
	add(21_000, 45_000, 64, make([]byte, 100))
	waitFor(t, 10*time.Second, "the second snapshot", func() bool {
		metas, _ := n.c.snaps.List()
		return len(metas) > 0 && metas[0].Index > last[0].Index
	})
}
