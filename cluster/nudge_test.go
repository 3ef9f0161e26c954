package cluster

import (
	"testing"
	"time"

	"github.com/delayd/delayd/engine"
)

// Once the writes of a burst have committed, the leader tells its
// followers with an append of its own (a barrier entry) rather than after
// Raft's CommitTimeout, and the followers apply the burst.
func TestFollowersLearnTheLastCommit(t *testing.T) {
	nodes := startGroup(t, 3)
	l := leaderOf(t, nodes)
	waitFor(t, 10*time.Second, "the group settled", func() bool {
		r := l.c.r()
		return r.LastIndex() == r.CommitIndex() && !l.c.nudging.Load()
	})
	res, err := l.eng.Add(engine.AddArgs{Queue: []byte("q"), ID: []byte("last"), Payload: []byte("p"), Delay: 3_600_000,
		AckTimeout: -1, Retry: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.eng.WaitDurable(res.Ticket); err != nil {
		t.Fatal(err)
	}
	batch := l.c.r().LastIndex()
	waitFor(t, 5*time.Second, "the nudge's barrier after the batch", func() bool {
		r := l.c.r()
		return r.LastIndex() > batch && r.CommitIndex() == r.LastIndex()
	})
	for _, n := range nodes {
		if n == l {
			continue
		}
		waitFor(t, 5*time.Second, "a follower applying the batch", func() bool { return n.c.fsm.done.Load() >= batch })
	}
}
