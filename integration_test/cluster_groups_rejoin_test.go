package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayd/delayd/cluster"
)

// A node of a cluster of three groups whose data dir is wiped starts again
// with --cluster-join at its addresses: it rejoins every group with new
// ids, and each group's leader sends it one snapshot (the logs compacted
// so that it must take one), not a second for the id it had
// (docs/decisions/raft-snapshots.md). With --cluster-replicas 3 (the
// default) every group has its 3 voters when it asks, its own dead old id
// among them: it still takes its seat in each, the old ids are gone from
// every group, and redis-cli --cluster check is clean
// (docs/decisions/group-replicas.md).
//
//	go test -count=1 -run '^TestClusterGroupsWipedNodeRejoins$' -v ./integration_test/
func TestClusterGroupsWipedNodeRejoins(t *testing.T) {
	t.Parallel()
	const snapEvery = 64
	extra := []string{"--cluster-snapshot-entries", strconv.Itoa(snapEvery), "--auto-rewrite-percentage", "0"}
	nodes := []*grNode{grStart(t, append([]string{"--cluster-bootstrap", "--cluster-groups", strconv.Itoa(grCount)}, extra...)...)}
	for g := 0; g < grCount; g++ {
		clWait(t, 15*time.Second, fmt.Sprintf("group %d's bootstrap", g), func() (bool, string) {
			v, err := grAsk(nodes[0].addr(g), "INFO", "replication")
			return err == nil && strings.Contains(fmt.Sprint(v), "role:master"), fmt.Sprint(v, err)
		})
	}
	for i := 1; i < 3; i++ {
		nodes = append(nodes, grStart(t, append([]string{"--cluster-join", nodes[0].addr(0)}, extra...)...))
	}
	leaderOf := func(g int) *grNode {
		for _, n := range nodes {
			if v, err := grAsk(n.addr(g), "INFO", "replication"); err == nil && strings.Contains(fmt.Sprint(v), "role:master") {
				return n
			}
		}
		return nil
	}
	for g := 0; g < grCount; g++ {
		clWait(t, 20*time.Second, fmt.Sprintf("group %d formed", g), func() (bool, string) {
			l := leaderOf(g)
			if l == nil {
				return false, "no leader"
			}
			v, err := grAsk(l.addr(g), "INFO", "replication")
			return err == nil && strings.Count(fmt.Sprint(v), "state=online") == 2, fmt.Sprint(v, err)
		})
	}

	// Single writes to each group, until its log is past the 10240 entries
	// a leader keeps behind its snapshot (writes at once share entries).
	keys := grKeys(t, nodes[0].addr(0))
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{nodes[0].addr(0)}, Protocol: 2})
	defer rc.Close()
	const target = 10240 + 4*snapEvery
	offset := func(g int) int {
		v, err := grAsk(leaderOf(g).addr(g), "INFO", "replication")
		if err != nil {
			return 0
		}
		for _, l := range strings.Split(fmt.Sprint(v), "\n") {
			if n, ok := strings.CutPrefix(strings.TrimSpace(l), "master_repl_offset:"); ok {
				i, _ := strconv.Atoi(n)
				return i
			}
		}
		return 0
	}
	var wg sync.WaitGroup
	var failed atomic.Int64
	written := make([]int, grCount)
	start := time.Now()
	for g := 0; g < grCount; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Since(start) < 2*time.Minute; i++ {
				if i%1000 == 0 && offset(g) > target {
					written[g] = i
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), clOp)
				err := rc.Do(ctx, "DELAY.ADD", "{"+keys[g]+"}w", 3600000, "p", "ID", fmt.Sprint("j", i)).Err()
				cancel()
				if err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("writes to the %d groups: %v in %v (%d failed)", grCount, written, time.Since(start).Round(time.Millisecond), failed.Load())
	if failed.Load() > 0 {
		t.Fatalf("%d writes failed", failed.Load())
	}
	for g := 0; g < grCount; g++ {
		l := leaderOf(g)
		dir := cluster.GroupDir(grDir(t, l), g)
		clWait(t, 30*time.Second, fmt.Sprintf("group %d's leader taking a snapshot past index %d", g, 10240+snapEvery), func() (bool, string) {
			snaps := clSnapshots(dir)
			return len(snaps) > 0 && snaps[len(snaps)-1] > 10240+snapEvery, fmt.Sprintf("snapshots at %v", snaps)
		})
	}

	// The victim: a node that leads no group, so that the groups keep
	// their leaders.
	var victim *grNode
	for _, n := range nodes {
		leads := false
		for g := 0; g < grCount; g++ {
			leads = leads || leaderOf(g) == n
		}
		if !leads {
			victim = n
			break
		}
	}
	if victim == nil {
		t.Fatal("every node leads a group")
	}
	dir := grDir(t, victim)
	victim.Kill9()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := newServer(t, victim.port, nil, victim.Server.Args...)
	if err := s.Spawn(); err != nil {
		t.Fatal(err)
	}
	victim.server = s
	for g := 0; g < grCount; g++ {
		key := "{" + keys[g] + "}w"
		clWait(t, 60*time.Second, fmt.Sprintf("the wiped node's group %d holding every job", g), func() (bool, string) {
			c := redis.NewClient(&redis.Options{Addr: victim.addr(g), Protocol: 2, MaxRetries: -1, ReadTimeout: clOp,
				OnConnect: func(ctx context.Context, c *redis.Conn) error { return c.ReadOnly(ctx).Err() }})
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), clOp)
			defer cancel()
			v, err := c.Do(ctx, "DELAY.STATS", key).Result()
			if err != nil {
				return false, err.Error()
			}
			m := fields(t, "DELAY.STATS", v)
			return asInt(t, "delayed", m["delayed"]) == int64(written[g]), fmt.Sprint(m)
		})
	}
	// Each group's snapshot, received once: by node id (each group's own).
	got := map[string]int{}
	for _, line := range strings.Split(victim.Output(), "\n") {
		if !strings.Contains(line, "copied to local snapshot") {
			continue
		}
		var l struct{ Node string }
		if err := json.Unmarshal([]byte(line), &l); err == nil {
			got[l.Node]++
		}
	}
	t.Logf("snapshots received by the wiped node's groups (by node id): %v", got)
	if len(got) != grCount {
		t.Errorf("snapshots received by %d of the wiped node's groups, want %d: %v", len(got), grCount, got)
	}
	for id, n := range got {
		if n != 1 {
			t.Errorf("the wiped node's group with id %s received %d snapshots, want 1", id, n)
		}
	}

	// The wiped node holds a replica of every group, as it did.
	v, err := grAsk(victim.addr(0), "CLUSTER", "GROUPS")
	if err != nil {
		t.Fatal(err)
	}
	gs, _ := v.([]any)
	if len(gs) != grCount {
		t.Fatalf("CLUSTER GROUPS at the wiped node: %v", v)
	}
	for g, e := range gs {
		if f, _ := e.([]any); len(f) < 2 || f[1] != victim.addr(g) {
			t.Errorf("CLUSTER GROUPS at the wiped node, group %d: %v, want its address %s", g, e, victim.addr(g))
		}
	}
	// Each group has its three members, every one connected: the old ids
	// are gone, none left a dead voter.
	for g := 0; g < grCount; g++ {
		clWait(t, 20*time.Second, fmt.Sprintf("group %d's three members, all connected", g), func() (bool, string) {
			l := leaderOf(g)
			if l == nil {
				return false, "no leader"
			}
			v, err := grAsk(l.addr(g), "CLUSTER", "NODES")
			if err != nil {
				return false, err.Error()
			}
			ns := cluster.ParseGroupNodes(fmt.Sprint(v))
			ok := len(ns) == 3 && !strings.Contains(fmt.Sprint(v), "nofailover") // every one a voter
			for _, n := range ns {
				ok = ok && n.Connected
			}
			return ok, fmt.Sprint(v)
		})
	}
	clWait(t, 20*time.Second, "redis-cli --cluster check clean", func() (bool, string) {
		out, err := exec.Command("redis-cli", "--cluster", "check", victim.addr(0)).CombinedOutput()
		s := string(out)
		return err == nil && strings.Contains(s, "[OK] All 16384 slots covered.") &&
			!strings.Contains(s, "[ERR]") && !strings.Contains(s, "[WARNING]"), s
	})
}

// grDir is the node's --dir.
func grDir(t *testing.T, n *grNode) string {
	t.Helper()
	for i, a := range n.Server.Args {
		if a == "--dir" && i+1 < len(n.Server.Args) {
			return n.Server.Args[i+1]
		}
	}
	t.Fatal("no --dir")
	return ""
}
