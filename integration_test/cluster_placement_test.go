package integration

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Leader placement (docs/decisions/leader-placement.md): three nodes,
// three groups, no CLUSTER FAILOVER: the bootstrapping node leads every
// group at first and hands two over by itself; a node killed loses its
// group to another, and gets one back once it is up again.
//
//	go test -count=1 -run 'TestClusterGroupsPlaceLeaders' -v ./integration_test/

// grLeaders says which node leads each group, as nodes[at] sees it: -1
// for a group with no master listed.
func grLeaders(nodes []*grNode, at int) ([]int, error) {
	m, _, err := grMasters(nodes[at].addr(0))
	if err != nil {
		return nil, err
	}
	out := make([]int, grCount)
	for g, r := range grRanges {
		out[g] = -1
		for i, n := range nodes {
			if m[r] == n.addr(g) {
				out[g] = i
			}
		}
	}
	return out, nil
}

// grSpread says whether each node leads exactly one group.
func grSpread(leaders []int) bool {
	seen := map[int]bool{}
	for _, l := range leaders {
		if l < 0 || seen[l] {
			return false
		}
		seen[l] = true
	}
	return true
}

func TestClusterGroupsPlaceLeaders(t *testing.T) {
	t.Parallel()
	nodes := []*grNode{grStart(t, "--cluster-bootstrap", "--cluster-groups", strconv.Itoa(grCount))}
	for i := 1; i < 3; i++ {
		nodes = append(nodes, grStart(t, "--cluster-join", nodes[0].addr(0)))
	}
	start := time.Now()
	var leaders []int
	clWait(t, 60*time.Second, "one leader per node, with no FAILOVER sent", func() (bool, string) {
		var err error
		leaders, err = grLeaders(nodes, 2)
		return err == nil && grSpread(leaders), fmt.Sprint(leaders, err)
	})
	t.Logf("leaders spread by themselves %v after the nodes started: group g on node %v", time.Since(start).Round(100*time.Millisecond), leaders)

	// Balanced, they stay put: the rule moves nothing.
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if now, err := grLeaders(nodes, 1); err == nil && fmt.Sprint(now) != fmt.Sprint(leaders) {
			t.Fatalf("a leader moved once they were spread: %v, then %v", leaders, now)
		}
	}

	// Kill the node leading group 1: its group fails over to another,
	// which then leads two.
	k := leaders[1]
	other := (k + 1) % 3
	nodes[k].Kill9()
	clWait(t, 30*time.Second, "group 1 fails over", func() (bool, string) {
		l, err := grLeaders(nodes, other)
		return err == nil && l[1] >= 0 && l[1] != k && l[0] >= 0 && l[2] >= 0, fmt.Sprint(l, err)
	})
	// It comes back, and within the rule's wait (10 s up without a break,
	// a round every 2 s) plus its catching up, leads one group again.
	restarted := time.Now()
	if err := nodes[k].Server.Start(); err != nil {
		t.Fatalf("restart: %v", err)
	}
	clWait(t, 45*time.Second, "the restarted node leads a group again", func() (bool, string) {
		l, err := grLeaders(nodes, other)
		return err == nil && grSpread(l), fmt.Sprint(l, err)
	})
	t.Logf("the restarted node led a group again %v after its restart", time.Since(restarted).Round(100*time.Millisecond))
	// Every address agrees.
	for i := range nodes {
		clWait(t, 10*time.Second, "every node names the same leaders", func() (bool, string) {
			l, err := grLeaders(nodes, i)
			return err == nil && grSpread(l), fmt.Sprint(i, l, err)
		})
	}
}

// With --cluster-balance-leaders no, the bootstrapping node keeps leading
// every group: leaders are the operator's to place.
func TestClusterGroupsPlaceLeadersOff(t *testing.T) {
	t.Parallel()
	off := []string{"--cluster-balance-leaders", "no"}
	nodes := []*grNode{grStart(t, append(off, "--cluster-bootstrap", "--cluster-groups", strconv.Itoa(grCount))...)}
	for i := 1; i < 3; i++ {
		nodes = append(nodes, grStart(t, append(off, "--cluster-join", nodes[0].addr(0))...))
	}
	for g := 0; g < grCount; g++ {
		clWait(t, 30*time.Second, fmt.Sprintf("group %d formed", g), func() (bool, string) {
			v, err := grAsk(nodes[0].addr(g), "INFO", "replication")
			return err == nil && strings.Count(fmt.Sprint(v), "state=online") == 2, fmt.Sprint(v, err)
		})
	}
	// Past the rule's 10 s wait and a few of its rounds: nothing moved.
	for end := time.Now().Add(16 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		if l, err := grLeaders(nodes, 1); err == nil && fmt.Sprint(l) != "[0 0 0]" {
			t.Fatalf("leaders moved with --cluster-balance-leaders no: %v", l)
		}
	}
}
