package integration

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delayd/delayd/chaos"
	"github.com/redis/go-redis/v9"
)

// TestChaosSlotMoves runs TestChaos's workload over several Raft groups
// while slots move between them (docs/decisions/slot-moves.md), and
// judges the whole history the same way: chaos.Check and porcupine.
//
// Three nodes, three groups, each group's leader on its own node
// (grCluster). The producers, workers and cancellers go through a
// go-redis ClusterClient to queues under two hash tags per group: one in
// the group's lowest slots, which `redis-cli --cluster reshard` moves
// first, and one in the middle of its range, which stays; the sampled
// FIFO queues are spread over the same tags. The fault loop moves the
// lowest DELAYD_CHAOS_MOVE_SLOTS slots of one group to another, group
// pairs in a seeded order, and every other move SIGKILLs the leader of
// the source or the target group in the middle of it, restarts it,
// closes the slots it left open with `redis-cli --cluster fix` until
// `--cluster check` is clean, and runs the reshard again for the slots
// still at the source, as an operator would. Then it drains and checks:
// nothing acknowledged lost, nothing early, no job with two workers
// within a live reservation, nothing after a cancel or an ack, and the
// sampled queues linearizable. The one excuse is explicit: on the queues
// of slots a kill left open, a job that the group losing the queue
// changed between the move's start and the fix's end may come back once
// (chaos.CheckOptions.StoppedMoves); those sampled queues are left out of
// porcupine, and the run logs how many jobs came back.
//
// It skips under -short and without redis-cli.
//
//	go test -run TestChaosSlotMoves -v ./integration_test/     # CI: 40 s, 200 adds/s, 32 slots a move, a kill every other move
//	DELAYD_CHAOS_KILL_EVERY=1 go test -run 'TestChaosSlotMoves$' -v ./integration_test/   # a leader killed in every move
//	DELAYD_CHAOS_KILL_EVERY=2 DELAYD_CHAOS_DURATION=10m DELAYD_CHAOS_RATE=1000 DELAYD_CHAOS_PRODUCERS=8 DELAYD_CHAOS_WORKERS=12 \
//	  DELAYD_CHAOS_MOVE_SLOTS=512 DELAYD_CHAOS_REPORT=/tmp/chaos-slots.txt \
//	  go test -run TestChaosSlotMoves -v -timeout 40m ./integration_test/
//	DELAYD_CHAOS_PRELOAD=1000000 DELAYD_CHAOS_MOVE_SLOTS=4096 DELAYD_CHAOS_DURATION=5m \
//	  go test -run 'TestChaosSlotMoves$' -v -timeout 60m ./integration_test/   # a million jobs a move
//
// Environment: TestChaos's (DELAYD_CHAOS_NODES aside: always 3), and
// DELAYD_CHAOS_MOVE_SLOTS (slots a move, 32), DELAYD_CHAOS_KILL_EVERY
// (a kill every n-th move; 2, the default; 0: never), DELAYD_CHAOS_PRELOAD
// (jobs added to each group's moved slots before the moves and checked
// whole after them, slotPreload; 3000), DELAYD_CHAOS_KILL_AT (when in a
// move a kill comes: random, migrate or late; each in turn by default).
// Four causes of loss or doubles
// it found are fixed: TestSlotMoveStoppedServesTwice, Config.MapFresh,
// TestSlotFixStoppedAfterAddSlots and TestFailedHandOverLeadsAgain (seed
// 1795955761102730944: a leader stuck refusing writes after a hand-over
// to a node just killed; its queues' jobs were never served again).
func TestChaosSlotMoves(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test: skipped under -short")
	}
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("no redis-cli")
	}
	cfg := chaosConfigFromEnv(t)
	moveSlots, killEvery := chaosEnvInt(t, "DELAYD_CHAOS_MOVE_SLOTS", 32, 1), chaosEnvInt(t, "DELAYD_CHAOS_KILL_EVERY", 2, 0)
	preloadJobs := chaosEnvInt(t, "DELAYD_CHAOS_PRELOAD", 3000, 0)

	nodes := grCluster(t)
	// Each group's tags: two keys in the slots a reshard takes first (its
	// lowest), one in the middle of its range. slotOf is every tag's slot.
	slotOf := map[string]int{}
	for g, r := range grRanges {
		lo, _ := strconv.Atoi(strings.Split(r, "-")[0])
		hi, _ := strconv.Atoi(strings.Split(r, "-")[1])
		for i, span := range [][2]int{{lo, lo + moveSlots/2}, {lo + moveSlots/2, lo + moveSlots - 1}, {(lo + hi) / 2, hi}} {
			k, s := grKeyIn(t, nodes[0].addr(0), span[0], span[1], fmt.Sprintf("g%dt%d-", g, i))
			cfg.tags = append(cfg.tags, k)
			slotOf[k] = s
		}
	}
	cfg.sampled = max(cfg.sampled, 6)
	t.Logf("chaos: 3 nodes, 3 groups, %v, %d adds/s, %d producers, %d workers, %d sampled queues, %d slots a move, a kill every %d moves, seed %d; tags %v",
		cfg.duration, cfg.rate, cfg.producers, cfg.workers, cfg.sampled, moveSlots, killEvery, cfg.seed, slotOf)

	var addrs []string
	for _, n := range nodes {
		for g := 0; g < grCount; g++ {
			addrs = append(addrs, n.addr(g))
		}
	}
	w := newChaosWorkload(t, cfg, newChaosClient(t, addrs, 3*time.Second), newChaosClient(t, addrs, 20*time.Second))
	var pre *slotPreload
	if preloadJobs > 0 {
		pre = newSlotPreload(t, newChaosClient(t, addrs, 20*time.Second), preloadJobs, moveSlots, rand.New(rand.NewSource(cfg.seed)))
	}
	runStart := time.Now()
	workCtx, stopWork := context.WithCancel(context.Background())
	prodCtx, stopProd := context.WithCancel(context.Background())
	defer stopWork()
	defer stopProd()
	w.startWorkers(workCtx)
	w.startProducers(prodCtx)

	// A node restarted on a million preloaded jobs a group replays them
	// before it answers PING (about 20 µs a job here, three groups a node).
	ready := 10*time.Second + time.Duration(preloadJobs)*3*20*time.Microsecond
	m := &slotMover{t: t, nodes: nodes, w: w, rng: rand.New(rand.NewSource(cfg.seed)), slots: moveSlots, killEvery: killEvery, ready: ready,
		killAt: os.Getenv("DELAYD_CHAOS_KILL_AT")}
	faultCtx, stopFaults := context.WithTimeout(context.Background(), cfg.duration)
	defer stopFaults()
	m.run(faultCtx)

	// Stopped moves: the queues of the slots each kill left open.
	for _, s := range m.stopped {
		var qs []string
		for _, q := range w.allQueues() {
			tag := q[1:strings.Index(q, "}")]
			if s.slots[slotOf[tag]] {
				qs = append(qs, q)
				if w.sampled(q) {
					if w.unsampled == nil {
						w.unsampled = map[string]bool{}
					}
					w.unsampled[q] = true
				}
			}
		}
		w.checkOpts.StoppedMoves = append(w.checkOpts.StoppedMoves, chaos.StoppedMove{Queues: qs, From: s.from, To: s.to})
	}
	time.Sleep(2 * time.Second)
	ops, report, lin := w.finish(stopProd, stopWork)
	m.orphans(slotOf)
	if pre != nil {
		pre.verify(t, newChaosClient(t, addrs, 20*time.Second), m)
	}
	if report.Required == 0 || report.Deliveries == 0 || lin.Ops == 0 {
		t.Errorf("the workload did nothing: %s; %d FIFO ops", report.Summary(), lin.Ops)
	}
	if m.moves+len(m.stopped) == 0 {
		t.Error("no move finished, by reshard or by fix")
	}
	t.Logf("chaos: run took %v; %d operations; %d moves (%d slots each), %d kills mid-move, %d stopped moves (%d slots left open in all) finished by --cluster fix, %d comebacks; sampled queues left out of porcupine: %d",
		time.Since(runStart).Round(time.Millisecond), len(ops), m.moves, moveSlots, m.kills, len(m.stopped), m.openSlots(), report.Comebacks, len(w.unsampled))
	if cfg.report != "" {
		var b strings.Builder
		fmt.Fprintf(&b, "groups: 3\nduration: %v\nrate: %d\nseed: %d\nmove_slots: %d\n", cfg.duration, cfg.rate, cfg.seed, moveSlots)
		fmt.Fprintf(&b, "moves: %d\nkills: %d\nstopped_moves: %d\nfaults: %s\n", m.moves, m.kills, len(m.stopped), strings.Join(m.done, ","))
		fmt.Fprintf(&b, "check: %s\nlinearizability: %s (%d ops)\n", report.Summary(), lin.Result, lin.Ops)
		if err := os.WriteFile(cfg.report, []byte(b.String()), 0o644); err != nil {
			t.Errorf("DELAYD_CHAOS_REPORT: %v", err)
		}
	}
}

func chaosEnvInt(t *testing.T, name string, def, min int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min {
		t.Fatalf("%s=%q: want an integer >= %d", name, v, min)
	}
	return n
}

// slotMover is the fault loop of TestChaosSlotMoves.
type slotMover struct {
	t         *testing.T
	nodes     []*grNode
	w         *chaosWorkload
	rng       *rand.Rand
	slots     int
	killEvery int
	killAt    string        // DELAYD_CHAOS_KILL_AT: random, migrate or late; empty: each in turn at random
	ready     time.Duration // how long a restarted node may take to answer PING

	moves, kills int
	stopped      []stoppedMove
	done         []string
}

// stoppedMove is a move a kill left open: its slots open after the
// restart, and the history times from the move's start to the fix's end.
type stoppedMove struct {
	slots    map[int]bool
	from, to int64
}

func (m *slotMover) openSlots() int {
	n := 0
	for _, s := range m.stopped {
		n += len(s.slots)
	}
	return n
}

// leader is group g's leader: the address that says role:master.
func (m *slotMover) leader(g int) (*grNode, error) {
	var last error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		for _, n := range m.nodes {
			if !n.Running() {
				continue
			}
			v, err := grAsk(n.addr(g), "INFO", "replication")
			if err == nil && strings.Contains(fmt.Sprint(v), "role:master") {
				return n, nil
			}
			last = err
		}
	}
	return nil, fmt.Errorf("group %d has no leader: %v", g, last)
}

// orphans fails the test for a queue left in a group that does not own
// its slot (a move or a fix that copied it and did not drop it, or wrote
// to the wrong group): its jobs are out of every client's reach, which the
// drain cannot see, since DELAY.STATS goes to the owner.
func (m *slotMover) orphans(slotOf map[string]int) {
	for g := 0; g < grCount; g++ {
		l, err := m.leader(g)
		if err != nil {
			m.t.Error(err)
			continue
		}
		for tag, slot := range slotOf {
			v, err := grAsk(l.addr(g), "CLUSTER", "COUNTKEYSINSLOT", slot)
			if err != nil || v.(int64) == 0 {
				continue
			}
			_, err = grAsk(l.addr(g), "DELAY.STATS", "{"+tag+"}q0")
			if err != nil && strings.HasPrefix(err.Error(), "MOVED") {
				keys, _ := grAsk(l.addr(g), "CLUSTER", "GETKEYSINSLOT", slot, 100)
				m.t.Errorf("chaos: group %d (leader %s) holds %v queues of slot %d, which it does not own (%v): %v",
					g, l.addr(g), v, slot, err, keys)
			}
		}
	}
}

// migrating is closed once a client of addr runs MIGRATE (CLIENT LIST
// names the command a client runs, or ran last: redis-cli's next one for
// that slot is SETSLOT NODE), or after d.
func (m *slotMover) migrating(addr string, d time.Duration) <-chan time.Time {
	c := make(chan time.Time, 1)
	go func() {
		rc := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, MaxRetries: -1, PoolSize: 1, ReadTimeout: time.Second})
		defer rc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		for ctx.Err() == nil {
			if v, err := rc.Do(ctx, "CLIENT", "LIST").Text(); err == nil && strings.Contains(v, "cmd=migrate") {
				break
			}
			time.Sleep(time.Millisecond)
		}
		c <- time.Now()
	}()
	return c
}

// late fires once group g holds n of its before slots fewer (most of a
// move's slots crossed), or after d.
func (m *slotMover) late(g, before, n int, d time.Duration) <-chan time.Time {
	var addrs []string // read here: the goroutine may outlive the move, and a restart changes m.nodes
	for _, nd := range m.nodes {
		addrs = append(addrs, nd.addr(0))
	}
	c := make(chan time.Time, 1)
	go func() {
		for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if k, err := groupSlots(addrs, g); err == nil && before-k >= n {
				break
			}
		}
		c <- time.Now()
	}()
	return c
}

// check runs redis-cli --cluster check until it is clean, up to d.
func (m *slotMover) check(d time.Duration) (string, bool) {
	var s string
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		out, err := exec.Command("redis-cli", "--cluster", "check", m.nodes[m.rng.Intn(3)].addr(0)).CombinedOutput()
		s = string(out)
		if err == nil && strings.Contains(s, "[OK] All 16384 slots covered.") && !strings.Contains(s, "[ERR]") && !strings.Contains(s, "[WARNING]") {
			return s, true
		}
	}
	return s, false
}

func (m *slotMover) run(ctx context.Context) {
	start := time.Now()
	for i := 1; ctx.Err() == nil; i++ {
		sleep(ctx, time.Duration(500+m.rng.Intn(1000))*time.Millisecond)
		if ctx.Err() != nil {
			return
		}
		from := m.rng.Intn(grCount)
		to := (from + 1 + m.rng.Intn(grCount-1)) % grCount
		kill := m.killEvery > 0 && i%m.killEvery == 0
		if err := m.move(start, from, to, kill); err != nil {
			m.t.Errorf("chaos: move %d (group %d to %d, kill %v): %v", i, from, to, kill, err)
			return
		}
	}
}

// move reshards m.slots slots from group from to group to; with kill, it
// SIGKILLs the leader of one of them in the middle, restarts it, and
// finishes the move with --cluster fix.
func (m *slotMover) move(start time.Time, from, to int, kill bool) error {
	name := fmt.Sprintf("move %d->%d", from, to)
	if !kill {
		m.t.Logf("chaos: %6.1fs %s", time.Since(start).Seconds(), name)
		if err := m.reshard(start, from, to, m.slots); err != nil {
			return err
		}
		m.moves++
		m.done = append(m.done, name)
		return nil
	}
	before, err := m.slotsOf(from)
	if err != nil {
		return err
	}
	src, dst, cmd, _, err := m.startReshard(from, to, m.slots)
	if err != nil {
		return err
	}
	began := m.w.h.Now()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	limit := m.limit(m.slots)

	victim, vg := src, from
	if m.rng.Intn(2) == 0 {
		victim, vg = dst, to
	}
	// A third of the kills come at a random time, a third when the
	// source runs a MIGRATE (a slot holding queues, whose copy may be
	// committed at the target and not yet dropped at the source: the step
	// of a move where a crash could lose or double a job), a third late
	// in the move, once three quarters of its slots crossed (a long move's
	// kill, whose resumption has few slots left).
	kind := m.killAt
	if kind == "" {
		kind = []string{"random", "migrate", "late"}[m.rng.Intn(3)]
	}
	at, when := "at a random time", time.After(time.Duration(100+m.rng.Intn(900))*time.Millisecond)
	switch kind {
	case "migrate":
		at, when = "during a MIGRATE", m.migrating(src.addr(from), 20*time.Second)
	case "late":
		at, when = "late in the move", m.late(from, before, 3*m.slots/4, limit)
	}
	var ended error
	select {
	case ended = <-exited:
		// Quicker than the kill: the leader dies after the move.
		m.t.Logf("chaos: %6.1fs %s ended before the kill (%v)", time.Since(start).Seconds(), name, ended)
		exited = nil
	case <-when:
	}
	m.t.Logf("chaos: %6.1fs %s, SIGKILL of group %d's leader (%s) %s", time.Since(start).Seconds(), name, vg, victim.addr(vg), at)
	victim.Kill9()
	m.kills++
	if exited != nil {
		select {
		case ended = <-exited:
		case <-time.After(limit):
			cmd.Process.Kill()
			ended = fmt.Errorf("still running after %v: %v", limit, <-exited)
		}
	}
	time.Sleep(time.Duration(500+m.rng.Intn(1500)) * time.Millisecond)
	// It restarts on its data: a member that knows its groups.
	var args []string
	for i := 0; i < len(victim.Args); i++ {
		switch victim.Args[i] {
		case "--cluster-bootstrap":
			continue
		case "--cluster-groups":
			i++
			continue
		}
		args = append(args, victim.Args[i])
	}
	victim.Args = args
	victim.ReadyWithin = m.ready
	if err := victim.Start(); err != nil {
		return fmt.Errorf("restart %s: %w", victim.addr(0), err)
	}
	for g := 0; g < grCount; g++ {
		if _, err := m.leader(g); err != nil {
			return err
		}
	}
	// The slots the kill left open, as --cluster check reads them from
	// every master's CLUSTER NODES markers.
	open := map[int]bool{}
	chk, _ := exec.Command("redis-cli", "--cluster", "check", m.nodes[0].addr(0)).CombinedOutput()
	if _, list, ok := strings.Cut(string(chk), "The following slots are open: "); ok {
		list, _, _ = strings.Cut(list, ".")
		for _, f := range strings.Split(list, ",") {
			if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil {
				open[n] = true
			}
		}
	}
	if len(open) > 0 {
		// Every try's whole output: a loss found later is read from it.
		var fixOut strings.Builder
		for try := 0; ; try++ {
			out, err := exec.Command("redis-cli", "--cluster", "fix", m.nodes[m.rng.Intn(3)].addr(0), "--cluster-yes").CombinedOutput()
			fmt.Fprintf(&fixOut, "try %d (%v):\n%s", try, err, out)
			if _, ok := m.check(2 * time.Second); ok {
				break
			}
			if try == 10 {
				return fmt.Errorf("--cluster fix did not close slots %v (%v):\n%s", open, err, lastLines(fixOut.String(), 60))
			}
		}
		m.stopped = append(m.stopped, stoppedMove{slots: open, from: began, to: m.w.h.Now()})
		m.t.Logf("chaos: --cluster fix of slots %v:\n%s", open, fixOut.String())
	} else if s, ok := m.check(30 * time.Second); !ok {
		return fmt.Errorf("--cluster check after the kill:\n%s", s)
	}
	m.t.Logf("chaos: %6.1fs %s: reshard ended %v; %d slots left open, fixed", time.Since(start).Seconds(), name, ended, len(open))
	if ended == nil {
		m.moves++
		m.done = append(m.done, name+" kill")
		return nil
	}
	// The move goes on, as an operator runs the reshard again: the slots
	// the kill left at the source move now, so that a move's whole count
	// (a million jobs with DELAYD_CHAOS_PRELOAD) crosses, a kill in it.
	now, err := m.slotsOf(from)
	if err != nil {
		return err
	}
	if left := m.slots - (before - now); left > 0 {
		m.t.Logf("chaos: %6.1fs %s resumed: %d slots of %d left", time.Since(start).Seconds(), name, left, m.slots)
		if err := m.reshard(start, from, to, left); err != nil {
			return fmt.Errorf("the reshard resumed after the kill: %w", err)
		}
	}
	m.moves++
	m.done = append(m.done, name+" kill resumed")
	return nil
}

// startReshard starts redis-cli --cluster reshard of n slots from group
// from's leader to group to's, through a random address.
func (m *slotMover) startReshard(from, to, n int) (src, dst *grNode, cmd *exec.Cmd, out *strings.Builder, err error) {
	if src, err = m.leader(from); err != nil {
		return
	}
	if dst, err = m.leader(to); err != nil {
		return
	}
	id := func(n *grNode, g int) (string, error) {
		v, err := grAsk(n.addr(g), "CLUSTER", "MYID")
		return fmt.Sprint(v), err
	}
	var fromID, toID string
	if fromID, err = id(src, from); err != nil {
		return
	}
	if toID, err = id(dst, to); err != nil {
		return
	}
	cmd = exec.Command("redis-cli", "--cluster", "reshard", m.nodes[m.rng.Intn(3)].addr(m.rng.Intn(grCount)),
		"--cluster-from", fromID, "--cluster-to", toID, "--cluster-slots", strconv.Itoa(n),
		"--cluster-yes", "--cluster-pipeline", "10", "--cluster-timeout", "5000")
	out = new(strings.Builder)
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Start()
	return
}

// limit is how long a reshard of n slots may take: a slot's step is a few
// commits in group 0 and a MIGRATE.
func (m *slotMover) limit(n int) time.Duration {
	return 2*time.Minute + time.Duration(n)*100*time.Millisecond
}

// reshard moves n slots from group from to group to, no fault injected,
// and checks the cluster after.
func (m *slotMover) reshard(start time.Time, from, to, n int) error {
	_, _, cmd, out, err := m.startReshard(from, to, n)
	if err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err = <-exited:
	case <-time.After(m.limit(n)):
		cmd.Process.Kill()
		err = fmt.Errorf("still running after %v: %v", m.limit(n), <-exited)
	}
	if err != nil || strings.Contains(out.String(), "[ERR]") {
		return fmt.Errorf("redis-cli --cluster reshard: %v\n%s", err, lastLines(out.String(), 20))
	}
	if s, ok := m.check(30 * time.Second); !ok {
		return fmt.Errorf("--cluster check after the move:\n%s", s)
	}
	return nil
}

// slotsOf is how many slots group g owns (CLUSTER GROUPS of a running
// node).
func (m *slotMover) slotsOf(g int) (int, error) {
	var addrs []string
	for _, n := range m.nodes {
		if n.Running() {
			addrs = append(addrs, n.addr(0))
		}
	}
	return groupSlots(addrs, g)
}

// groupSlots is how many slots group g owns, as the first of addrs that
// answers CLUSTER GROUPS says.
func groupSlots(addrs []string, g int) (int, error) {
	var err error
	for _, addr := range addrs {
		var v any
		if v, err = grAsk(addr, "CLUSTER", "GROUPS"); err != nil {
			continue
		}
		for _, e := range v.([]any) {
			f := e.([]any)
			if int(f[0].(int64)) != g {
				continue
			}
			r, count := f[2].([]any), 0
			for i := 0; i+1 < len(r); i += 2 {
				count += int(r[i+1].(int64)-r[i].(int64)) + 1
			}
			return count, nil
		}
		return 0, fmt.Errorf("CLUSTER GROUPS has no group %d: %v", g, v)
	}
	return 0, fmt.Errorf("no node answered CLUSTER GROUPS: %v", err)
}

// TestSlotMoveStoppedServesTwice is TestChaosSlotMoves's double-reserved
// finding reduced (seed 1795940365629957557, job p24-909): a move stopped
// between the target's commit and the source's drop (MIGRATE COPY stands
// for a target leader that died after committing, so that the source's
// MIGRATE failed and dropped nothing). The worker blocked on the queue at
// the source was released with ASK before the export, followed it to the
// target and, with ASKING, popped the target's copy while a worker at the
// source popped the source's: one job, two workers. A blocked pop is now
// released with TRYAGAIN, and its retry finds the queue at the source,
// which goes on serving it (slot-moves.md).
func TestSlotMoveStoppedServesTwice(t *testing.T) {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("no redis-cli")
	}
	t.Parallel()
	nodes := grCluster(t)
	src, dst := nodes[0].addr(0), nodes[1].addr(1)
	id := func(addr string) string {
		v, err := grAsk(addr, "CLUSTER", "MYID")
		if err != nil {
			t.Fatal(err)
		}
		return v.(string)
	}
	q, slot := grKeyIn(t, src, 0, 5460, "twice-")
	if _, err := grAsk(src, "DELAY.ADD", q, 1500, "x", "ID", "j1"); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 30*time.Second)
	// A worker blocked at the source, on one connection (ASKING lasts one command).
	wc := redis.NewClient(&redis.Options{Addr: src, Protocol: 2, MaxRetries: -1, ReadTimeout: 20 * time.Second, PoolSize: 1})
	defer wc.Close()
	blocked := make(chan error, 1)
	go func() { blocked <- wc.Do(ctx, "DELAY.POP", q, 10).Err() }()
	clWait(t, 5*time.Second, "the worker blocked", func() (bool, string) {
		v, err := grAsk(src, "CLIENT", "LIST")
		return err == nil && strings.Contains(fmt.Sprint(v), "cmd=delay.pop"), fmt.Sprint(v, err)
	})
	if _, err := grAsk(dst, "CLUSTER", "SETSLOT", slot, "IMPORTING", id(src)); err != nil {
		t.Fatal(err)
	}
	if _, err := grAsk(src, "CLUSTER", "SETSLOT", slot, "MIGRATING", id(dst)); err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(dst, ":")
	if v, err := grAsk(src, "MIGRATE", host, port, "", 0, 5000, "COPY", "KEYS", q); err != nil || v != "OK" {
		t.Fatalf("MIGRATE COPY: %v %v", v, err)
	}
	err := <-blocked
	if err == nil || !strings.HasPrefix(err.Error(), "TRYAGAIN") {
		t.Fatalf("the worker blocked on %s (slot %d) during the MIGRATE got %v, want TRYAGAIN: an ASK sends it to the target's copy while the source still serves the queue", q, slot, err)
	}
	// Its retry, at the source, is served there: the queue is still here.
	v, err := grAskT(src, 20*time.Second, "DELAY.POP", q, 10)
	if err != nil || !strings.Contains(fmt.Sprint(v), "j1") {
		t.Fatalf("the retry at the source: %v %v, want j1", v, err)
	}
	// And the source does not hand j1 out again within its reservation.
	if v, err := grAskT(src, 5*time.Second, "DELAY.POP", q, 1); err != redis.Nil {
		t.Fatalf("a second pop at the source: %v %v, want nothing", v, err)
	}
}

// grAskT is grAsk with a read timeout of its own.
func grAskT(addr string, d time.Duration, args ...any) (any, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: d})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d+time.Second)
	defer cancel()
	return c.Do(ctx, args...).Result()
}

// TestSlotFixStoppedAfterAddSlots is TestChaosSlotMoves's loss reduced
// (seed 1795944028760553740: 3 acknowledged adds never delivered): a move
// of a slot stopped midway leaves queues of it in both groups; redis-cli
// --cluster fix, finding no single owner, gives the slot to the target
// (SETSLOT STABLE, ADDSLOTS there), then failed at the source's DELSLOTS
// (its node's copy of the map was a moment behind) and stopped. The slot
// was then closed everywhere, so check was clean and the source's queue out
// of every client's reach. The source is now left importing the slot: the
// slot stays open until a fix has moved its queues, and DELSLOTS, SETSLOT
// and ADDSLOTS bring their node's map up to group 0's leader's first.
func TestSlotFixStoppedAfterAddSlots(t *testing.T) {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("no redis-cli")
	}
	t.Parallel()
	nodes := grCluster(t)
	src, dst := nodes[2].addr(2), nodes[0].addr(0)
	id := func(addr string) string {
		v, err := grAsk(addr, "CLUSTER", "MYID")
		if err != nil {
			t.Fatal(err)
		}
		return v.(string)
	}
	k, slot := grKeyIn(t, src, 10922, 16383, "fix-")
	queues := []string{"{" + k + "}a", "{" + k + "}b", "{" + k + "}c"}
	want := map[string]bool{}
	for _, q := range queues {
		for i := 0; i < 5; i++ {
			jid := fmt.Sprintf("%s-%d", q, i)
			if _, err := grAsk(src, "DELAY.ADD", q, 0, "x", "ID", jid); err != nil {
				t.Fatal(err)
			}
			want[jid] = true
		}
	}
	do := func(addr string, args ...any) {
		t.Helper()
		if v, err := grAsk(addr, args...); err != nil || v != "OK" {
			t.Fatalf("%v at %s: %v %v", args, addr, v, err)
		}
	}
	// The move, stopped after two of the three queues went.
	do(dst, "CLUSTER", "SETSLOT", slot, "IMPORTING", id(src))
	do(src, "CLUSTER", "SETSLOT", slot, "MIGRATING", id(dst))
	host, port, _ := strings.Cut(dst, ":")
	do(src, "MIGRATE", host, port, "", 0, 5000, "KEYS", queues[0], queues[1])
	// What fix sends the group it picks as the owner (most queues), then
	// it stops: the source's queue is there, and the slot must stay open.
	do(dst, "CLUSTER", "SETSLOT", slot, "STABLE")
	do(dst, "CLUSTER", "ADDSLOTS", slot)
	// ADDSLOTS answers once its own node's map has it; another node's copy
	// of group 0's log may be a moment behind (a CI run's check read the old
	// owner still claiming the slot), so check is asked until the views agree.
	clWait(t, 5*time.Second, fmt.Sprintf("check after ADDSLOTS took slot %d from a group holding a queue of it shows it open", slot), func() (bool, string) {
		out, _ := exec.Command("redis-cli", "--cluster", "check", dst).CombinedOutput()
		return strings.Contains(string(out), "The following slots are open: "+strconv.Itoa(slot)), string(out)
	})
	// A fix now moves the source's queue to the owner and closes the slot.
	fix, _ := exec.Command("redis-cli", "--cluster", "fix", dst, "--cluster-yes").CombinedOutput()
	clWait(t, 10*time.Second, "check clean after fix", func() (bool, string) {
		out, err := exec.Command("redis-cli", "--cluster", "check", dst).CombinedOutput()
		s := string(out)
		return err == nil && !strings.Contains(s, "[ERR]") && !strings.Contains(s, "[WARNING]"), s + "\nthe fix:\n" + string(fix)
	})
	for addr, n := range map[string]int64{src: 0, dst: 3} {
		if v, err := grAsk(addr, "CLUSTER", "COUNTKEYSINSLOT", slot); err != nil || v != n {
			t.Errorf("COUNTKEYSINSLOT %d at %s: %v %v, want %d\nthe fix:\n%s", slot, addr, v, err, n, fix)
		}
	}
	for _, q := range queues {
		for i := 0; i < 5; i++ {
			jid := fmt.Sprintf("%s-%d", q, i)
			v, err := grAsk(dst, "DELAY.GET", q, jid)
			if err != nil || v == nil {
				t.Errorf("job %s of %s after the fix: %v %v", jid, q, v, err)
			}
		}
	}
}
