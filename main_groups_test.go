package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delayd/delayd/cluster"
)

// What a node decides about its groups at start, from its flags, its data
// dir's layout file and whether it holds Raft state.
func TestGroupLayout(t *testing.T) {
	for _, tc := range []struct {
		name     string
		file     string // the layout file's content; "" none
		has      bool
		cfg      config
		groups   int
		discover bool
		err      string
		wrote    bool
	}{
		{name: "bootstrap, one group: no file", cfg: config{ClusterBootstrap: true, ClusterGroups: 1}, groups: 1},
		{name: "bootstrap, three groups", cfg: config{ClusterBootstrap: true, ClusterGroups: 3}, groups: 3, wrote: true},
		{name: "restart of a three-group node", file: "3\n", has: true, cfg: config{ClusterBootstrap: true, ClusterGroups: 3}, groups: 3},
		{name: "restart without the flag", file: "3\n", has: true, cfg: config{ClusterBootstrap: true, ClusterGroups: 1}, groups: 3},
		{name: "another number at restart", file: "3\n", has: true, cfg: config{ClusterBootstrap: true, ClusterGroups: 2}, err: "has 3 groups"},
		{name: "a one-group node asked for three", has: true, cfg: config{ClusterBootstrap: true, ClusterGroups: 3}, err: "one-group cluster"},
		{name: "a one-group node", has: true, cfg: config{ClusterJoin: "10.0.0.1:6380", ClusterGroups: 1}, groups: 1},
		{name: "a first join asks", cfg: config{ClusterJoin: "10.0.0.1:6380", ClusterGroups: 1}, groups: 1, discover: true},
		{name: "a joined node's restart", file: "3\n10.0.0.1:6380\n10.0.0.1:6480\n10.0.0.1:6580\n", has: true, cfg: config{ClusterJoin: "10.0.0.1:6380"}, groups: 3},
		{name: "waiting for MEET", cfg: config{ClusterGroups: 3}, groups: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.cfg.Dir = dir
			if tc.file != "" {
				if err := os.WriteFile(filepath.Join(dir, "cluster-groups"), []byte(tc.file), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			l, discover, err := groupLayout(tc.cfg, tc.has)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil || l.Groups != tc.groups || discover != tc.discover {
				t.Fatalf("%d groups, discover %v, err %v; want %d, %v", l.Groups, discover, err, tc.groups, tc.discover)
			}
			if tc.wrote {
				if got, ok, err := cluster.ReadLayout(dir); !ok || err != nil || got.Groups != tc.groups {
					t.Errorf("layout file: %v %v %v", got, ok, err)
				}
			} else if tc.file == "" {
				if _, err := os.Stat(filepath.Join(dir, "cluster-groups")); err == nil {
					t.Errorf("a layout file was written")
				}
			}
		})
	}
}

// Group g listens g steps up from group 0, in its own dir, with an id of
// its own; group 0 is the node's own settings.
func TestGroupConfig(t *testing.T) {
	base := cluster.Config{Dir: "/d", NodeID: "given", BusAddr: "0.0.0.0:16380", AnnounceAddr: "10.0.0.1:6380",
		AnnounceBusAddr: "10.0.0.1:16380", Join: "10.0.0.2:6380", Bootstrap: true}
	cfg := config{Dir: "/d", ClusterGroupPortStep: 100}
	same := func(a, b cluster.Config) bool {
		return a.Dir == b.Dir && a.NodeID == b.NodeID && a.BusAddr == b.BusAddr && a.AnnounceAddr == b.AnnounceAddr &&
			a.AnnounceBusAddr == b.AnnounceBusAddr && a.Join == b.Join && a.Bootstrap == b.Bootstrap
	}
	if c, err := groupConfig(base, cfg, 0, "", base.Logger); err != nil || !same(c, base) {
		t.Errorf("group 0: %+v %v", c, err)
	}
	c, err := groupConfig(base, cfg, 2, "10.0.0.2:6580", base.Logger)
	if err != nil {
		t.Fatal(err)
	}
	want := cluster.Config{Dir: "/d/group-2", BusAddr: "0.0.0.0:16580", AnnounceAddr: "10.0.0.1:6580",
		AnnounceBusAddr: "10.0.0.1:16580", Join: "10.0.0.2:6580", Bootstrap: true}
	if !same(c, want) {
		t.Errorf("group 2: %+v\nwant %+v", c, want)
	}
	if _, err := groupConfig(base, config{Dir: "/d", ClusterGroupPortStep: 30000}, 2, "", base.Logger); err == nil {
		t.Errorf("a port past 65535 was taken")
	}
}

// Which groups a node joining a cluster of several takes a seat in: a
// group with its --cluster-replicas voters is full, unless one of them is
// at this node's own addresses (the id it had before its data dir was
// wiped).
func TestHoldReplicas(t *testing.T) {
	const n = cluster.NotHeld
	for _, tc := range []struct {
		name     string
		replicas int
		join     []string
		voters   []int
		seated   []bool
		want     []string
	}{
		{"room in each", 3, []string{"a0", "a1", "a2"}, []int{2, 2, 1}, nil, []string{"a0", "a1", "a2"}},
		{"a 4th node: full groups", 3, []string{"a0", "a1", "a2"}, []int{3, 3, 2}, nil, []string{"a0", n, "a2"}},
		{"a 4th node, the answer asked of nobody", 3, []string{"a0", "a1", "a2"}, []int{3, 3, 3}, []bool{false, false, false}, []string{"a0", n, n}},
		{"wiped: its old ids fill the groups", 3, []string{"a0", "a1", "a2"}, []int{3, 3, 3}, []bool{false, true, true}, []string{"a0", "a1", "a2"}},
		{"wiped: of one group only", 3, []string{"a0", "a1", "a2"}, []int{3, 3, 3}, []bool{false, false, true}, []string{"a0", n, "a2"}},
		{"a group the member does not hold", 3, []string{"a0", "", "a2"}, []int{3, -1, 1}, []bool{false, true, false}, []string{"a0", n, "a2"}},
		{"no cap", 0, []string{"a0", "a1", "a2"}, []int{5, 5, 5}, nil, []string{"a0", "a1", "a2"}},
	} {
		l := cluster.Layout{Groups: len(tc.join), Join: append([]string(nil), tc.join...), Voters: tc.voters}
		holdReplicas(&l, tc.replicas, tc.seated)
		if strings.Join(l.Join, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%s: %q, want %q", tc.name, l.Join, tc.want)
		}
	}
}
