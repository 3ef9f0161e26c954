package integration

// The cluster under test for TestChaos: N delayd processes in cluster mode,
// each a *server of the harness (so its output shows when the test fails),
// with the chaos proxy between their bus addresses.
//
// Node i (1-based) listens for Raft on 127.0.0.(10+i):port and dials the
// other nodes from that IP, so the proxy tells who is talking by the source
// address. It announces the proxy's listener for it as its bus address, so
// every byte of Raft traffic between two nodes crosses the proxy.

import (
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/delayd/delayd/chaos"
	"github.com/redis/go-redis/v9"
)

// chaosClusterFlags are the server flags TestChaos needs (the cluster's
// contract); a binary whose --help lacks one cannot run it.
var chaosClusterFlags = []string{
	"--cluster-enabled", "--cluster-node-id", "--cluster-bus-addr", "--cluster-announce-bus-addr",
	"--cluster-bootstrap", "--cluster-join", "--cluster-ack", "--cluster-election-timeout",
}

// chaosSkipWithoutCluster skips the test when the binary has no cluster
// mode (--help does not list --cluster-enabled), and fails it when cluster
// mode is there without every flag of the contract TestChaos is written
// against: a silent skip would hide that from CI for good.
func chaosSkipWithoutCluster(t *testing.T) {
	t.Helper()
	out, err := exec.Command(binPath, "--help").CombinedOutput()
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("%s --help: %v", binPath, err)
		}
	}
	var missing []string
	for _, f := range chaosClusterFlags {
		if !strings.Contains(string(out), f+" ") {
			missing = append(missing, f)
		}
	}
	switch {
	case len(missing) > 0 && missing[0] == "--cluster-enabled":
		t.Skipf("delayd has no cluster mode yet (--help lacks --cluster-enabled): TestChaos runs once it lands")
	case len(missing) > 0:
		t.Fatalf("delayd has --cluster-enabled but --help lacks %s, which TestChaos needs", strings.Join(missing, ", "))
	}
}

// chaosNode is one member.
type chaosNode struct {
	name    string // "n1".."n5": the proxy's name for it
	ip      string // its bus host: 127.0.0.(10+i)
	port    int    // RESP
	busAddr string // where it listens for Raft
	annBus  string // the proxy's listener for it: its announced bus address
	dir     string
	gen     int // bumped by each wipe: a wiped node comes back as a new member
	srv     *server
	admin   *redis.Client // short timeouts, no retries: for INFO and CLUSTER

	mu     sync.Mutex
	paused bool // SIGSTOPped
}

func (n *chaosNode) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port)) }

// id is the node id of its current generation: 40 hex characters.
func (n *chaosNode) id() string {
	return fmt.Sprintf("%x", sha1.Sum([]byte(fmt.Sprintf("delayd-chaos-%s-%d", n.name, n.gen))))
}

func (n *chaosNode) isPaused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.paused
}

// chaosCluster is the set of nodes and the proxy between them.
type chaosCluster struct {
	t     *testing.T
	nodes []*chaosNode
	proxy *chaos.Proxy
	extra []string // DELAYD_CHAOS_ARGS
}

// args is the command line of n. join is "" for a member that restarts
// with its data (its Raft state knows the group), "bootstrap" for the
// first node of a new group, or the RESP address of a member to ask.
func (c *chaosCluster) args(n *chaosNode, join string) []string {
	a := []string{
		"--bind", "127.0.0.1",
		"--port", strconv.Itoa(n.port),
		"--dir", n.dir,
		"--log-level", "warn",
		"--log-format", "json",
		"--cluster-enabled", "yes",
		"--cluster-node-id", n.id(),
		"--cluster-bus-addr", n.busAddr,
		"--cluster-announce-bus-addr", n.annBus,
		"--cluster-ack", "quorum",
		"--cluster-election-timeout", "500",
	}
	switch join {
	case "":
	case "bootstrap":
		a = append(a, "--cluster-bootstrap")
	default:
		a = append(a, "--cluster-join", join)
	}
	return append(a, c.extra...)
}

// newChaosCluster starts n nodes: the first bootstraps the group, the
// others join it, and it returns once every node reports cluster_state:ok
// and the leader lists them all.
func newChaosCluster(t *testing.T, n int) *chaosCluster {
	t.Helper()
	c := &chaosCluster{t: t, extra: strings.Fields(os.Getenv("DELAYD_CHAOS_ARGS"))}
	c.proxy = chaos.NewProxy(chaos.ProxyOptions{Logf: func(format string, args ...any) {
		if verbose {
			t.Logf(format, args...)
		}
	}})
	t.Cleanup(func() { c.proxy.Close() })
	for i := 1; i <= n; i++ {
		ip := fmt.Sprintf("127.0.0.%d", 10+i)
		node := &chaosNode{
			name:    fmt.Sprintf("n%d", i),
			ip:      ip,
			port:    freePort(t),
			busAddr: net.JoinHostPort(ip, strconv.Itoa(freePortOn(t, ip))),
			dir:     t.TempDir(),
		}
		ann, err := c.proxy.Listen(node.name, "127.0.0.1:0", node.busAddr)
		if err != nil {
			t.Fatal(err)
		}
		node.annBus = ann
		c.proxy.MapIP(ip, node.name)
		node.admin = redis.NewClient(&redis.Options{
			Addr: node.Addr(), Protocol: 2, MaxRetries: -1, PoolSize: 2,
			DialTimeout: 300 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second,
		})
		t.Cleanup(func() { node.admin.Close() })
		c.nodes = append(c.nodes, node)
	}
	first := c.nodes[0]
	first.srv = newServer(t, first.port, nil, c.args(first, "bootstrap")...)
	if err := first.srv.Start(); err != nil {
		t.Fatalf("node %s did not start: %v", first.name, err)
	}
	for _, node := range c.nodes[1:] {
		node.srv = newServer(t, node.port, nil, c.args(node, first.Addr())...)
		if err := node.srv.Start(); err != nil {
			t.Fatalf("node %s did not start: %v", node.name, err)
		}
	}
	if err := c.waitHealthy(30*time.Second, true); err != nil {
		t.Fatalf("the cluster did not form: %v", err)
	}
	return c
}

// addrs is every node's RESP address, for the cluster clients.
func (c *chaosCluster) addrs() []string {
	var a []string
	for _, n := range c.nodes {
		a = append(a, n.Addr())
	}
	return a
}

func (c *chaosCluster) names(except ...*chaosNode) []string {
	var out []string
next:
	for _, n := range c.nodes {
		for _, e := range except {
			if n == e {
				continue next
			}
		}
		out = append(out, n.name)
	}
	return out
}

// info reads INFO section of a node that runs and is not paused.
func (n *chaosNode) info(ctx context.Context, section string) (string, error) {
	if !n.srv.Running() || n.isPaused() {
		return "", fmt.Errorf("%s is down", n.name)
	}
	return n.admin.Info(ctx, section).Result()
}

// leader finds the node that leads now: the one that says role:master,
// or, while a deposed leader has not noticed yet, the one most followers
// name in INFO replication (master_host:master_port).
func (c *chaosCluster) leader() (*chaosNode, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var masters []*chaosNode
	votes := make(map[string]int)
	for _, n := range c.nodes {
		text, err := n.info(ctx, "replication")
		if err != nil {
			continue
		}
		switch role, _ := infoValue(text, "role"); role {
		case "master":
			masters = append(masters, n)
			votes[n.Addr()]++
		case "slave", "replica":
			host, _ := infoValue(text, "master_host")
			port, _ := infoValue(text, "master_port")
			if host != "" && port != "" {
				votes[net.JoinHostPort(host, port)]++
			}
		}
	}
	switch len(masters) {
	case 0:
		return nil, errors.New("no node says role:master")
	case 1:
		return masters[0], nil
	}
	var best *chaosNode
	for _, m := range masters {
		if best == nil || votes[m.Addr()] > votes[best.Addr()] {
			best = m
		}
	}
	for _, m := range masters {
		if m != best && votes[m.Addr()] == votes[best.Addr()] {
			return nil, fmt.Errorf("%d nodes say role:master with equal support", len(masters))
		}
	}
	return best, nil
}

// waitLeader polls leader for up to d.
func (c *chaosCluster) waitLeader(d time.Duration) (*chaosNode, error) {
	deadline := time.Now().Add(d)
	for {
		l, err := c.leader()
		if err == nil {
			return l, nil
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitHealthy waits until every node runs and reports cluster_state:ok, a
// leader is known, and (all) the leader's CLUSTER NODES lists every node.
func (c *chaosCluster) waitHealthy(d time.Duration, all bool) error {
	deadline := time.Now().Add(d)
	var last error
	for time.Now().Before(deadline) {
		last = c.healthy(all)
		if last == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return last
}

func (c *chaosCluster) healthy(all bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, n := range c.nodes {
		if !n.srv.Running() || n.isPaused() {
			return fmt.Errorf("%s is down", n.name)
		}
		text, err := n.admin.Do(ctx, "CLUSTER", "INFO").Text()
		if err != nil {
			return fmt.Errorf("%s: CLUSTER INFO: %v", n.name, err)
		}
		if st, _ := infoValue(text, "cluster_state"); st != "ok" {
			return fmt.Errorf("%s: cluster_state:%s", n.name, st)
		}
	}
	l, err := c.leader()
	if err != nil {
		return err
	}
	if all {
		text, err := l.admin.Do(ctx, "CLUSTER", "NODES").Text()
		if err != nil {
			return fmt.Errorf("leader %s: CLUSTER NODES: %v", l.name, err)
		}
		for _, n := range c.nodes {
			if !strings.Contains(text, n.id()) {
				return fmt.Errorf("leader %s does not list %s (%s) in CLUSTER NODES:\n%s", l.name, n.name, n.id(), text)
			}
		}
	}
	return nil
}

// kill9 kills n with SIGKILL (resuming it first if paused, or the kernel
// holds the signal's effect until then).
func (c *chaosCluster) kill9(n *chaosNode) {
	n.mu.Lock()
	if n.paused {
		n.srv.Signal(syscall.SIGCONT)
		n.paused = false
	}
	n.mu.Unlock()
	n.srv.Kill9()
}

// restart starts n again on its data dir, as a member that knows its group.
func (c *chaosCluster) restart(n *chaosNode) error {
	n.srv.Args = c.args(n, "")
	return n.srv.Start()
}

func (c *chaosCluster) pause(n *chaosNode) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.srv.Signal(syscall.SIGSTOP)
	n.paused = true
}

func (c *chaosCluster) resume(n *chaosNode) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.paused {
		n.srv.Signal(syscall.SIGCONT)
		n.paused = false
	}
}

// wipe kills n, deletes its data dir, has the leader forget it (its Raft
// identity is gone with its disk: coming back under the same id could vote
// with a log it no longer has), and starts it as a new member that joins.
func (c *chaosCluster) wipe(n *chaosNode) error {
	c.kill9(n)
	old := n.id()
	if err := os.RemoveAll(n.dir); err != nil {
		return err
	}
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return err
	}
	var err error
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var l *chaosNode
		if l, err = c.leader(); err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err = l.admin.Do(ctx, "CLUSTER", "FORGET", old).Err()
		cancel()
		if err == nil || strings.Contains(err.Error(), "Unknown node") {
			err = nil
			break
		}
	}
	if err != nil {
		return fmt.Errorf("CLUSTER FORGET %s: %w", old, err)
	}
	n.gen++
	l, lerr := c.waitLeader(10 * time.Second)
	if lerr != nil {
		return lerr
	}
	n.srv.Args = c.args(n, l.Addr())
	return n.srv.Start()
}
