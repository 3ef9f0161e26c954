package cluster

import (
	"testing"
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
		{"not a member", "x", three, map[string]uint64{"a": 9, "b": 9}, map[string]time.Time{"a": fresh, "b": fresh}, false},
		{"five: two ahead, the third waits", "c", voters("l", "a", "b", "c", "d"), map[string]uint64{"a": 9, "b": 9, "c": 9, "d": 9}, map[string]time.Time{"a": fresh, "b": fresh, "c": fresh, "d": fresh}, true},
		{"five: the second does not", "b", voters("l", "a", "b", "c", "d"), map[string]uint64{"a": 9, "b": 9, "c": 9, "d": 9}, map[string]time.Time{"a": fresh, "b": fresh, "c": fresh, "d": fresh}, false},
		{"five: one ahead silent, the third is needed", "c", voters("l", "a", "b", "c", "d"), map[string]uint64{"a": 9, "b": 9, "c": 9, "d": 9}, map[string]time.Time{"a": stale, "b": fresh, "c": fresh, "d": fresh}, false},
	} {
		if got := lagging(tc.id, "l", tc.voters, tc.match, tc.heard, now); got != tc.want {
			t.Errorf("%s: lagging(%s) = %v, want %v", tc.name, tc.id, got, tc.want)
		}
	}
}
