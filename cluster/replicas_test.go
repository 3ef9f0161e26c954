package cluster

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// A group with its Replicas voters refuses a joiner; a group every node
// holds (Everywhere) takes it as a nonvoter; a voter joining again stays
// a voter.
func TestJoinPastReplicas(t *testing.T) {
	for _, everywhere := range []bool{false, true} {
		t.Run(fmt.Sprint("everywhere=", everywhere), func(t *testing.T) {
			first := startNode(t, Config{Bootstrap: true, Replicas: 2, Everywhere: everywhere})
			leaderOf(t, []*testNode{first})
			second := startNode(t, Config{})
			if err := first.c.Join(second.c.ID(), second.cfg.BusAddr, second.cfg.AnnounceAddr); err != nil {
				t.Fatal(err)
			}
			third := startNode(t, Config{})
			err := first.c.Join(third.c.ID(), third.cfg.BusAddr, third.cfg.AnnounceAddr)
			if !everywhere {
				if err == nil || !strings.Contains(err.Error(), "has its 2 replicas") {
					t.Fatalf("a third node joined a group of 2 replicas: %v", err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			// The second joins again (a restart's joinLoop): still a voter.
			if err := first.c.Join(second.c.ID(), second.cfg.BusAddr, second.cfg.AnnounceAddr); err != nil {
				t.Fatal(err)
			}
			f := first.c.r().GetConfiguration()
			if err := f.Error(); err != nil {
				t.Fatal(err)
			}
			got := map[string]raft.ServerSuffrage{}
			for _, s := range f.Configuration().Servers {
				got[string(s.ID)] = s.Suffrage
			}
			want := map[string]raft.ServerSuffrage{first.c.ID(): raft.Voter, second.c.ID(): raft.Voter}
			if everywhere {
				want[third.c.ID()] = raft.Nonvoter
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("configuration %v, want %v", got, want)
			}
		})
	}
}

// Forgetting a voter of a group every node holds promotes its nonvoter:
// the slot map's group is back to its Replicas voters, and a later failure
// of one more leaves it a majority. A group of its own replicas only
// (not Everywhere) has no nonvoter and stays one short.
func TestForgetPromotesNonvoter(t *testing.T) {
	first := startNode(t, Config{Bootstrap: true, Replicas: 2, Everywhere: true})
	leaderOf(t, []*testNode{first})
	second := startNode(t, Config{})
	third := startNode(t, Config{})
	for _, n := range []*testNode{second, third} {
		if err := first.c.Join(n.c.ID(), n.cfg.BusAddr, n.cfg.AnnounceAddr); err != nil {
			t.Fatal(err)
		}
	}
	suffrage := func() map[string]raft.ServerSuffrage {
		f := first.c.r().GetConfiguration()
		if err := f.Error(); err != nil {
			t.Fatal(err)
		}
		got := map[string]raft.ServerSuffrage{}
		for _, s := range f.Configuration().Servers {
			got[string(s.ID)] = s.Suffrage
		}
		return got
	}
	if got := suffrage(); got[third.c.ID()] != raft.Nonvoter {
		t.Fatalf("before: %v, want the third a nonvoter", got)
	}
	// The leader must have heard from the nonvoter to promote it.
	waitFor(t, 10*time.Second, "the leader hears from the nonvoter", func() bool {
		for _, n := range first.c.Nodes() {
			if n.ID == third.c.ID() && n.Connected && n.Match > 0 {
				return true
			}
		}
		return false
	})
	gone := second.c.ID()
	second.stop()
	if err := first.c.Forget(gone); err != nil {
		t.Fatal(err)
	}
	want := map[string]raft.ServerSuffrage{first.c.ID(): raft.Voter, third.c.ID(): raft.Voter}
	if got := suffrage(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after FORGET of a voter: %v, want %v", got, want)
	}
}

func TestParseGroupNodes(t *testing.T) {
	nodes := `a1 127.0.0.1:7001@17001 master - 0 0 5 connected 0-5460
b1 127.0.0.1:7002@17002 myself,slave a1 0 0 0 connected
c1 127.0.0.1:7003@17003 slave a1 0 0 0 disconnected
a2 127.0.0.1:7102@17102 master - 0 0 3 connected 5461-16383
b2 127.0.0.1:7101@17101 slave a2 0 0 0 connected
`
	got := ParseGroupNodes(nodes)
	var s []string
	for _, n := range got {
		s = append(s, fmt.Sprintf("%s %s %s leader=%v connected=%v epoch=%d", n.ID, n.Addr, n.BusAddr, n.Leader, n.Connected, n.ConfigEpoch))
	}
	want := []string{
		"a1 127.0.0.1:7001 127.0.0.1:17001 leader=true connected=true epoch=5",
		"b1 127.0.0.1:7002 127.0.0.1:17002 leader=false connected=true epoch=0",
		"c1 127.0.0.1:7003 127.0.0.1:17003 leader=false connected=false epoch=0",
	}
	if strings.Join(s, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(s, "\n"), strings.Join(want, "\n"))
	}
	// An election at that address: the master failing is no leader.
	failing := strings.Replace(nodes, "a1 127.0.0.1:7001@17001 master", "a1 127.0.0.1:7001@17001 master,fail?", 1)
	for _, n := range ParseGroupNodes(failing) {
		if n.Leader {
			t.Errorf("%s is leader while marked fail?", n.ID)
		}
	}
	// No master known there: itself only.
	if got := ParseGroupNodes("b1 127.0.0.1:7002@17002 myself,slave - 0 0 0 connected\n"); len(got) != 1 || got[0].Leader {
		t.Errorf("with no master: %+v", got)
	}
}
