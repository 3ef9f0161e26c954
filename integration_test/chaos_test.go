package integration

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayd/delayd/chaos"
)

// TestChaos runs a delayd cluster through crashes, pauses and partitions
// under load and judges the whole history (see package chaos for the
// method and what each check proves).
//
// It starts DELAYD_CHAOS_NODES real delayd processes (3, or 5) in cluster
// mode with the chaos proxy between their bus addresses, runs producers,
// workers and cancellers through a go-redis ClusterClient, and injects one
// fault after another for DELAYD_CHAOS_DURATION: SIGKILL of the leader
// then restart, SIGKILL of a follower, SIGSTOP/SIGCONT of the leader, the
// leader isolated by the proxy, the leader's messages dropped one way, a
// slow network, a follower's data dir wiped (it rejoins as a new member),
// and with 5 nodes the leader and a follower killed at once. Then it heals
// everything, waits until every job is drained, and checks the history:
// chaos.Check (nothing acknowledged lost, nothing early, no job with two
// workers, nothing delivered after a cancel or an ack) and porcupine on the
// sampled FIFO queues. It reports failover times (SIGKILL of the leader to
// the first write acknowledged after it) as p50/p99.
//
// It skips under -short, and when the binary has no cluster mode.
//
//	go test -run TestChaos -v ./integration_test/     # CI: 3 nodes, 40 s, 200 adds/s
//	DELAYD_CHAOS_DURATION=5m DELAYD_CHAOS_RATE=2000 DELAYD_CHAOS_PRODUCERS=16 DELAYD_CHAOS_WORKERS=16 \
//	  DELAYD_CHAOS_NODES=5 DELAYD_CHAOS_REPORT=/tmp/chaos.txt go test -run TestChaos -v -timeout 30m ./integration_test/
//
// Environment: DELAYD_CHAOS_NODES (3), DELAYD_CHAOS_DURATION (40s),
// DELAYD_CHAOS_RATE (adds per second, 200), DELAYD_CHAOS_PRODUCERS (4),
// DELAYD_CHAOS_WORKERS (6), DELAYD_CHAOS_SAMPLED (FIFO queues, 3),
// DELAYD_CHAOS_SEED (the fault order and the workload's choices; default
// the clock, logged), DELAYD_CHAOS_REPORT (a file for the figures),
// DELAYD_CHAOS_ARGS (extra server flags), DELAYD_IT_VERBOSE=1 (server
// output and proxy events always).
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test: skipped under -short")
	}
	chaosSkipWithoutCluster(t)
	cfg := chaosConfigFromEnv(t)
	t.Logf("chaos: %d nodes, %v, %d adds/s, %d producers, %d workers, %d sampled queues, seed %d",
		cfg.nodes, cfg.duration, cfg.rate, cfg.producers, cfg.workers, cfg.sampled, cfg.seed)

	c := newChaosCluster(t, cfg.nodes)
	w := newChaosWorkload(t, cfg, newChaosClient(t, c.addrs(), 3*time.Second), newChaosClient(t, c.addrs(), 20*time.Second))
	runStart := time.Now()

	workCtx, stopWork := context.WithCancel(context.Background())
	prodCtx, stopProd := context.WithCancel(context.Background())
	defer stopWork()
	defer stopProd()
	w.startWorkers(workCtx)
	w.startProducers(prodCtx)

	n := &chaosNemesis{t: t, c: c, w: w, rng: rand.New(rand.NewSource(cfg.seed))}
	faultCtx, stopFaults := context.WithTimeout(context.Background(), cfg.duration)
	defer stopFaults()
	n.run(faultCtx)

	// Heal: every node up, resumed, connected; the cluster whole again.
	c.proxy.HealAll()
	for _, node := range c.nodes {
		c.resume(node)
		if !node.srv.Running() {
			if err := c.restart(node); err != nil {
				t.Errorf("restart %s after the faults: %v", node.name, err)
			}
		}
	}
	if err := c.waitHealthy(60*time.Second, true); err != nil {
		t.Errorf("the cluster did not recover within 60 s after the faults stopped: %v", err)
	}
	// A few quiet seconds of load on the healed cluster, then drain.
	time.Sleep(2 * time.Second)
	ops, report, lin := w.finish(stopProd, stopWork)
	t.Logf("chaos: run took %v; %d operations; faults: %s", time.Since(runStart).Round(time.Millisecond),
		len(ops), strings.Join(n.done, ", "))

	fo := n.failovers(ops)
	t.Logf("chaos: failover (SIGKILL of the leader to the first acknowledged write after it): %s", fo)
	if cfg.report != "" {
		writeChaosReport(t, cfg, report, lin, fo, n.done)
	}
}

// chaosConfig is the run's shape, from the environment.
type chaosConfig struct {
	nodes, rate, producers, workers, sampled int
	duration                                 time.Duration
	ackTimeout, maxDelay                     int64 // ms
	seed                                     int64
	report                                   string
	tags                                     []string // the queues' hash tags (default one: "chaos")
}

func chaosConfigFromEnv(t *testing.T) chaosConfig {
	t.Helper()
	cfg := chaosConfig{
		nodes: 3, rate: 200, producers: 4, workers: 6, sampled: 3,
		duration: 40 * time.Second, ackTimeout: 5000, maxDelay: 5000,
		seed: time.Now().UnixNano(), report: os.Getenv("DELAYD_CHAOS_REPORT"),
	}
	ints := map[string]*int{
		"DELAYD_CHAOS_NODES": &cfg.nodes, "DELAYD_CHAOS_RATE": &cfg.rate, "DELAYD_CHAOS_PRODUCERS": &cfg.producers,
		"DELAYD_CHAOS_WORKERS": &cfg.workers, "DELAYD_CHAOS_SAMPLED": &cfg.sampled,
	}
	for name, p := range ints {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				t.Fatalf("%s=%q: want a positive integer", name, v)
			}
			*p = n
		}
	}
	if cfg.nodes != 3 && cfg.nodes != 5 {
		t.Fatalf("DELAYD_CHAOS_NODES=%d: want 3 or 5", cfg.nodes)
	}
	if v := os.Getenv("DELAYD_CHAOS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("DELAYD_CHAOS_DURATION=%q: want a duration such as 40s or 5m", v)
		}
		cfg.duration = d
	}
	if v := os.Getenv("DELAYD_CHAOS_SEED"); v != "" {
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("DELAYD_CHAOS_SEED=%q: want an integer", v)
		}
		cfg.seed = s
	}
	return cfg
}

// chaosNemesis injects the faults, one at a time, each on a healthy
// cluster, in a seeded order.
type chaosNemesis struct {
	t   *testing.T
	c   *chaosCluster
	w   *chaosWorkload
	rng *rand.Rand

	mu    sync.Mutex
	kills []int64 // history times of each SIGKILL of the leader
	done  []string

	noWipe bool // a wipe failed: later ones would shrink the group for good
}

func (n *chaosNemesis) faults() []string {
	f := []string{"kill-leader", "kill-follower", "pause-leader", "isolate-leader", "one-way-leader",
		"slow-network", "wipe-follower", "kill-leader"}
	if len(n.c.nodes) == 5 {
		f = append(f, "kill-leader-and-follower")
	}
	return f
}

// sleep waits d, or less if ctx ends (a fault already started still heals).
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (n *chaosNemesis) run(ctx context.Context) {
	start := time.Now()
	var order []string
	for ctx.Err() == nil {
		if err := n.c.waitHealthy(45*time.Second, false); err != nil {
			n.t.Errorf("chaos: the cluster did not recover within 45 s (after %s): %v",
				strings.Join(n.done, ", "), err)
			return
		}
		sleep(ctx, time.Duration(1000+n.rng.Intn(1500))*time.Millisecond)
		if ctx.Err() != nil {
			return
		}
		if len(order) == 0 {
			order = n.faults()
			n.rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		fault := order[0]
		order = order[1:]
		if fault == "wipe-follower" && n.noWipe {
			continue
		}
		n.t.Logf("chaos: %6.1fs %s", time.Since(start).Seconds(), fault)
		if err := n.inject(ctx, fault); err != nil {
			n.t.Errorf("chaos: %s: %v", fault, err)
			return
		}
		n.mu.Lock()
		n.done = append(n.done, fault)
		n.mu.Unlock()
	}
}

func (n *chaosNemesis) follower(l *chaosNode) *chaosNode {
	var fs []*chaosNode
	for _, x := range n.c.nodes {
		if x != l {
			fs = append(fs, x)
		}
	}
	return fs[n.rng.Intn(len(fs))]
}

func (n *chaosNemesis) inject(ctx context.Context, fault string) error {
	c := n.c
	l, err := c.waitLeader(10 * time.Second)
	if err != nil {
		return err
	}
	switch fault {
	case "kill-leader", "kill-leader-and-follower":
		victims := []*chaosNode{l}
		if fault == "kill-leader-and-follower" {
			victims = append(victims, n.follower(l))
		}
		n.mu.Lock()
		n.kills = append(n.kills, n.w.h.Now())
		n.mu.Unlock()
		for _, v := range victims {
			c.kill9(v)
		}
		sleep(ctx, 3*time.Second)
		for _, v := range victims {
			if err := c.restart(v); err != nil {
				return fmt.Errorf("restart %s: %w", v.name, err)
			}
		}
	case "kill-follower":
		f := n.follower(l)
		c.kill9(f)
		sleep(ctx, 3*time.Second)
		if err := c.restart(f); err != nil {
			return fmt.Errorf("restart %s: %w", f.name, err)
		}
	case "pause-leader":
		// Shorter than the FIFO clients' read timeout (see chaos/model.go).
		c.pause(l)
		sleep(ctx, 3*time.Second)
		c.resume(l)
	case "isolate-leader":
		c.proxy.Isolate(l.name)
		sleep(ctx, 4*time.Second)
		c.proxy.HealAll()
	case "one-way-leader":
		// The leader's heartbeats are lost; the others' messages reach it.
		for _, other := range c.names(l) {
			c.proxy.OneWay(l.name, other)
		}
		sleep(ctx, 4*time.Second)
		c.proxy.HealAll()
	case "slow-network":
		for _, a := range c.names() {
			for _, b := range c.names() {
				if a != b {
					c.proxy.Delay(a, b, time.Duration(20+n.rng.Intn(60))*time.Millisecond)
				}
			}
		}
		sleep(ctx, 4*time.Second)
		c.proxy.HealAll()
	case "wipe-follower":
		f := n.follower(l)
		if err := c.wipe(f); err != nil {
			n.noWipe = true
			n.t.Logf("chaos: wipe of %s failed, no more wipes: %v", f.name, err)
			if !f.srv.Running() {
				return fmt.Errorf("wiped %s did not come back: %w", f.name, err)
			}
		}
	default:
		return fmt.Errorf("unknown fault %q", fault)
	}
	return nil
}

// failoverTimes are, for each SIGKILL of the leader, the time to the
// first add acknowledged that was sent after the kill.
type failoverTimes struct {
	times  []time.Duration
	missed int // kills after which no add was acknowledged before the run ended
}

func (f failoverTimes) quantile(q float64) time.Duration {
	if len(f.times) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), f.times...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q*float64(len(s))+0.999999) - 1 // nearest rank
	return s[max(0, min(i, len(s)-1))]
}

func (f failoverTimes) String() string {
	if len(f.times) == 0 {
		return fmt.Sprintf("no failover measured (%d kills without a write after)", f.missed)
	}
	return fmt.Sprintf("%d failovers: p50 %v, p99 %v, max %v (%d kills without a write after)",
		len(f.times), f.quantile(0.5).Round(time.Millisecond), f.quantile(0.99).Round(time.Millisecond),
		f.quantile(1).Round(time.Millisecond), f.missed)
}

func (n *chaosNemesis) failovers(ops []chaos.Op) failoverTimes {
	n.mu.Lock()
	kills := append([]int64(nil), n.kills...)
	n.mu.Unlock()
	var f failoverTimes
	for _, k := range kills {
		first := int64(-1)
		for _, op := range ops {
			if op.Kind == chaos.KindAdd && op.Outcome == chaos.OK && op.Invoke >= k && (first < 0 || op.Return < first) {
				first = op.Return
			}
		}
		if first < 0 {
			f.missed++
			continue
		}
		f.times = append(f.times, time.Duration(first-k))
	}
	return f
}

func writeChaosReport(t *testing.T, cfg chaosConfig, r chaos.Report, lin chaos.LinResult, fo failoverTimes, faults []string) {
	var b strings.Builder
	fmt.Fprintf(&b, "nodes: %d\nduration: %v\nrate: %d\nseed: %d\n", cfg.nodes, cfg.duration, cfg.rate, cfg.seed)
	fmt.Fprintf(&b, "faults: %s\n", strings.Join(faults, ","))
	fmt.Fprintf(&b, "failovers: %d\nfailovers_missed: %d\n", len(fo.times), fo.missed)
	fmt.Fprintf(&b, "failover_p50_ms: %d\nfailover_p99_ms: %d\nfailover_max_ms: %d\n",
		fo.quantile(0.5).Milliseconds(), fo.quantile(0.99).Milliseconds(), fo.quantile(1).Milliseconds())
	fmt.Fprintf(&b, "check: %s\n", r.Summary())
	fmt.Fprintf(&b, "linearizability: %s (%d ops)\n", lin.Result, lin.Ops)
	if err := os.WriteFile(cfg.report, []byte(b.String()), 0o644); err != nil {
		t.Errorf("DELAYD_CHAOS_REPORT: %v", err)
	}
}

// TestChaosSingleNode runs TestChaos's workload and judgement against one
// standalone server with appendfsync always, killed with SIGKILL once
// under load and restarted: no acknowledged add may be lost, no job handed
// out early or to two workers, and the sampled queues stay linearizable
// across the crash. It runs without cluster mode, so the workload, the
// recorder and the checkers are exercised against the real server today.
func TestChaosSingleNode(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test: skipped under -short")
	}
	s := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
	cfg := chaosConfig{rate: 100, producers: 2, workers: 3, sampled: 2, ackTimeout: 1500, maxDelay: 1500,
		seed: time.Now().UnixNano()}
	t.Logf("chaos: seed %d", cfg.seed)
	w := newChaosWorkload(t, cfg, newChaosSingleClient(t, s.Addr(), 3*time.Second),
		newChaosSingleClient(t, s.Addr(), 20*time.Second))
	workCtx, stopWork := context.WithCancel(context.Background())
	prodCtx, stopProd := context.WithCancel(context.Background())
	defer stopWork()
	defer stopProd()
	w.startWorkers(workCtx)
	w.startProducers(prodCtx)

	time.Sleep(1500 * time.Millisecond)
	s.Kill9()
	time.Sleep(200 * time.Millisecond)
	if err := s.Start(); err != nil {
		t.Fatalf("restart after kill -9: %v", err)
	}
	time.Sleep(1500 * time.Millisecond)
	_, report, lin := w.finish(stopProd, stopWork)
	if report.Required == 0 || report.Deliveries == 0 || lin.Ops == 0 {
		t.Errorf("the workload did nothing: %s; %d FIFO ops", report.Summary(), lin.Ops)
	}
	seen := 0
	for _, byOutcome := range report.Outcomes {
		seen += byOutcome[chaos.Fail] + byOutcome[chaos.Unknown]
	}
	if seen == 0 {
		t.Errorf("no operation failed or went unanswered across the kill: was it killed? %s", report.Summary())
	}
}
