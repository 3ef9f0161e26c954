package integration

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayd/delayd/internal/testserver"
)

// Cluster mode, with real processes: a group of delayd nodes on free ports
// of 127.0.0.1, each in its own data dir, started as an admin would start
// them (the first with --cluster-bootstrap, the others with --cluster-join),
// and the faults a machine has: SIGKILL, SIGSTOP/SIGCONT, a restart, a
// wiped disk. Every helper here is prefixed cl (the chaos tests share the
// package).

// clElection is the Raft election timeout the tests run with, in ms.
const clElection = testserver.ElectionMs

// clOp bounds one command the cluster helpers send (a paused node would
// otherwise hold a test for the client's whole read timeout).
const clOp = 3 * time.Second

// clCluster is one test's group of nodes.
type clCluster struct {
	t     testing.TB
	nodes []*clNode
	extra []string // flags every node gets, after the defaults
	// perNode, if set, gives flags of each launch's own (a TLS port).
	perNode func() []string
	// tls, if set, makes every node TLS-only (--port 0, its port the TLS
	// port) and is how the helpers' clients reach it.
	tls *tls.Config
}

// clNode is one node of a clCluster. server is the process of its current
// run (a node restarted with other flags gets a new one).
type clNode struct {
	*server
	cc  *clCluster
	idx int
	dir string // data dir, kept across restarts unless wiped
	bus int    // port of the Raft bus

	mu     sync.Mutex
	paused bool // SIGSTOPped: never sent a command
	rw, ro *redis.Client
}

// clStart starts n nodes and waits until they form one group: one leader
// that takes writes, every other node its follower and caught up.
func clStart(t testing.TB, n int, extra ...string) *clCluster {
	t.Helper()
	cc := &clCluster{t: t, extra: extra}
	_, err := testserver.FormCluster(n, 20*time.Second, func(how ...string) (*testserver.Server, error) {
		return cc.add(t, how...).server.Server, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cc.waitFormed(t, 20*time.Second)
	return cc
}

// add starts one more node with the cluster flags plus how (bootstrap,
// join, or nothing: a node waiting for CLUSTER MEET).
func (cc *clCluster) add(t testing.TB, how ...string) *clNode {
	t.Helper()
	n := &clNode{cc: cc, idx: len(cc.nodes), dir: t.TempDir()}
	cc.nodes = append(cc.nodes, n)
	n.launch(t, how...)
	return n
}

// launch starts the node's process on free ports (new ones if another test
// took them meanwhile).
func (n *clNode) launch(t testing.TB, how ...string) {
	t.Helper()
	var bus int
	s, err := testserver.StartFresh(ports, 2, func(p []int) *server {
		bus = p[1]
		s := newServer(t, p[0], nil, n.args(p[0], bus, how...)...)
		s.TLS = n.cc.tls
		return s
	})
	if err != nil {
		t.Fatalf("node %d did not start: %v", n.idx, err)
	}
	n.setServer(t, s, bus)
}

// spawnAgain starts the node again on its ports and dir with other flags,
// without waiting for it to answer.
func (n *clNode) spawnAgain(t testing.TB, how ...string) {
	t.Helper()
	n.spawnAgainEnv(t, nil, how...)
}

// spawnAgainEnv is spawnAgain with env added to the process's environment.
func (n *clNode) spawnAgainEnv(t testing.TB, env []string, how ...string) {
	t.Helper()
	s := newServer(t, n.Port(), env, n.args(n.Port(), n.bus, how...)...)
	s.TLS = n.cc.tls
	if err := s.Spawn(); err != nil {
		t.Fatalf("node %d did not start again: %v", n.idx, err)
	}
	n.setServer(t, s, n.bus)
}

// setServer makes s the node's process. Its cleanup SIGCONTs a paused
// node: registered after the harness's, it runs before the harness's
// SIGTERM (cleanups run last first), which a stopped process would sit out.
func (n *clNode) setServer(t testing.TB, s *server, bus int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.server, n.bus, n.rw, n.ro = s, bus, nil, nil
	t.Cleanup(n.resumeIfPaused)
}

func (n *clNode) args(port, bus int, how ...string) []string {
	ports := []string{"--port", strconv.Itoa(port)}
	if n.cc.tls != nil {
		ports = []string{"--port", "0", "--tls-port", strconv.Itoa(port)}
	}
	args := []string{
		"--bind", "127.0.0.1", "--http-addr", "",
		"--dir", n.dir,
		"--log-level", "info",
		"--log-format", "json",
	}
	args = append(args, testserver.ClusterFlags(bus)...)
	args = append(args, ports...)
	args = append(args, n.cc.extra...)
	if n.cc.perNode != nil {
		args = append(args, n.cc.perNode()...)
	}
	return append(args, how...)
}

// client is a connection to the node that writes (READWRITE, the default).
func (n *clNode) client() *redis.Client {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.rw == nil {
		n.rw = n.Client(func(o *redis.Options) { o.ReadTimeout = clOp })
	}
	return n.rw
}

// roClient is a connection that sent READONLY (again after every
// reconnect), so a follower serves it reads.
func (n *clNode) roClient() *redis.Client {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ro == nil {
		n.ro = n.Client(func(o *redis.Options) {
			o.ReadTimeout = clOp
			o.OnConnect = func(ctx context.Context, c *redis.Conn) error { return c.ReadOnly(ctx).Err() }
		})
	}
	return n.ro
}

// do sends one command with the helpers' time bound.
func (n *clNode) do(c *redis.Client, args ...any) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), clOp)
	defer cancel()
	return c.Do(ctx, args...).Result()
}

func (n *clNode) String() string { return fmt.Sprintf("node %d (%s)", n.idx, n.Addr()) }

// pause stops the process with SIGSTOP: it holds its sockets and answers
// nothing, as a machine that froze. It returns once every thread of it
// has stopped (kill(2) only queues the signal).
func (n *clNode) pause(t testing.TB) {
	t.Helper()
	n.Signal(syscall.SIGSTOP)
	n.mu.Lock()
	n.paused = true
	pid := n.Pid()
	n.mu.Unlock()
	clWait(t, 5*time.Second, fmt.Sprintf("%v stopped by SIGSTOP", n), func() (bool, string) {
		return clStopped(pid)
	})
}

// clStopped reports whether every thread of pid is stopped (state T in
// /proc/pid/task/*/stat); where /proc is missing it trusts the signal.
func clStopped(pid int) (bool, string) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return true, ""
	}
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			continue // the thread exited
		}
		// pid (comm) state ...: comm may hold spaces, so after the last ')'.
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) && s[i+2] != 'T' && s[i+2] != 't' {
			return false, fmt.Sprintf("thread %s in state %c", task.Name(), s[i+2])
		}
	}
	return true, ""
}

// resume sends SIGCONT.
func (n *clNode) resume(t testing.TB) {
	t.Helper()
	n.Signal(syscall.SIGCONT)
	n.mu.Lock()
	n.paused = false
	n.mu.Unlock()
}

func (n *clNode) resumeIfPaused() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.paused && n.server != nil && n.Running() {
		_ = n.server.Server.Signal(syscall.SIGCONT)
		n.paused = false
	}
}

// live reports whether the node runs and is not paused.
func (n *clNode) live() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.server != nil && !n.paused && n.Running()
}

// infoField reads one field of INFO section ("" when it cannot).
func (n *clNode) infoField(section, field string) string {
	v, err := n.do(n.client(), "INFO", section)
	if err != nil {
		return ""
	}
	s, _ := v.(string)
	f, _ := infoValue(s, field)
	return f
}

// clusterInfo reads one field of CLUSTER INFO ("" when it cannot).
func (n *clNode) clusterInfo(field string) string {
	v, err := n.do(n.client(), "CLUSTER", "INFO")
	if err != nil {
		return ""
	}
	s, _ := v.(string)
	f, _ := infoValue(s, field)
	return f
}

// myID is CLUSTER MYID.
func (n *clNode) myID(t testing.TB) string {
	t.Helper()
	v, err := n.do(n.client(), "CLUSTER", "MYID")
	if err != nil {
		t.Fatalf("%v: CLUSTER MYID: %v", n, err)
	}
	return v.(string)
}

// clLine is one line of CLUSTER NODES.
type clLine struct {
	id, addr, bus string
	flags         map[string]bool
	master        string // "-" for a master
	epoch         string
	link          string
	slots         string
	raw           string
}

// nodesView is the node's CLUSTER NODES, parsed.
func (n *clNode) nodesView() ([]clLine, error) {
	v, err := n.do(n.client(), "CLUSTER", "NODES")
	if err != nil {
		return nil, err
	}
	text, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("CLUSTER NODES replied %T", v)
	}
	return clParseNodes(text)
}

func clParseNodes(text string) ([]clLine, error) {
	var out []clLine
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("CLUSTER NODES line %q: want at least 8 fields", line)
		}
		addr, bus, ok := strings.Cut(f[1], "@")
		if !ok {
			return nil, fmt.Errorf("CLUSTER NODES line %q: no @cport", line)
		}
		l := clLine{id: f[0], addr: addr, bus: bus, flags: map[string]bool{}, master: f[3], epoch: f[6], link: f[7], raw: line}
		for _, fl := range strings.Split(f[2], ",") {
			l.flags[fl] = true
		}
		if len(f) > 8 {
			l.slots = strings.Join(f[8:], " ")
		}
		out = append(out, l)
	}
	return out, nil
}

// role is INFO replication's role of a live node: master or slave ("" if
// it does not answer).
func (n *clNode) role() string { return n.infoField("replication", "role") }

// clWait polls cond every 20 ms until it holds or within passes, and then
// fails the test with what cond said last.
func clWait(t testing.TB, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %s", what, within, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// liveNodes are the nodes that run and are not paused.
func (cc *clCluster) liveNodes() []*clNode {
	var out []*clNode
	for _, n := range cc.nodes {
		if n.live() {
			out = append(out, n)
		}
	}
	return out
}

// leaderNow is the node every live node agrees leads (its own role
// master, every other live node its follower), if there is one now.
func (cc *clCluster) leaderNow() (*clNode, string) {
	live := cc.liveNodes()
	var leader *clNode
	var why []string
	for _, n := range live {
		switch r := n.role(); r {
		case "master":
			if leader != nil {
				return nil, fmt.Sprintf("two masters: %v and %v", leader, n)
			}
			leader = n
		default:
			why = append(why, fmt.Sprintf("%v role %q", n, r))
		}
	}
	if leader == nil {
		return nil, "no master: " + strings.Join(why, "; ")
	}
	for _, n := range live {
		if n == leader {
			continue
		}
		if p := n.infoField("replication", "master_port"); p != strconv.Itoa(leader.Port()) {
			return nil, fmt.Sprintf("%v follows port %q, not the master %v", n, p, leader)
		}
	}
	return leader, ""
}

// waitLeader waits until the live nodes agree on a leader that takes a
// write (a probe add), and returns it; want, if not nil, must be it.
func (cc *clCluster) waitLeader(t testing.TB, within time.Duration, want *clNode) *clNode {
	t.Helper()
	var leader *clNode
	clWait(t, within, "a leader that takes writes", func() (bool, string) {
		l, why := cc.leaderNow()
		if l == nil {
			return false, why
		}
		if want != nil && l != want {
			return false, fmt.Sprintf("%v leads, want %v", l, want)
		}
		if _, err := l.do(l.client(), "DELAY.ADD", "{cl}probe", 3600000, "probe"); err != nil {
			return false, fmt.Sprintf("%v: a probe write: %v", l, err)
		}
		leader = l
		return true, ""
	})
	return leader
}

// waitFormed waits until every node is in the group: the leader lists them
// all, connected, and each follower has the leader's whole log.
func (cc *clCluster) waitFormed(t testing.TB, within time.Duration) *clNode {
	t.Helper()
	leader := cc.waitLeader(t, within, nil)
	cc.waitCaughtUp(t, within, leader, cc.liveNodes()...)
	return leader
}

// waitCaughtUp waits until the leader lists every live node as connected
// and each of nodes holds the leader's log up to its last index now.
func (cc *clCluster) waitCaughtUp(t testing.TB, within time.Duration, leader *clNode, nodes ...*clNode) {
	t.Helper()
	want := len(cc.liveNodes())
	clWait(t, within, fmt.Sprintf("%d nodes in the group, connected", want), func() (bool, string) {
		lines, err := leader.nodesView()
		if err != nil {
			return false, err.Error()
		}
		connected := 0
		for _, l := range lines {
			if l.link == "connected" && !l.flags["fail?"] {
				connected++
			}
		}
		return connected == want, fmt.Sprintf("%v lists %d connected of %d: %v", leader, connected, len(lines), lines)
	})
	target, err := strconv.ParseUint(leader.infoField("replication", "master_repl_offset"), 10, 64)
	if err != nil {
		t.Fatalf("%v: INFO replication master_repl_offset: %v", leader, err)
	}
	for _, n := range nodes {
		if n == leader {
			continue
		}
		clWait(t, within, fmt.Sprintf("%v catching up to index %d", n, target), func() (bool, string) {
			got := n.infoField("replication", "slave_repl_offset")
			off, err := strconv.ParseUint(got, 10, 64)
			return err == nil && off >= target, "slave_repl_offset " + got
		})
	}
}

// followers are the live nodes other than leader.
func (cc *clCluster) followers(leader *clNode) []*clNode {
	var out []*clNode
	for _, n := range cc.liveNodes() {
		if n != leader {
			out = append(out, n)
		}
	}
	return out
}

// clGet is DELAY.GET key id as fields, nil when there is no such job.
func clGet(n *clNode, c *redis.Client, key, id string) (map[string]string, error) {
	v, err := n.do(c, "DELAY.GET", key, id)
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	a, ok := v.([]any)
	if !ok || len(a)%2 != 0 {
		return nil, fmt.Errorf("DELAY.GET %s %s: want a field/value array, got %s", key, id, showValue(v))
	}
	m := map[string]string{}
	for i := 0; i < len(a); i += 2 {
		m[fmt.Sprint(a[i])] = fmt.Sprint(a[i+1])
	}
	return m, nil
}

// clMs reads a unix-ms field of a DELAY.GET.
func clMs(t testing.TB, job map[string]string, field string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(job[field], 10, 64)
	if err != nil {
		t.Fatalf("DELAY.GET field %s = %q: %v (job %v)", field, job[field], err, job)
	}
	return v
}

// clNowMs is the machine's clock in unix ms, the one the nodes read.
func clNowMs() int64 { return time.Now().UnixMilli() }

// clErrKind is the first word of an error reply ("MOVED", "TRYAGAIN",
// ...), or the error itself when it is no reply (a timeout, a closed
// connection).
func clErrKind(err error) string {
	if err == nil {
		return ""
	}
	var re redis.Error
	if errors.As(err, &re) {
		if f := strings.Fields(err.Error()); len(f) > 0 {
			return f[0]
		}
	}
	return err.Error()
}

// clSnapshots lists the indexes of the Raft snapshots kept in a node's
// data dir, oldest first (hashicorp/raft names each dir term-index-ms).
func clSnapshots(dir string) []uint64 {
	entries, _ := os.ReadDir(filepath.Join(dir, "raft", "snapshots"))
	var out []uint64
	for _, e := range entries {
		f := strings.Split(e.Name(), "-")
		if !e.IsDir() || len(f) != 3 || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "raft", "snapshots", e.Name(), "meta.json")); err != nil {
			continue
		}
		if i, err := strconv.ParseUint(f[1], 10, 64); err == nil {
			out = append(out, i)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// clChurn adds jobs to key with single writes from 8 clients until the
// leader's log has grown by at least entries, and returns how many it added.
func clChurn(t testing.TB, leader *clNode, key string, entries uint64) int {
	t.Helper()
	return clChurnWithin(t, leader, key, entries, clOp, 60*time.Second)
}

// clChurnWithin is clChurn with each write bounded by op and the whole by
// within: a leader of millions of jobs holds writes for seconds while it
// captures a snapshot.
func clChurnWithin(t testing.TB, leader *clNode, key string, entries uint64, op, within time.Duration) int {
	t.Helper()
	index := func() uint64 {
		v, _ := strconv.ParseUint(leader.infoField("replication", "master_repl_offset"), 10, 64)
		return v
	}
	target := index() + entries
	var added atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := leader.Client(func(o *redis.Options) { o.ReadTimeout = op })
			for i := 0; !stop.Load(); i++ {
				ctx, cancel := context.WithTimeout(context.Background(), op)
				err := c.Do(ctx, "DELAY.ADD", key, 3600000, "x").Err()
				cancel()
				if err != nil {
					errs <- err
					return
				}
				added.Add(1)
			}
		}()
	}
	deadline := time.Now().Add(within)
	for index() < target && time.Now().Before(deadline) && len(errs) == 0 {
		time.Sleep(50 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("%v: a single write: %v", leader, err)
	}
	if index() < target {
		t.Fatalf("%v: the log grew to %d, not %d, in %v", leader, index(), target, within)
	}
	return int(added.Load())
}

// clLoad adds jobs j0..j(n-1), each delayed an hour, to queues {w}q0..,
// with pipelines of 1000 on the leader. A pipeline that meets a leadership
// change (a loaded machine) is sent again to the new leader: the ids make
// that safe (an add already there answers null). It returns the leader.
func clLoad(t testing.TB, cc *clCluster, leader *clNode, n, queues int) *clNode {
	t.Helper()
	const batch = 1000
	client := func(l *clNode) *redis.Client {
		return l.Client(func(o *redis.Options) { o.ReadTimeout = 60 * time.Second; o.WriteTimeout = 60 * time.Second })
	}
	c := client(leader)
	for i := 0; i < n; {
		p := c.Pipeline()
		for k := i; k < min(i+batch, n); k++ {
			p.Do(context.Background(), "DELAY.ADD", fmt.Sprintf("{w}q%d", k%queues), 3600000, fmt.Sprintf("p%d", k), "ID", fmt.Sprintf("j%d", k))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmds, err := p.Exec(ctx)
		cancel()
		if errors.Is(err, redis.Nil) {
			err = nil
		}
		for _, cmd := range cmds {
			if e := cmd.Err(); e != nil && !errors.Is(e, redis.Nil) && err == nil {
				err = e
			}
		}
		if err == nil {
			i += batch
			continue
		}
		switch clErrKind(err) {
		case "TRYAGAIN", "CLUSTERDOWN", "MOVED":
			t.Logf("loading jobs %d..: %v; again on the leader", i, err)
			leader = cc.waitLeader(t, 30*time.Second, nil)
			c = client(leader)
		default:
			t.Fatalf("loading jobs %d..: %v", i, err)
		}
	}
	return leader
}
