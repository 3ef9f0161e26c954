package integration

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/delayd/delayd/chaos"
)

// TestChaosClusterKillAll runs TestChaos's workload on 3 nodes with
// appendfsync always and kills every node with SIGKILL at once under load,
// then restarts them: what comes back is only what each node's Raft log
// and snapshots hold (no member keeps the group's state in memory across
// it), and no acknowledged add may be missing, nothing early or doubled,
// the sampled queues linearizable across the crash.
func TestChaosClusterKillAll(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test: skipped under -short")
	}
	chaosSkipWithoutCluster(t)
	t.Setenv("DELAYD_CHAOS_ARGS", os.Getenv("DELAYD_CHAOS_ARGS")+" --appendfsync always")
	cfg := chaosConfig{nodes: 3, rate: 200, producers: 2, workers: 3, sampled: 2, ackTimeout: 1500, maxDelay: 1500,
		seed: time.Now().UnixNano()}
	t.Logf("chaos: seed %d", cfg.seed)
	c := newChaosCluster(t, cfg.nodes)
	w := newChaosWorkload(t, cfg, newChaosClient(t, c.addrs(), 3*time.Second), newChaosClient(t, c.addrs(), 20*time.Second))
	workCtx, stopWork := context.WithCancel(context.Background())
	prodCtx, stopProd := context.WithCancel(context.Background())
	defer stopWork()
	defer stopProd()
	w.startWorkers(workCtx)
	w.startProducers(prodCtx)

	time.Sleep(2 * time.Second)
	for _, n := range c.nodes {
		c.kill9(n)
	}
	time.Sleep(200 * time.Millisecond)
	for _, n := range c.nodes {
		if err := c.restart(n); err != nil {
			t.Fatalf("restart %s after kill -9: %v", n.name, err)
		}
	}
	if err := c.waitHealthy(60*time.Second, true); err != nil {
		t.Fatalf("the cluster did not come back within 60 s: %v", err)
	}
	time.Sleep(2 * time.Second)
	_, report, lin := w.finish(stopProd, stopWork)
	if report.Required == 0 || report.Deliveries == 0 || lin.Ops == 0 {
		t.Errorf("the workload did nothing: %s; %d FIFO ops", report.Summary(), lin.Ops)
	}
	seen := 0
	for _, byOutcome := range report.Outcomes {
		seen += byOutcome[chaos.Fail] + byOutcome[chaos.Unknown]
	}
	if seen == 0 {
		t.Errorf("no operation failed or went unanswered across the kill: were the nodes killed? %s", report.Summary())
	}
}
