package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayd/delayd/internal/testserver"
)

// Several Raft groups (docs/decisions/raft-groups.md): three nodes, the
// slots split over three groups, each node serving each group at its own
// address (port + g). The tests move each group's leader to its own node
// with CLUSTER FAILOVER, then check what Redis Cluster tools see, what
// the clients do with it, and that a group whose leader dies fails over
// while the others keep serving.
//
//	go test -count=1 -run 'TestClusterGroups' -v ./integration_test/

const grCount = 3

// grNode is one process of a several-group cluster.
type grNode struct {
	*server
	port, bus int // group 0's; group g's are + g
}

func (n *grNode) addr(g int) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port+g))
}

// grStart starts a node whose group ports (client and bus) are all free.
func grStart(t *testing.T, how ...string) *grNode {
	t.Helper()
	return grStartWide(t, grCount, how...)
}

// grStartWide starts a node whose first width group ports are free: a
// cluster that grows a group (add-node) needs one more.
func grStartWide(t *testing.T, width int, how ...string) *grNode {
	t.Helper()
	for try := 0; ; try++ {
		port, err := ports.TakeRun("127.0.0.1", width, 1)
		if err != nil {
			t.Fatal(err)
		}
		bus, err := ports.TakeRun("127.0.0.1", width, 1)
		if err != nil {
			t.Fatal(err)
		}
		args := []string{"--bind", "127.0.0.1", "--http-addr", "", "--dir", t.TempDir(),
			"--log-level", "info", "--log-format", "json", "--port", strconv.Itoa(port),
			"--cluster-group-port-step", "1", "--ack-timeout", "30000"} // a pop reserves: ACK counts it
		args = append(append(args, testserver.ClusterFlags(bus)...), how...)
		s := newServer(t, port, nil, args...)
		err = s.Start()
		if err == nil {
			return &grNode{server: s, port: port, bus: bus}
		}
		if !errors.Is(err, testserver.ErrPortTaken) || try == 5 {
			t.Fatalf("node did not start: %v", err)
		}
	}
}

// grAsk sends one command to addr.
func grAsk(addr string, args ...any) (any, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: clOp})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), clOp)
	defer cancel()
	return c.Do(ctx, args...).Result()
}

// grMasters reads CLUSTER NODES at addr: the master's address of each
// slot range ("0-5460" -> "127.0.0.1:7000"), and how many lines it has.
func grMasters(addr string) (map[string]string, int, error) {
	v, err := grAsk(addr, "CLUSTER", "NODES")
	if err != nil {
		return nil, 0, err
	}
	masters, lines := map[string]string{}, 0
	for _, l := range strings.Split(strings.TrimSpace(fmt.Sprint(v)), "\n") {
		f := strings.Fields(l)
		lines++
		if len(f) > 8 && strings.Contains(f[2], "master") && !strings.Contains(f[2], "fail") {
			a, _, _ := strings.Cut(f[1], "@")
			masters[f[8]] = a
		}
	}
	return masters, lines, nil
}

// grKeys finds a key of each group: slot ranges split evenly, in order.
func grKeys(t *testing.T, addr string) []string {
	t.Helper()
	keys := make([]string, grCount)
	for i, found := 0, 0; found < grCount; i++ {
		k := "q" + strconv.Itoa(i)
		v, err := grAsk(addr, "CLUSTER", "KEYSLOT", k)
		if err != nil {
			t.Fatal(err)
		}
		if g := int(v.(int64)) * grCount / 16384; keys[g] == "" {
			keys[g], found = k, found+1
		}
	}
	return keys
}

// grRanges are the groups' slot ranges as the cluster starts.
var grRanges = []string{"0-5460", "5461-10921", "10922-16383"}

// grCluster starts three nodes, three groups, group g led by node g.
func grCluster(t *testing.T) []*grNode {
	t.Helper()
	return grClusterWide(t, grCount)
}

// grClusterWide is grCluster on nodes with width free group ports each.
func grClusterWide(t *testing.T, width int) []*grNode {
	t.Helper()
	nodes := []*grNode{grStartWide(t, width, "--cluster-bootstrap", "--cluster-groups", strconv.Itoa(grCount))}
	for g := 0; g < grCount; g++ {
		clWait(t, 15*time.Second, fmt.Sprintf("group %d's bootstrap", g), func() (bool, string) {
			v, err := grAsk(nodes[0].addr(g), "INFO", "replication")
			return err == nil && strings.Contains(fmt.Sprint(v), "role:master"), fmt.Sprint(v, err)
		})
	}
	for i := 1; i < 3; i++ {
		nodes = append(nodes, grStartWide(t, width, "--cluster-join", nodes[0].addr(0)))
	}
	// Each group's leader hears from both followers.
	for g := 0; g < grCount; g++ {
		clWait(t, 20*time.Second, fmt.Sprintf("group %d formed", g), func() (bool, string) {
			v, err := grAsk(nodes[0].addr(g), "INFO", "replication")
			return err == nil && strings.Count(fmt.Sprint(v), "state=online") == 2, fmt.Sprint(v, err)
		})
	}
	// Leaders on different nodes: group g's on node g. The placement rule
	// would spread them too, after a while and to nodes of its choosing;
	// these hand-overs come first, and leave it nothing to move.
	for g := 1; g < grCount; g++ {
		_, err := grAsk(nodes[g].addr(g), "CLUSTER", "FAILOVER")
		if err != nil && !strings.Contains(err.Error(), "send CLUSTER FAILOVER to a replica") {
			t.Fatalf("CLUSTER FAILOVER at node %d's group %d: %v", g, g, err)
		}
	}
	ranges := grRanges
	for _, n := range nodes {
		for g := 0; g < grCount; g++ {
			addr := n.addr(g)
			clWait(t, 15*time.Second, "every address names each group's leader", func() (bool, string) {
				m, lines, err := grMasters(addr)
				if err != nil || lines != 9 {
					return false, fmt.Sprint(addr, ": ", lines, " lines, ", err)
				}
				for i, r := range ranges {
					if m[r] != nodes[i].addr(i) {
						return false, fmt.Sprint(addr, ": masters ", m)
					}
				}
				return true, ""
			})
		}
	}
	return nodes
}

func TestClusterGroups(t *testing.T) {
	t.Parallel()
	nodes := grCluster(t)
	ranges := grRanges
	keys := grKeys(t, nodes[0].addr(0))

	t.Run("redis-cli --cluster check", func(t *testing.T) {
		if _, err := exec.LookPath("redis-cli"); err != nil {
			t.Skip("no redis-cli")
		}
		out, err := exec.Command("redis-cli", "--cluster", "check", nodes[1].addr(0)).CombinedOutput()
		s := string(out)
		if err != nil || !strings.Contains(s, "[OK] All nodes agree about slots configuration.") ||
			!strings.Contains(s, "[OK] All 16384 slots covered.") || strings.Contains(s, "[ERR]") || strings.Contains(s, "[WARNING]") ||
			strings.Count(s, "2 slaves.") != 3 {
			t.Errorf("redis-cli --cluster check: %v\n%s", err, s)
		}
	})

	t.Run("go-redis ClusterClient", func(t *testing.T) {
		rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{nodes[2].addr(0)}, Protocol: 2})
		defer rc.Close()
		ctx := ctxT(t, 20*time.Second)
		for _, k := range keys {
			if err := rc.Do(ctx, "DELAY.ADD", k, 0, "go-"+k, "ID", "go-"+k).Err(); err != nil {
				t.Fatalf("DELAY.ADD %s: %v", k, err)
			}
		}
		for _, k := range keys {
			v, err := rc.Do(ctx, "DELAY.POP", k, 0).Slice()
			if err != nil || len(v) < 3 || v[1] != "go-"+k || v[2] != "go-"+k {
				t.Fatalf("DELAY.POP %s: %v %v", k, v, err)
			}
			if n, err := rc.Do(ctx, "DELAY.ACK", k, v[1]).Int(); err != nil || n != 1 {
				t.Fatalf("DELAY.ACK %s: %d %v", k, n, err)
			}
		}
		// Each job went to its group's engine, and only there.
		for g, k := range keys {
			for h := 0; h < grCount; h++ {
				v, err := grAsk(nodes[h].addr(h), "DELAY.STATS", k)
				if h != g {
					if err == nil || !strings.HasPrefix(err.Error(), "MOVED ") {
						t.Errorf("DELAY.STATS %s at group %d's leader: %v %v, want MOVED", k, h, v, err)
					}
				} else if err != nil {
					t.Errorf("DELAY.STATS %s at its group's leader: %v", k, err)
				}
			}
		}
	})

	t.Run("redis-py RedisCluster", func(t *testing.T) {
		if _, err := os.Stat("/usr/bin/python3"); err != nil {
			t.Skip("no /usr/bin/python3")
		}
		script := `
import sys
from redis.cluster import RedisCluster, ClusterNode
RedisCluster.__deepcopy__ = lambda self, memo: self  # redis-py #2377, as the README says
host, port = sys.argv[1].rsplit(":", 1)
rc = RedisCluster(startup_nodes=[ClusterNode(host, int(port))])
assert len(rc.get_primaries()) == 3, rc.get_primaries()
for k in sys.argv[2:]:
    rc.execute_command("DELAY.ADD", k, 0, "py", "ID", "py-" + k)
for k in sys.argv[2:]:
    job = rc.execute_command("DELAY.POP", k, 0)
    assert job[1] == b"py-" + k.encode(), job
    assert rc.execute_command("DELAY.ACK", k, job[1]) == 1
print("ok")
`
		args := append([]string{"-c", script, nodes[1].addr(2)}, keys...)
		out, err := exec.Command("/usr/bin/python3", args...).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "ok" {
			if strings.Contains(string(out), "No module named 'redis'") {
				t.Skip("no redis-py")
			}
			t.Errorf("redis-py: %v\n%s", err, out)
		}
	})

	t.Run("a group's leader dies, the other groups serve on", func(t *testing.T) {
		// Group 1 is led by node 1; groups 0 and 2 by nodes 0 and 2.
		killed := time.Now()
		nodes[1].Kill9()
		// While group 1 elects, groups 0 and 2 take every write at once.
		var served int
		for time.Since(killed) < 2*time.Second {
			for _, g := range []int{0, 2} {
				if _, err := grAsk(nodes[g].addr(g), "DELAY.ADD", keys[g], 3600000, "x"); err != nil {
					t.Fatalf("group %d, while group 1 elects (%v after the kill): %v", g, time.Since(killed), err)
				}
				served++
			}
		}
		// Group 1 elects a leader on node 0 or 2, which every address names.
		var leader string
		clWait(t, 20*time.Second, "group 1 fails over", func() (bool, string) {
			m, _, err := grMasters(nodes[0].addr(0))
			leader = m[ranges[1]]
			return err == nil && leader != "" && leader != nodes[1].addr(1), fmt.Sprint(m, err)
		})
		if _, err := grAsk(leader, "DELAY.ADD", keys[1], 0, "after", "ID", "after"); err != nil {
			t.Fatalf("group 1's new leader %s: %v", leader, err)
		}
		t.Logf("group 1 failed over to %s %v after its leader's SIGKILL; groups 0 and 2 served %d adds meanwhile", leader, time.Since(killed), served)
		for g := 0; g < grCount; g++ {
			if g == 1 {
				continue
			}
			if m, _, _ := grMasters(nodes[2].addr(g)); m[ranges[g]] != nodes[g].addr(g) {
				t.Errorf("group %d's leader moved: %v", g, m)
			}
		}
		// The killed node comes back as a replica of every group.
		if err := nodes[1].Server.Start(); err != nil {
			t.Fatalf("restart: %v", err)
		}
		clWait(t, 20*time.Second, "the restarted node rejoins each group", func() (bool, string) {
			for g := 0; g < grCount; g++ {
				v, err := grAsk(nodes[1].addr(g), "INFO", "replication")
				if err != nil || !strings.Contains(fmt.Sprint(v), "master_link_status:up") {
					return false, fmt.Sprint(g, v, err)
				}
			}
			return true, ""
		})
	})
}
