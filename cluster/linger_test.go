package cluster

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"
)

func TestLagging(t *testing.T) {
	now := time.Unix(1000, 0)
	fresh, stale := now.Add(-time.Millisecond), now.Add(-freshFor)
	voters := func(ids ...string) []raft.Server {
		var out []raft.Server
		for _, id := range ids {
			out = append(out, raft.Server{ID: raft.ServerID(id), Suffrage: raft.Voter})
		}
		return out
	}
	three := voters("l", "a", "b")
	for _, tc := range []struct {
		name   string
		id     string
		voters []raft.Server
		match  map[string]uint64
		heard  map[string]time.Time
		want   bool
	}{
		{"level: the higher id waits", "b", three, map[string]uint64{"a": 5, "b": 5}, map[string]time.Time{"a": fresh, "b": fresh}, true},
		{"level: the lower id does not", "a", three, map[string]uint64{"a": 5, "b": 5}, map[string]time.Time{"a": fresh, "b": fresh}, false},
		{"behind waits", "a", three, map[string]uint64{"a": 4, "b": 5}, map[string]time.Time{"a": fresh, "b": fresh}, true},
		{"ahead does not", "b", three, map[string]uint64{"a": 4, "b": 5}, map[string]time.Time{"a": fresh, "b": fresh}, false},
		{"the other silent: nobody waits", "b", three, map[string]uint64{"a": 9, "b": 5}, map[string]time.Time{"a": stale, "b": fresh}, false},
		{"the other never heard", "b", three, map[string]uint64{"b": 5}, map[string]time.Time{"b": fresh}, false},
		{"two nodes: the one follower never waits", "a", voters("l", "a"), map[string]uint64{"a": 5}, map[string]time.Time{"a": fresh}, false},
		{"a non-voter never waits", "n", append(three, raft.Server{ID: "n", Suffrage: raft.Nonvoter}), map[string]uint64{"a": 9, "b": 9, "n": 1}, map[string]time.Time{"a": fresh, "b": fresh}, false},
		{"a non-voter ahead does not count", "b", append(voters("l", "b"), raft.Server{ID: "a", Suffrage: raft.Nonvoter}), map[string]uint64{"a": 9, "b": 5}, map[string]time.Time{"a": fresh, "b": fresh}, false},
		{"ring: level, the one after the leader is ahead", "a", voters("b", "a", "c"), map[string]uint64{"a": 5, "c": 5}, map[string]time.Time{"a": fresh, "c": fresh}, true},
		{"ring: level, the one after the leader does not wait", "c", voters("b", "a", "c"), map[string]uint64{"a": 5, "c": 5}, map[string]time.Time{"a": fresh, "c": fresh}, false},
		{"not a member", "x", three, map[string]uint64{"a": 9, "b": 9}, map[string]time.Time{"a": fresh, "b": fresh}, false},
		{"five: two ahead, the third waits", "c", voters("l", "a", "b", "c", "d"), map[string]uint64{"a": 9, "b": 9, "c": 9, "d": 9}, map[string]time.Time{"a": fresh, "b": fresh, "c": fresh, "d": fresh}, true},
		{"five: the second does not", "b", voters("l", "a", "b", "c", "d"), map[string]uint64{"a": 9, "b": 9, "c": 9, "d": 9}, map[string]time.Time{"a": fresh, "b": fresh, "c": fresh, "d": fresh}, false},
		{"five: one ahead silent, the third is needed", "c", voters("l", "a", "b", "c", "d"), map[string]uint64{"a": 9, "b": 9, "c": 9, "d": 9}, map[string]time.Time{"a": stale, "b": fresh, "c": fresh, "d": fresh}, false},
	} {
		leader := "l"
		if tc.voters[0].ID != "l" {
			leader = string(tc.voters[0].ID)
		}
		if got := lagging(tc.id, leader, tc.voters, tc.match, tc.heard, now); got != tc.want {
			t.Errorf("%s: lagging(%s) = %v, want %v", tc.name, tc.id, got, tc.want)
		}
	}
}

func TestCovered(t *testing.T) {
	three := []raft.Server{{ID: "l", Suffrage: raft.Voter}, {ID: "a", Suffrage: raft.Voter}, {ID: "b", Suffrage: raft.Voter}}
	if !covered("b", "l", three, map[string]uint64{"a": 7, "b": 3}, 7) {
		t.Error("a has 7: b is not needed for it")
	}
	if covered("b", "l", three, map[string]uint64{"a": 6, "b": 3}, 7) {
		t.Error("a has 6 only: a commit of 7 needs b")
	}
	five := append(three, raft.Server{ID: "c", Suffrage: raft.Voter}, raft.Server{ID: "d", Suffrage: raft.Voter})
	if covered("d", "l", five, map[string]uint64{"a": 7, "b": 6, "c": 6}, 7) {
		t.Error("of five, one other has 7: a commit needs d")
	}
	if !covered("d", "l", five, map[string]uint64{"a": 7, "b": 8, "c": 6}, 7) {
		t.Error("of five, two others have 7: d is not needed")
	}
}

// TestHold runs the tracker's hold on a fake clock (synctest): a follower
// lagging behind one that is ahead and fresh.
func TestHold(t *testing.T) {
	three := []raft.Server{{ID: "l", Suffrage: raft.Voter}, {ID: "a", Suffrage: raft.Voter}, {ID: "b", Suffrage: raft.Voter}}
	mk := func() *tracker {
		return &tracker{
			self: "l", linger: 2 * time.Millisecond, hedge: 500 * time.Microsecond,
			voters: func() []raft.Server { return three },
			match:  map[string]uint64{"a": 5, "b": 5},
			heard:  map[string]time.Time{"a": time.Now(), "b": time.Now()},
			acked:  make(chan struct{}),
			done:   make(chan struct{}),
		}
	}
	ack := func(tr *tracker, id string, m uint64) {
		tr.mu.Lock()
		tr.match[id], tr.heard[id] = m, time.Now()
		close(tr.acked)
		tr.acked = make(chan struct{})
		tr.mu.Unlock()
	}
	took := func(f func()) time.Duration {
		start := time.Now()
		f()
		return time.Since(start)
	}
	synctest.Test(t, func(t *testing.T) {
		tr := mk()
		if d := took(func() { tr.hold("a", 6) }); d != 0 {
			t.Errorf("the follower ahead waited %v", d)
		}
		if d := took(func() { tr.hold("b", 6) }); d != tr.hedge {
			t.Errorf("lagging, the one ahead never has the entries: waited %v, want the hedge %v", d, tr.hedge)
		}
		go func() {
			time.Sleep(100 * time.Microsecond)
			ack(tr, "a", 6)
		}()
		if d := took(func() { tr.hold("b", 6) }); d != tr.linger {
			t.Errorf("lagging, the one ahead has them after 100µs: waited %v, want the linger %v", d, tr.linger)
		}
		go func() {
			time.Sleep(100 * time.Microsecond)
			close(tr.done)
		}()
		if d := took(func() { tr.hold("b", 7) }); d != 100*time.Microsecond {
			t.Errorf("closed while holding: waited %v, want 100µs", d)
		}
		off := mk()
		off.linger = 0
		if d := took(func() { off.hold("b", 6) }); d != 0 {
			t.Errorf("linger 0 waited %v", d)
		}
	})
}

// TestRingBalances: three groups, each led by another of three nodes,
// each node is held in exactly one group it follows.
func TestRingBalances(t *testing.T) {
	ids := []string{"n1", "n2", "n3"}
	held := map[string]int{}
	for _, leader := range ids {
		var vs []raft.Server
		match, heard := map[string]uint64{}, map[string]time.Time{}
		for _, id := range ids {
			vs = append(vs, raft.Server{ID: raft.ServerID(id), Suffrage: raft.Voter})
			if id != leader {
				match[id], heard[id] = 5, time.Unix(1000, 0)
			}
		}
		for _, id := range ids {
			if id != leader && lagging(id, leader, vs, match, heard, time.Unix(1000, 0)) {
				held[id]++
			}
		}
	}
	for _, id := range ids {
		if held[id] != 1 {
			t.Errorf("held in %d groups: %v", held[id], held)
		}
	}
}
