package compat

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayd/delayd/internal/testserver"
)

// The cluster checks run against a delayd cluster of their own: three nodes
// of the real binary (a Raft group behind the Redis Cluster protocol, see
// SPEC.md "Cluster and replication"), on free ports, each with its own data
// dir. The cluster client of each library is given every node's address, as
// its users configure it, and must find the leader (the one master) and
// follow a failover on its own.

// clusterSize is the number of nodes of a check's cluster: the smallest
// group that survives the loss of its leader.
const clusterSize = 3

// clusterGroups is how many Raft groups a check's cluster splits the slots
// over (docs/decisions/raft-groups.md): DELAYD_COMPAT_GROUPS, default 1.
// With several, node i serves group g at its port + g, group g is led by
// node g (CLUSTER FAILOVER), and "the leader" is group 0's, on node 0.
var clusterGroups = func() int {
	n, err := strconv.Atoi(os.Getenv("DELAYD_COMPAT_GROUPS"))
	if err != nil || n < 1 {
		return 1
	}
	return n
}()

// testCluster is a delayd cluster owned by one check.
type testCluster struct {
	nodes []*server

	mu     sync.Mutex
	killed *server // the node killLeader ended, until restartKilled

	// slot, with several groups, picks the group whose leader the
	// failover checks kill (group); 0: the checks' usual queues'.
	slot int
}

// startCluster starts n nodes in dir: the first bootstraps the group and
// is waited for as its leader, the others join through it. It returns once
// every node lists all n and agrees on one master.
func startCluster(dir string, n int) (*testCluster, error) {
	tc := &testCluster{}
	_, err := testserver.FormCluster(n, 15*time.Second, func(how ...string) (*testserver.Server, error) {
		s, err := startNode(filepath.Join(dir, "node"+strconv.Itoa(len(tc.nodes))), how...)
		if s == nil {
			return nil, err
		}
		tc.nodes = append(tc.nodes, s)
		return s.Server, err
	})
	if err != nil {
		return tc, err
	}
	if err := tc.spread(); err != nil {
		return tc, err
	}
	return tc, tc.waitReady(15 * time.Second)
}

// spread moves group g's leadership to node g (node 0 bootstrapped them
// all), once every group has all its members.
func (tc *testCluster) spread() error {
	for g := 1; g < clusterGroups && g < len(tc.nodes); g++ {
		addr := groupAddr(tc.nodes[g].addr(), g)
		err := waitFor(15*time.Second, func() error {
			reply, err := ask(addr, "INFO", "replication")
			if text, _ := reply.(string); err == nil && strings.Contains(text, "role:master\r\n") {
				return nil
			}
			if _, err := ask(addr, "CLUSTER", "FAILOVER"); err != nil {
				return fmt.Errorf("CLUSTER FAILOVER at %s: %w", addr, err)
			}
			return errors.New("not master yet")
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// groupAddr is where the node whose group 0 is at addr serves group g.
func groupAddr(addr string, g int) string {
	host, p, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(p)
	return net.JoinHostPort(host, strconv.Itoa(port+g))
}

// startNode starts one cluster node with its own client and bus ports
// (both free) and the tests' election timeout (1 s), retrying with new
// ports when another process took one meanwhile.
func startNode(dir string, flags ...string) (*server, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if clusterGroups == 1 {
		return testserver.StartFresh(ports, 2, func(p []int) *server {
			return newServer(p[0], dir, "", append(testserver.ClusterFlags(p[1]), flags...)...)
		})
	}
	for _, f := range flags {
		if f == "--cluster-bootstrap" {
			flags = append(flags, "--cluster-groups", strconv.Itoa(clusterGroups))
			break
		}
	}
	for try := 0; ; try++ {
		port, err := ports.TakeRun("127.0.0.1", clusterGroups, 1)
		if err != nil {
			return nil, err
		}
		bus, err := ports.TakeRun("127.0.0.1", clusterGroups, 1)
		if err != nil {
			return nil, err
		}
		args := append(testserver.ClusterFlags(bus), "--cluster-group-port-step", "1")
		s := newServer(port, dir, "", append(args, flags...)...)
		if err = s.Start(); err == nil || !errors.Is(err, testserver.ErrPortTaken) || try == 5 {
			return s, err
		}
	}
}

// waitFor polls f every 50 ms until it returns nil, or returns its last
// error after timeout.
func waitFor(timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v: %w", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ask sends one command to one node, without a client's retries.
func ask(addr string, args ...any) (any, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, Protocol: 2,
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: time.Second})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return c.Do(ctx, args...).Result()
}

// live is every node that runs now.
func (tc *testCluster) live() []*server {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	var l []*server
	for _, s := range tc.nodes {
		if s != tc.killed {
			l = append(l, s)
		}
	}
	return l
}

// addrs is every node's client address, the seeds a cluster client gets.
func (tc *testCluster) addrs() []string {
	var a []string
	for _, s := range tc.nodes {
		a = append(a, s.addr())
	}
	return a
}

// waitReady waits until every live node lists all the cluster's nodes, none
// of them failing, all name the same master, and that master says it leads
// (INFO replication role:master).
func (tc *testCluster) waitReady(timeout time.Duration) error {
	return waitFor(timeout, func() error {
		masters := map[string]bool{}
		for _, s := range tc.live() {
			reply, err := ask(s.addr(), "CLUSTER", "NODES")
			if err != nil {
				return fmt.Errorf("CLUSTER NODES on %s: %w", s.addr(), err)
			}
			text, _ := reply.(string)
			lines := strings.Split(strings.TrimSpace(text), "\n")
			if len(lines) != len(tc.nodes)*clusterGroups {
				return fmt.Errorf("CLUSTER NODES on %s lists %d nodes, want %d:\n%s", s.addr(), len(lines), len(tc.nodes)*clusterGroups, text)
			}
			for _, l := range lines {
				f := strings.Fields(l)
				if len(f) < 8 {
					return fmt.Errorf("CLUSTER NODES on %s: a short line %q", s.addr(), l)
				}
				if strings.Contains(f[2], "fail") {
					return fmt.Errorf("CLUSTER NODES on %s: %s is failing", s.addr(), f[1])
				}
				if strings.Contains(f[2], "master") {
					masters[strings.SplitN(f[1], "@", 2)[0]] = true
				}
			}
		}
		if len(masters) != clusterGroups {
			return fmt.Errorf("the nodes name %d masters, want %d: %v", len(masters), clusterGroups, masters)
		}
		leader, err := tc.leader()
		if err != nil {
			return err
		}
		if a := groupAddr(leader.addr(), tc.group()); !masters[a] {
			return fmt.Errorf("the nodes name %v master, but %s leads", masters, a)
		}
		return nil
	})
}

// group is, with several groups, the group whose leader is "the leader"
// the failover checks kill: the one owning tc.slot, by default that of the
// checks' queues jobs (slot 9631) and idle (8010); 0 with one group.
func (tc *testCluster) group() int {
	slot := tc.slot
	if slot == 0 {
		slot = 9631
	}
	return slot * clusterGroups / 16384
}

// leader is the live node whose INFO replication says role:master (with
// several groups, at its address for tc.group()).
func (tc *testCluster) leader() (*server, error) {
	for _, s := range tc.live() {
		reply, err := ask(groupAddr(s.addr(), tc.group()), "INFO", "replication")
		if err != nil {
			continue
		}
		if text, _ := reply.(string); strings.Contains(text, "role:master\r\n") {
			return s, nil
		}
	}
	return nil, errors.New("no node says role:master")
}

// killLeader ends the leader with SIGKILL and returns its address.
func (tc *testCluster) killLeader() (string, error) {
	l, err := tc.leader()
	if err != nil {
		return "", err
	}
	tc.mu.Lock()
	tc.killed = l
	tc.mu.Unlock()
	l.Kill()
	return l.addr(), nil
}

// restartKilled starts the killed node again on its port with its data dir
// and flags (it rejoins the group from its own log) and waits until the
// whole cluster is ready again.
func (tc *testCluster) restartKilled() error {
	tc.mu.Lock()
	k := tc.killed
	tc.mu.Unlock()
	if k == nil {
		return errors.New("no node was killed")
	}
	// The harness's restart tries again while another process's outgoing
	// connection holds the node's bus port (the node is known by it).
	if _, err := k.Restart(); err != nil {
		return fmt.Errorf("restart %s: %w", k.addr(), err)
	}
	tc.mu.Lock()
	tc.killed = nil
	tc.mu.Unlock()
	return tc.waitReady(15 * time.Second)
}

// pauseFor is how long pauseLeader freezes the leader: well past the
// election timeout (1 s), so the others elect a new leader meanwhile.
const pauseFor = 3 * time.Second

// pauseLeader freezes the leader for pauseFor (SIGSTOP, then SIGCONT) and
// waits until the cluster agrees on one leader again. The old leader comes
// back believing it leads: until it hears of the new term it must neither
// take a write nor hand out a job on its own, and once it steps down its
// blocked clients get UNBLOCKED.
func (tc *testCluster) pauseLeader() (string, error) {
	l, err := tc.leader()
	if err != nil {
		return "", err
	}
	return l.addr(), tc.pauseNode(l)
}

// pauseNode freezes s for pauseFor, as pauseLeader freezes the leader.
func (tc *testCluster) pauseNode(s *server) error {
	s.pause(pauseFor)
	return tc.waitReady(15 * time.Second)
}

// stop stops every node (SIGTERM) and reports whether each exited within
// 5 s.
func (tc *testCluster) stop() bool {
	var wg sync.WaitGroup
	var mu sync.Mutex
	clean := true
	for _, s := range tc.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok := s.stop()
			mu.Lock()
			clean = clean && ok
			mu.Unlock()
		}()
	}
	wg.Wait()
	return clean
}

// output is every node's output, for a failed check.
func (tc *testCluster) output() string {
	var b strings.Builder
	for i, s := range tc.nodes {
		fmt.Fprintf(&b, "--- node %d (%s):\n%s", i, s.addr(), s.Output())
	}
	return b.String()
}

// jobClient is what the failover workload needs of a library, each call
// made through its cluster client.
type jobClient interface {
	// add is DELAY.ADD queue delay id ID id ACKTIMEOUT 5000; nil when the
	// server acknowledged it: the id, or nil (a job with that ID is
	// already there: an earlier try of this add went through).
	add(ctx context.Context, queue, id string, delayMs int) error
	// pop is DELAY.POP queue 1: the job's id, or "" when none came.
	pop(ctx context.Context, queue string) (string, error)
	// ack is DELAY.ACK queue id.
	ack(ctx context.Context, queue, id string) error
}

// The failover workload, the same in every client's check (the Python and
// Node scripts follow it step by step):
//
//   - a producer adds jobs job-0, job-1, ... to the queue "jobs" with
//     DELAY.ADD jobs <delay> <id> ID <id> ACKTIMEOUT 5000, the delay
//     spread over 0..2000 ms; an add that fails is retried with the same ID
//     (what the ID option is for) until the server acknowledges it;
//   - a consumer loops DELAY.POP jobs 1, then DELAY.ACK of each job;
//   - once 25 adds were acknowledged and 5 jobs delivered, the leader is
//     killed (SIGKILL); both must go on through the failover with the
//     library's own redirect and retry handling, an add acknowledged and a
//     job delivered within resumeBound of the kill;
//   - the killed node is restarted and rejoins; 10 more adds must succeed;
//   - the leader is frozen for pauseFor (SIGSTOP) while the others elect a
//     new one, then goes on (SIGCONT) as a stale leader that must step down
//     (its blocked pops get UNBLOCKED, its uncommitted writes TRYAGAIN or a
//     broken connection); an add acknowledged and a job delivered within
//     resumeBound of SIGCONT, and 10 more adds;
//   - the producer stops, and every add the client saw acknowledged must be
//     delivered at least once (a job popped from the old leader whose ACK
//     was lost comes again after its ack timeout), and none before its
//     delay.
const (
	resumeBound = 15 * time.Second
	drainBound  = 9 * time.Second // the longest delay, the ack timeout, and slack
)

func jobDelay(i int) int { return i * 137 % 2001 }

// workload is the failover workload's record, shared by its goroutines.
type workload struct {
	mu        sync.Mutex
	sent      map[string]time.Time // first try of each add
	delay     map[string]int
	acked     map[string]time.Time // when the add was acknowledged
	delivered map[string]time.Time // first delivery
	errs      map[string]int       // errors the client let through, by kind
	firstErrs []string
	early     []string
}

func (w *workload) errored(op string, err error) {
	kind := op + " " + strings.Fields(err.Error() + " x")[0]
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errs[kind]++
	if len(w.firstErrs) < 20 {
		w.firstErrs = append(w.firstErrs, fmt.Sprintf("%s %s: %v", time.Now().Format("15:04:05.000"), op, err))
	}
}

// count reports how many adds were acknowledged and jobs delivered since t.
func (w *workload) count(since time.Time) (acked, delivered int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, at := range w.acked {
		if !at.Before(since) {
			acked++
		}
	}
	for _, at := range w.delivered {
		if !at.Before(since) {
			delivered++
		}
	}
	return acked, delivered
}

func (w *workload) missing() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var m []string
	for id := range w.acked {
		if _, ok := w.delivered[id]; !ok {
			m = append(m, id)
		}
	}
	sort.Strings(m)
	return m
}

// runFailover runs the failover workload with c against e's cluster.
func runFailover(e *env, c jobClient) error {
	w := &workload{sent: map[string]time.Time{}, delay: map[string]int{}, acked: map[string]time.Time{},
		delivered: map[string]time.Time{}, errs: map[string]int{}}
	stopProducer, stopConsumer := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	call := func(f func(ctx context.Context) error) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return f(ctx)
	}
	stopped := func(ch chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	go func() { // the producer
		defer wg.Done()
		for i := 0; !stopped(stopProducer); i++ {
			id, d := "job-"+strconv.Itoa(i), jobDelay(i)
			w.mu.Lock()
			w.sent[id], w.delay[id] = time.Now(), d
			w.mu.Unlock()
			for !stopped(stopProducer) {
				err := call(func(ctx context.Context) error { return c.add(ctx, "jobs", id, d) })
				if err == nil {
					w.mu.Lock()
					w.acked[id] = time.Now()
					w.mu.Unlock()
					break
				}
				w.errored("DELAY.ADD", err)
				time.Sleep(100 * time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	go func() { // the consumer
		defer wg.Done()
		for !stopped(stopConsumer) {
			var id string
			err := call(func(ctx context.Context) (err error) { id, err = c.pop(ctx, "jobs"); return err })
			if err != nil {
				w.errored("DELAY.POP", err)
				time.Sleep(100 * time.Millisecond)
				continue
			}
			if id == "" {
				continue
			}
			now := time.Now()
			w.mu.Lock()
			if _, seen := w.delivered[id]; !seen {
				w.delivered[id] = now
				if sent, ok := w.sent[id]; ok && now.Before(sent.Add(time.Duration(w.delay[id])*time.Millisecond)) {
					w.early = append(w.early, fmt.Sprintf("%s (delay %d ms) after %v", id, w.delay[id], now.Sub(sent)))
				}
			}
			w.mu.Unlock()
			if err := call(func(ctx context.Context) error { return c.ack(ctx, "jobs", id) }); err != nil {
				w.errored("DELAY.ACK", err) // the job comes again after its ack timeout
			}
		}
	}()
	err := failoverSteps(e, w)
	close(stopProducer)
	if err == nil {
		err = waitFor(drainBound, func() error {
			if m := w.missing(); len(m) > 0 {
				return fmt.Errorf("%d acknowledged adds not delivered: %v", len(m), m)
			}
			return nil
		})
	}
	close(stopConsumer)
	wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	e.logf("adds acknowledged: %d, jobs delivered: %d, errors the client let through: %v", len(w.acked), len(w.delivered), w.errs)
	for _, l := range w.firstErrs {
		e.logf("  %s", l)
	}
	if err == nil && len(w.early) > 0 {
		err = fmt.Errorf("jobs delivered before their delay: %v", w.early)
	}
	return err
}

// failoverSteps drives the cluster while the producer and consumer run.
func failoverSteps(e *env, w *workload) error {
	start := time.Now()
	if err := waitFor(10*time.Second, func() error {
		if a, d := w.count(start); a < 25 || d < 5 {
			return fmt.Errorf("%d adds acknowledged, %d jobs delivered, want 25 and 5 before the kill", a, d)
		}
		return nil
	}); err != nil {
		return err
	}
	killed, err := e.cluster.killLeader()
	if err != nil {
		return err
	}
	kill := time.Now()
	e.logf("killed the leader %s (SIGKILL)", killed)
	// A reply the old leader sent just before it died may still be read
	// after the kill; no new leader is elected within 200 ms (the election
	// timeout is 1 s), so what comes after that came through the failover.
	if err := waitFor(resumeBound, func() error {
		if a, d := w.count(kill.Add(200 * time.Millisecond)); a < 1 || d < 1 {
			return fmt.Errorf("since the leader was killed %d adds were acknowledged and %d jobs delivered, want both > 0", a, d)
		}
		return nil
	}); err != nil {
		return err
	}
	e.logf("resumed %v after the kill", time.Since(kill).Round(time.Millisecond))
	if err := e.cluster.restartKilled(); err != nil {
		return err
	}
	back := time.Now()
	e.logf("restarted %s; the cluster is whole again", killed)
	if err := waitFor(10*time.Second, func() error {
		if a, _ := w.count(back); a < 10 {
			return fmt.Errorf("%d adds acknowledged since the restart, want 10", a)
		}
		return nil
	}); err != nil {
		return err
	}
	paused, err := e.cluster.pauseLeader()
	if err != nil {
		return err
	}
	cont := time.Now()
	e.logf("paused the leader %s for %v (SIGSTOP, SIGCONT); the cluster agrees on a leader again", paused, pauseFor)
	if err := waitFor(resumeBound, func() error {
		if a, d := w.count(cont); a < 10 || d < 1 {
			return fmt.Errorf("since the paused leader went on %d adds were acknowledged and %d jobs delivered, want 10 and 1", a, d)
		}
		return nil
	}); err != nil {
		return err
	}
	e.logf("resumed %v after the pause", time.Since(cont).Round(time.Millisecond))
	return nil
}
