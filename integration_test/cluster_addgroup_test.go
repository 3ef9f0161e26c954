package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redis-cli --cluster add-node of a 4th node to a cluster of 3 groups
// (docs/decisions/add-node.md): the node met joins group 0 and adds a
// group of its own, owning no slot, replicated on two other processes;
// redis-cli --cluster rebalance --cluster-use-empty-masters then moves
// slots into it while a producer and workers run: every job acknowledged
// is handed out once, none before its due time. Then every node restarts
// in turn, the new group with them.
//
//	go test -count=1 -run 'TestClusterAddNodeGroup' -v ./integration_test/

func TestClusterAddNodeGroup(t *testing.T) {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("no redis-cli")
	}
	t.Parallel()
	const width = grCount + 1 // the group added listens at port + 3
	nodes := grClusterWide(t, width)
	fresh := grStartWide(t, width) // in no group: waits to be met
	// Queues in the first slots of each group, which rebalance moves first
	// (each source gives its lowest slots), and one in slots none gives.
	var queues []string
	for g := 0; g < grCount; g++ {
		for i := 0; i < 3; i++ {
			q, _ := grKeyIn(t, nodes[0].addr(0), g*16384/grCount, g*16384/grCount+60, fmt.Sprintf("load%d-%d-", g, i))
			queues = append(queues, q)
		}
	}
	stays, _ := grKeyIn(t, nodes[0].addr(0), 5000, 5400, "stays-")
	load := startAddLoad(t, nodes[0].addr(0), append(queues, stays))

	out, err := exec.Command("redis-cli", "--cluster", "add-node", fresh.addr(0), nodes[1].addr(0)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "[OK] New node added correctly.") {
		t.Fatalf("redis-cli --cluster add-node: %v\n%s", err, out)
	}
	// Group 3: led by the new node, with 3 voters, no slot; every address
	// lists it (13 lines: 4 members of group 0, 3 of each other group).
	clWait(t, 30*time.Second, "group 3, led by the new node, with 3 voters", func() (bool, string) {
		v, err := grAsk(nodes[2].addr(0), "CLUSTER", "GROUPS")
		if err != nil {
			return false, err.Error()
		}
		gs := v.([]any)
		if len(gs) != 4 {
			return false, fmt.Sprint(gs)
		}
		g3 := gs[3].([]any) // marked added: a joiner learns the bootstrap's split
		return len(g3[2].([]any)) == 0 && g3[3] == int64(3) && len(g3) == 5 && g3[4] == int64(1) &&
			len(gs[2].([]any)) == 4, fmt.Sprint(gs)
	})
	clWait(t, 20*time.Second, "group 3's leader hears from both followers", func() (bool, string) {
		v, err := grAsk(fresh.addr(3), "INFO", "replication")
		return err == nil && strings.Contains(fmt.Sprint(v), "role:master") && strings.Count(fmt.Sprint(v), "state=online") == 2, fmt.Sprint(v, err)
	})
	for _, n := range append([]*grNode{fresh}, nodes...) {
		addr := n.addr(0)
		clWait(t, 30*time.Second, "the new group's master at "+addr, func() (bool, string) {
			v, err := grAsk(addr, "CLUSTER", "NODES")
			s := fmt.Sprint(v)
			return err == nil && strings.Count(strings.TrimSpace(s), "\n") == 12 &&
				strings.Contains(s, fresh.addr(3)) && strings.Count(s, "master") == 4, s
		})
	}
	clWait(t, 20*time.Second, "redis-cli --cluster check with the empty master", func() (bool, string) {
		out, err := exec.Command("redis-cli", "--cluster", "check", nodes[0].addr(0)).CombinedOutput()
		s := string(out)
		return err == nil && !strings.Contains(s, "[ERR]") && !strings.Contains(s, "[WARNING]") &&
			strings.Contains(s, fresh.addr(3)+" ("), s
	})

	// The even share (4096 slots) takes minutes on a loaded machine (each
	// slot is three commits of group 0, tens of ms): CI gives the new group
	// a small weight, DELAYD_ADDNODE_EVEN=1 its whole share.
	args := []string{"--cluster", "rebalance", nodes[0].addr(0), "--cluster-use-empty-masters", "--cluster-pipeline", "5"}
	if os.Getenv("DELAYD_ADDNODE_EVEN") == "" {
		v, err := grAsk(fresh.addr(3), "CLUSTER", "MYID")
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, "--cluster-weight", fmt.Sprint(v, "=0.05"))
	}
	began := time.Now()
	out, err = grRebalance(t, args...)
	took := time.Since(began)
	if err != nil || strings.Contains(string(out), "[ERR]") || !strings.Contains(string(out), "Moving") {
		t.Fatalf("redis-cli --cluster rebalance: %v\n%s", err, out)
	}
	t.Logf("rebalance onto the new group took %v:\n%s", took.Round(time.Millisecond), lastLines(string(out), 3))
	clWait(t, 20*time.Second, "redis-cli --cluster check clean after rebalance", func() (bool, string) {
		out, err := exec.Command("redis-cli", "--cluster", "check", fresh.addr(0)).CombinedOutput()
		s := string(out)
		return err == nil && strings.Contains(s, "[OK] All 16384 slots covered.") && !strings.Contains(s, "[ERR]") &&
			!strings.Contains(s, "[WARNING]") && strings.Contains(s, fresh.addr(3)+" (") &&
			!regexp.MustCompile(regexp.QuoteMeta(fresh.addr(3))+` \(.*\) -> \d+ keys \| 0 slots`).MatchString(s), s
	})
	load.stop(t)
	for _, q := range queues {
		if v, err := grAsk(fresh.addr(3), "DELAY.STATS", q); err != nil {
			t.Errorf("%s, of a slot rebalance moved, is not in the new group: %v %v", q, v, err)
		}
	}

	// A ClusterClient routes a key of a slot the new group owns there.
	key := ""
	for i := 0; key == ""; i++ {
		k := "added-" + strconv.Itoa(i)
		if _, err := grAsk(fresh.addr(3), "DELAY.STATS", k); err == nil {
			key = k
		}
	}
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{nodes[2].addr(1)}, Protocol: 2})
	defer rc.Close()
	ctx := ctxT(t, 30*time.Second)
	if err := rc.Do(ctx, "DELAY.ADD", key, 3_600_000, "kept", "ID", "kept").Err(); err != nil {
		t.Fatalf("DELAY.ADD %s: %v", key, err)
	}
	if v, err := grAsk(fresh.addr(3), "DELAY.GET", key, "kept"); err != nil {
		t.Fatalf("the job at the new group's leader: %v %v", v, err)
	}

	// Every node restarts in turn: the new group comes back on its hosts
	// with its job, and the map with every group.
	for _, n := range append(nodes, fresh) {
		n.Restart()
		clWait(t, 30*time.Second, "redis-cli --cluster check clean after a restart", func() (bool, string) {
			out, err := exec.Command("redis-cli", "--cluster", "check", n.addr(0)).CombinedOutput()
			s := string(out)
			return err == nil && strings.Contains(s, "[OK] All 16384 slots covered.") && !strings.Contains(s, "[ERR]") &&
				!strings.Contains(s, "[WARNING]") && strings.Count(s, "M: ") == 4, s
		})
	}
	if v, err := rc.Do(ctx, "DELAY.GET", key, "kept").Result(); err != nil {
		t.Errorf("the new group's job after the restarts: %v %v", v, err)
	}

	// del-node: rebalance with the new group's master's weight 0 empties
	// it, under load again; del-node of the new node's address removes the
	// group everywhere and the process from group 0.
	load = startAddLoad(t, nodes[0].addr(0), append(queues, stays))
	master := grMasterOf(t, fresh.addr(3))
	out, err = grRebalance(t, "--cluster", "rebalance", nodes[1].addr(0), "--cluster-weight", master+"=0",
		"--cluster-pipeline", "5")
	if err != nil || strings.Contains(string(out), "[ERR]") || !strings.Contains(string(out), "Moving") {
		t.Fatalf("redis-cli --cluster rebalance --cluster-weight %s=0: %v\n%s", master, err, out)
	}
	load.stop(t)
	id, err := grAsk(fresh.addr(3), "CLUSTER", "MYID")
	if err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command("redis-cli", "--cluster", "del-node", nodes[2].addr(0), fmt.Sprint(id)).CombinedOutput()
	if err != nil || strings.Contains(string(out), "ERR") {
		t.Fatalf("redis-cli --cluster del-node: %v\n%s", err, out)
	}
	for _, n := range nodes {
		addr := n.addr(0)
		clWait(t, 20*time.Second, "3 groups and 9 members at "+addr, func() (bool, string) {
			v, err := grAsk(addr, "CLUSTER", "NODES")
			s := fmt.Sprint(v)
			return err == nil && strings.Count(strings.TrimSpace(s), "\n") == 8 && !strings.Contains(s, fresh.addr(0)) &&
				!strings.Contains(s, fresh.addr(3)), s
		})
	}
	clWait(t, 20*time.Second, "redis-cli --cluster check clean after del-node", func() (bool, string) {
		out, err := exec.Command("redis-cli", "--cluster", "check", nodes[0].addr(0)).CombinedOutput()
		s := string(out)
		return err == nil && strings.Contains(s, "[OK] All 16384 slots covered.") && !strings.Contains(s, "[ERR]") &&
			!strings.Contains(s, "[WARNING]") && strings.Count(s, "M: ") == 3, s
	})
	// (A context of its own: the restarts and the rebalance above outlast
	// the first one.)
	if v, err := rc.Do(ctxT(t, 30*time.Second), "DELAY.GET", key, "kept").Result(); err != nil {
		t.Errorf("the job after del-node: %v %v", v, err)
	}
	// Its hosts stop it a few seconds later (redis-cli's last commands
	// reach its addresses meanwhile) and delete its directory; the node
	// removed is stopped by its operator.
	for _, n := range nodes {
		dir := n.Args[slices.Index(n.Args, "--dir")+1]
		clWait(t, 20*time.Second, "the removed group stopped at "+n.addr(3), func() (bool, string) {
			_, err := grAsk(n.addr(3), "PING")
			_, serr := os.Stat(filepath.Join(dir, "group-3"))
			return err != nil && serr != nil, fmt.Sprint(err, serr)
		})
	}
	fresh.Stop()
}

// grRebalance runs redis-cli --cluster rebalance, again while its own
// check before it moves anything finds the cluster changing (a group's
// leader elected a moment ago, a view a second old): nothing moved then.
func grRebalance(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	for try := 0; ; try++ {
		out, err := exec.Command("redis-cli", args...).CombinedOutput()
		if err == nil || try == 10 || !strings.Contains(string(out), "Please fix your cluster problems before rebalancing") {
			return out, err
		}
		t.Logf("rebalance refused to start, again in 1 s:\n%s", out)
		time.Sleep(time.Second)
	}
}

// grMasterOf is the node id of the master of the group served at addr.
func grMasterOf(t *testing.T, addr string) string {
	t.Helper()
	v, err := grAsk(addr, "CLUSTER", "NODES")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(fmt.Sprint(v), "\n") {
		if f := strings.Fields(l); len(f) > 3 && strings.Contains(f[2], "myself") {
			if strings.Contains(f[2], "master") {
				return f[0]
			}
			return f[3]
		}
	}
	t.Fatalf("no myself line at %s: %v", addr, v)
	return ""
}

// addLoad is a producer and a worker per queue, through a ClusterClient:
// each job is added with a delay and an id of its own, popped, acked.
type addLoad struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	added  map[string]time.Time // id -> not due before
	popped map[string]int
	early  []string
	errs   []string
	rc     *redis.ClusterClient
}

func startAddLoad(t *testing.T, seed string, queues []string) *addLoad {
	t.Helper()
	l := &addLoad{added: map[string]time.Time{}, popped: map[string]int{}}
	l.rc = redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{seed}, Protocol: 2, MaxRedirects: 32})
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	for _, name := range queues {
		l.wg.Add(2)
		go func() { // producer
			defer l.wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				id, delay := fmt.Sprintf("%s-%d", name, i), i%5*100
				due := time.Now().Add(time.Duration(delay) * time.Millisecond)
				var err error
				for try := 0; try < 50; try++ {
					if err = l.rc.Do(ctx, "DELAY.ADD", name, delay, "p", "ID", id).Err(); err == nil || ctx.Err() != nil {
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				if err != nil {
					if ctx.Err() == nil {
						l.fail("DELAY.ADD %s %s: %v", name, id, err)
					}
					return
				}
				l.mu.Lock()
				l.added[id] = due
				l.mu.Unlock()
				time.Sleep(10 * time.Millisecond)
			}
		}()
		go func() { // worker
			defer l.wg.Done()
			for {
				v, err := l.rc.Do(context.Background(), "DELAY.POP", name, 1).Slice()
				at := time.Now()
				if err == redis.Nil {
					if ctx.Err() != nil && l.drained(name) {
						return
					}
					continue
				}
				if err != nil {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				id := fmt.Sprint(v[1])
				l.mu.Lock()
				l.popped[id]++
				if due, ok := l.added[id]; ok && at.Before(due) {
					l.early = append(l.early, fmt.Sprintf("%s popped %v early", id, due.Sub(at)))
				}
				l.mu.Unlock()
				for try := 0; try < 50; try++ {
					if err = l.rc.Do(context.Background(), "DELAY.ACK", name, id).Err(); err == nil {
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				if err != nil {
					l.fail("DELAY.ACK %s %s: %v", name, id, err)
				}
			}
		}()
	}
	return l
}

func (l *addLoad) fail(f string, a ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, fmt.Sprintf(f, a...))
}

// drained says whether every job added to q was popped.
func (l *addLoad) drained(q string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := range l.added {
		if strings.HasPrefix(id, q+"-") && l.popped[id] == 0 {
			return false
		}
	}
	return true
}

// stop stops the producers, lets the workers drain, and checks: every job
// added popped exactly once, none early.
func (l *addLoad) stop(t *testing.T) {
	t.Helper()
	l.cancel()
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Error("the workers did not drain in 30 s")
	}
	defer l.rc.Close()
	l.mu.Lock()
	defer l.mu.Unlock()
	lost, doubled := 0, 0
	for id := range l.added {
		switch n := l.popped[id]; {
		case n == 0:
			lost++
			if lost < 5 {
				t.Errorf("%s added, never popped", id)
			}
		case n > 1:
			doubled++
			if doubled < 5 {
				t.Errorf("%s popped %d times", id, n)
			}
		}
	}
	for _, e := range append(l.early, l.errs...) {
		t.Error(e)
	}
	t.Logf("load: %d jobs added, %d lost, %d doubled, %d early", len(l.added), lost, doubled, len(l.early))
}
