package integration

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Replication factor (docs/decisions/leader-placement.md, replicas): a
// 4th node joining a cluster of 3 groups of 3 voters (--cluster-replicas
// 3, the default) takes no replica of groups 1 and 2, and a nonvoting one
// of group 0 (the slot map's); it still answers the whole map, routes
// every key to its group's leader, and follows a failover of a group it
// does not hold.
//
//	go test -count=1 -run 'TestClusterGroupsReplicas' -v ./integration_test/

func TestClusterGroupsReplicas(t *testing.T) {
	t.Parallel()
	nodes := grCluster(t)
	keys := grKeys(t, nodes[0].addr(0))
	fourth := grStart(t, "--cluster-join", nodes[0].addr(0))
	nodes = append(nodes, fourth)

	clWait(t, 30*time.Second, "the 4th node holds group 0 only", func() (bool, string) {
		v, err := grAsk(fourth.addr(0), "CLUSTER", "GROUPS")
		if err != nil {
			return false, err.Error()
		}
		gs := v.([]any)
		ok := len(gs) == grCount
		for g := 0; ok && g < grCount; g++ {
			addr := gs[g].([]any)[1]
			ok = (g == 0) == (addr == fourth.addr(0))
		}
		return ok, fmt.Sprint(gs)
	})
	if _, err := grAsk(fourth.addr(1), "PING"); err == nil {
		t.Errorf("the 4th node serves group 1's address: it should hold no replica of it")
	}
	// Group 0 has 4 members, 3 of them voters; groups 1 and 2 have 3.
	clWait(t, 30*time.Second, "group 0 takes the 4th node as a nonvoter", func() (bool, string) {
		v, err := grAsk(nodes[0].addr(0), "CLUSTER", "GROUPS")
		if err != nil {
			return false, err.Error()
		}
		var voters []any
		for _, g := range v.([]any) {
			voters = append(voters, g.([]any)[3])
		}
		return fmt.Sprint(voters) == "[3 3 3]", fmt.Sprint(voters)
	})
	// Every address, the 4th's included, shows the same masters, and 10
	// members: 4 of group 0, 3 of each other.
	for _, addr := range []string{fourth.addr(0), nodes[1].addr(2)} {
		clWait(t, 30*time.Second, "the whole map at "+addr, func() (bool, string) {
			m, lines, err := grMasters(addr)
			if err != nil || lines != 10 {
				return false, fmt.Sprint(lines, " lines, ", err)
			}
			for g, r := range grRanges {
				if m[r] != nodes[g].addr(g) {
					return false, fmt.Sprint(m)
				}
			}
			return true, ""
		})
	}

	t.Run("redis-cli --cluster check", func(t *testing.T) {
		if _, err := exec.LookPath("redis-cli"); err != nil {
			t.Skip("no redis-cli")
		}
		out, err := exec.Command("redis-cli", "--cluster", "check", fourth.addr(0)).CombinedOutput()
		s := string(out)
		if err != nil || !strings.Contains(s, "[OK] All nodes agree about slots configuration.") ||
			!strings.Contains(s, "[OK] All 16384 slots covered.") || strings.Contains(s, "[ERR]") ||
			strings.Count(s, "3 slaves.") != 1 || strings.Count(s, "2 slaves.") != 2 {
			t.Errorf("redis-cli --cluster check: %v\n%s", err, s)
		}
	})

	t.Run("a ClusterClient that knows only the 4th node", func(t *testing.T) {
		rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{fourth.addr(0)}, Protocol: 2})
		defer rc.Close()
		ctx := ctxT(t, 20*time.Second)
		for _, k := range keys {
			if err := rc.Do(ctx, "DELAY.ADD", k, 0, "r-"+k, "ID", "r-"+k).Err(); err != nil {
				t.Fatalf("DELAY.ADD %s: %v", k, err)
			}
			v, err := rc.Do(ctx, "DELAY.POP", k, 0).Slice()
			if err != nil || len(v) < 3 || v[1] != "r-"+k {
				t.Fatalf("DELAY.POP %s: %v %v", k, v, err)
			}
			if n, err := rc.Do(ctx, "DELAY.ACK", k, v[1]).Int(); err != nil || n != 1 {
				t.Fatalf("DELAY.ACK %s: %d %v", k, n, err)
			}
		}
		// A key of group 1 at the 4th node's address: MOVED to its leader.
		if _, err := grAsk(fourth.addr(0), "DELAY.STATS", keys[1]); err == nil || !strings.HasSuffix(err.Error(), " "+nodes[1].addr(1)) {
			t.Errorf("DELAY.STATS %s at the 4th node: %v, want MOVED to %s", keys[1], err, nodes[1].addr(1))
		}
	})

	t.Run("a group the 4th node does not hold fails over", func(t *testing.T) {
		nodes[2].Kill9() // group 2's leader
		clWait(t, 30*time.Second, "the 4th node names group 2's new leader", func() (bool, string) {
			m, _, err := grMasters(fourth.addr(0))
			l := m[grRanges[2]]
			return err == nil && l != "" && l != nodes[2].addr(2), fmt.Sprint(m, err)
		})
		if _, err := grAsk(fourth.addr(0), "DELAY.STATS", keys[2]); err == nil || !strings.HasPrefix(err.Error(), "MOVED ") || strings.HasSuffix(err.Error(), nodes[2].addr(2)) {
			t.Errorf("DELAY.STATS %s at the 4th node after the failover: %v", keys[2], err)
		}
	})
}

// Three nodes joining a fresh cluster of 3 groups at once all see room in
// every group; each group's leader takes the first two, and the node it
// refuses gives that group up before serving it: every group ends with 3
// voters, and every address agrees on the map.
func TestClusterGroupsReplicasJoinAtOnce(t *testing.T) {
	t.Parallel()
	first := grStart(t, "--cluster-bootstrap", "--cluster-groups", fmt.Sprint(grCount))
	for g := 0; g < grCount; g++ {
		clWait(t, 15*time.Second, fmt.Sprintf("group %d's bootstrap", g), func() (bool, string) {
			v, err := grAsk(first.addr(g), "INFO", "replication")
			return err == nil && strings.Contains(fmt.Sprint(v), "role:master"), fmt.Sprint(v, err)
		})
	}
	nodes := []*grNode{first}
	started := make(chan *grNode)
	for i := 0; i < 3; i++ {
		go func() { started <- grStart(t, "--cluster-join", first.addr(0)) }()
	}
	for i := 0; i < 3; i++ {
		nodes = append(nodes, <-started)
	}
	clWait(t, 60*time.Second, "3 voters in every group", func() (bool, string) {
		v, err := grAsk(first.addr(0), "CLUSTER", "GROUPS")
		if err != nil {
			return false, err.Error()
		}
		var voters []any
		for _, g := range v.([]any) {
			voters = append(voters, g.([]any)[3])
		}
		return fmt.Sprint(voters) == "[3 3 3]", fmt.Sprint(voters)
	})
	for _, n := range nodes {
		addr := n.addr(0)
		clWait(t, 30*time.Second, "the whole map at "+addr, func() (bool, string) {
			m, lines, err := grMasters(addr)
			return err == nil && lines == 10 && len(m) == grCount, fmt.Sprint(lines, " lines, ", m, err)
		})
	}
	if _, err := exec.LookPath("redis-cli"); err == nil {
		for _, n := range nodes {
			out, err := exec.Command("redis-cli", "--cluster", "check", n.addr(0)).CombinedOutput()
			if s := string(out); err != nil || strings.Contains(s, "[ERR]") || strings.Contains(s, "[WARNING]") {
				t.Errorf("redis-cli --cluster check at %s: %v\n%s", n.addr(0), err, s)
			}
		}
	}
}
