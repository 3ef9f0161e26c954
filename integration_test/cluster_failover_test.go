package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SPEC "Cluster and replication" when a node fails: a killed leader, a
// paused one stepping down, a minority that must acknowledge nothing, and a
// follower whose disk was wiped (helpers in cluster_helpers_test.go).

// A leader killed with SIGKILL: a new one is elected; every acknowledged
// job is on it with its due time and is handed out no earlier; a
// reservation keeps its absolute deadline (ACKed on the new leader before
// it, back in its queue only after it). The killed node comes back as a
// follower and catches up.
func TestClusterFailoverKeepsJobsAndReservations(t *testing.T) {
	t.Parallel()
	cc := clStart(t, 3)
	old := cc.waitLeader(t, 10*time.Second, nil)
	c := old.client()

	type job struct {
		id  string
		due int64
	}
	var delayed []job
	// Due over the next 8 s: some while no node leads, some after.
	for i, d := range []int64{300, 1500, 3000, 5000, 8000} {
		id := fmt.Sprintf("d%d", i)
		if v := do(t, c, "DELAY.ADD", "{f}delayed", d, "p-"+id, "ID", id); v != id {
			t.Fatalf("DELAY.ADD %s: got %s", id, showValue(v))
		}
		j, err := clGet(old, c, "{f}delayed", id)
		if err != nil || j == nil {
			t.Fatalf("DELAY.GET %s: %v %v", id, j, err)
		}
		delayed = append(delayed, job{id, clMs(t, j, "due")})
	}
	for i := 0; i < 3; i++ {
		do(t, c, "DELAY.ADD", "{f}ready", 0, fmt.Sprintf("r%d", i), "ID", fmt.Sprintf("r%d", i))
	}
	// Two reservations: one to ACK on the new leader before its deadline,
	// one that must come back only after its deadline.
	reserve := func(key, id string, ackTimeout int) int64 {
		t.Helper()
		do(t, c, "DELAY.ADD", key, 0, "payload-"+id, "ID", id, "ACKTIMEOUT", ackTimeout)
		if v := do(t, c, "DELAY.POP", key, 1); matchValue([]any{key, id, "payload-" + id}, v) != "" {
			t.Fatalf("DELAY.POP %s: got %s", key, showValue(v))
		}
		j, err := clGet(old, c, key, id)
		if err != nil || j == nil || j["state"] != "reserved" {
			t.Fatalf("DELAY.GET %s %s after the pop: %v %v", key, id, j, err)
		}
		return clMs(t, j, "ack_deadline")
	}
	keepDeadline := reserve("{f}keep", "k", 30000)
	expireDeadline := reserve("{f}expire", "e", 4500)
	// And one whose deadline passes while no node leads: the new leader
	// puts it back when it takes over, not before.
	gapDeadline := reserve("{f}gap", "g", 700)

	// go-redis ClusterClient, seeded with every node, as a producer would
	// be: the time from the kill to its first acknowledged write. go-redis
	// v9.23 reloads the slot map only on MOVED, or every
	// ClusterStateReloadInterval (default 60 s): a dead master answers no
	// MOVED, so a producer that wants a quick failover sets the interval
	// short, and reloads after a failed call, as this one does.
	var addrs []string
	for _, n := range cc.nodes {
		addrs = append(addrs, n.Addr())
	}
	rc := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: addrs, Protocol: 2, DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: time.Second,
		ClusterStateReloadInterval: 500 * time.Millisecond,
	})
	defer rc.Close()
	if err := rc.Do(ctxT(t, 5*time.Second), "DELAY.ADD", "{f}probe", 0, "x").Err(); err != nil {
		t.Fatalf("ClusterClient before the kill: %v", err)
	}
	killed := time.Now()
	old.Kill9()
	// Meanwhile, plain clients on the survivors say when the group itself
	// took a write again, to tell the election from the client's delay.
	direct := make(chan time.Duration, 1)
	go func() {
		for time.Since(killed) < 30*time.Second {
			for _, n := range cc.nodes {
				if n == old {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
				err := n.client().Do(ctx, "DELAY.ADD", "{f}direct", 3600000, "x").Err()
				cancel()
				if err == nil {
					direct <- time.Since(killed)
					return
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		direct <- -1
	}()
	attempts := 0
	for {
		attempts++
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err := rc.Do(ctx, "DELAY.ADD", "{f}after", 0, "after", "ID", "after").Err()
		cancel()
		if err == nil || errors.Is(err, redis.Nil) { // Nil: an earlier try did commit
			break
		}
		if time.Since(killed) > 30*time.Second {
			t.Fatalf("no write acknowledged through ClusterClient within 30s of the kill; last error %v", err)
		}
		rc.ReloadState(context.Background())
		time.Sleep(20 * time.Millisecond)
	}
	failover := time.Since(killed)
	leader := cc.waitLeader(t, 10*time.Second, nil)
	leaderID := leader.myID(t)
	t.Logf("failover: first write acknowledged through go-redis ClusterClient %v after the leader's SIGKILL (%d tries), by a plain client on the new leader %v (election timeout %d ms; new leader %v)",
		failover.Round(time.Millisecond), attempts, (<-direct).Round(time.Millisecond), clElection, leader)
	lc := leader.Client(func(o *redis.Options) { o.ReadTimeout = 20 * time.Second })

	// Every job is there, with its time; none is ready before it.
	for _, j := range delayed {
		before := clNowMs()
		got, err := clGet(leader, lc, "{f}delayed", j.id)
		after := clNowMs()
		if err != nil || got == nil {
			t.Fatalf("%v: DELAY.GET %s after the failover: %v %v (acknowledged before the kill)", leader, j.id, got, err)
		}
		if due := clMs(t, got, "due"); due != j.due {
			t.Errorf("%v: job %s due %d, was %d on the old leader", leader, j.id, due, j.due)
		}
		if got["state"] != "delayed" && after < j.due {
			t.Errorf("%v: job %s is %s at %d, before its due time %d", leader, j.id, got["state"], after, j.due)
		}
		if got["state"] == "delayed" && before > j.due+2000 {
			t.Errorf("%v: job %s still delayed at %d, due %d", leader, j.id, before, j.due)
		}
	}
	for _, id := range []string{"r0", "r1", "r2"} {
		if got, err := clGet(leader, lc, "{f}ready", id); err != nil || got == nil || got["state"] != "ready" {
			t.Errorf("%v: ready job %s after the failover: %v %v", leader, id, got, err)
		}
	}

	// The long reservation is kept: same deadline, ACKed before it.
	got, err := clGet(leader, lc, "{f}keep", "k")
	switch {
	case err != nil || got == nil:
		t.Errorf("%v: reserved job k after the failover: %v %v", leader, got, err)
	case got["state"] != "reserved" || clMs(t, got, "ack_deadline") != keepDeadline || got["deliveries"] != "1":
		t.Errorf("%v: reserved job k after the failover: %v, want reserved, ack_deadline %d, deliveries 1", leader, got, keepDeadline)
	}
	if now := clNowMs(); now >= keepDeadline {
		t.Fatalf("the failover took past the 30 s reservation (now %d, deadline %d)", now, keepDeadline)
	}
	expect(t, lc, 1, "DELAY.ACK", "{f}keep", "k")

	// The short one comes back to its queue only once its deadline passed.
	if got, err := clGet(leader, lc, "{f}expire", "e"); err != nil || got == nil {
		t.Errorf("%v: reserved job e after the failover: %v %v", leader, got, err)
	} else {
		if clMs(t, got, "ack_deadline") != expireDeadline && got["state"] == "reserved" {
			t.Errorf("%v: job e ack_deadline %s, was %d", leader, got["ack_deadline"], expireDeadline)
		}
		if got["state"] != "reserved" && clNowMs() < expireDeadline {
			t.Errorf("%v: job e is %s before its ack deadline %d", leader, got["state"], expireDeadline)
		}
	}
	v, err := lc.Do(ctxT(t, 20*time.Second), "DELAY.POP", "{f}expire", 15).Result()
	at := clNowMs()
	if err != nil || matchValue([]any{"{f}expire", "e", "payload-e"}, v) != "" {
		t.Fatalf("%v: DELAY.POP {f}expire: %s, want job e back after its deadline", leader, show(v, err))
	}
	if at < expireDeadline {
		t.Errorf("job e redelivered at %d, before its ack deadline %d", at, expireDeadline)
	}
	t.Logf("job e: redelivered %d ms after its ack deadline", at-expireDeadline)

	v, err = lc.Do(ctxT(t, 5*time.Second), "DELAY.POP", "{f}gap", 1).Result()
	if at := clNowMs(); at < gapDeadline {
		t.Errorf("job g popped at %d, before its ack deadline %d", at, gapDeadline)
	}
	if err != nil || matchValue([]any{"{f}gap", "g", "payload-g"}, v) != "" {
		t.Errorf("%v: DELAY.POP {f}gap: %s, want job g, whose reservation ended during the failover", leader, show(v, err))
	} else if got, err := clGet(leader, lc, "{f}gap", "g"); err != nil || got == nil || got["deliveries"] != "2" {
		t.Errorf("%v: job g after its second delivery: %v %v, want deliveries 2", leader, got, err)
	}

	// Ready jobs in order, then the delayed ones in due order, none early.
	for _, id := range []string{"r0", "r1", "r2"} {
		if v := do(t, lc, "DELAY.POP", "{f}ready", 1); matchValue([]any{"{f}ready", id, id}, v) != "" {
			t.Errorf("DELAY.POP {f}ready: got %s, want %s", showValue(v), id)
		}
	}
	for _, j := range delayed {
		v, err := lc.Do(ctxT(t, 20*time.Second), "DELAY.POP", "{f}delayed", 15).Result()
		at := clNowMs()
		if err != nil || matchValue([]any{"{f}delayed", j.id, "p-" + j.id}, v) != "" {
			t.Fatalf("DELAY.POP {f}delayed: %s, want job %s", show(v, err), j.id)
		}
		if at < j.due {
			t.Errorf("job %s handed out at %d, before its due time %d", j.id, at, j.due)
		}
	}

	// The killed node restarts from its dir and follows.
	old.Restart()
	clWait(t, 15*time.Second, fmt.Sprintf("%v following %v", old, leader), func() (bool, string) {
		r, p := old.role(), old.infoField("replication", "master_port")
		return r == "slave" && p == strconv.Itoa(leader.Port()), fmt.Sprintf("role %q master_port %q", r, p)
	})
	cc.waitCaughtUp(t, 15*time.Second, leader, old)
	// Caught up is the log's index (slave_repl_offset); the entries are
	// applied to the engine a moment later, on Raft's state machine
	// goroutine: wait for it, as the DELAY.STATS checks below do.
	clWait(t, 5*time.Second, fmt.Sprintf("%v (restarted): READONLY DELAY.GET of a job written while it was down", old), func() (bool, string) {
		got, err := clGet(old, old.roClient(), "{f}after", "after")
		return err == nil && got != nil, fmt.Sprintf("%v %v", got, err)
	})
	if got, err := clGet(old, old.roClient(), "{f}keep", "k"); err != nil || got != nil {
		t.Errorf("%v (restarted): job k was ACKed while it was down, it still shows %v %v", old, got, err)
	}
	// Every queue as the leader has it. A follower's clock is the time of
	// the last record it applied (no follower's clock moves a job), so a
	// reservation that ended on the leader since its last write still
	// shows reserved on a follower; one more write brings its time.
	do(t, lc, "DELAY.ADD", "{f}tick", 3600000, "x")
	for _, q := range []string{"{f}delayed", "{f}ready", "{f}keep", "{f}expire", "{f}gap", "{f}after", "{f}direct", "{f}probe"} {
		d, r, res := stats(t, lc, q)
		clWait(t, 5*time.Second, fmt.Sprintf("%v (restarted): DELAY.STATS %s as on the leader", old, q), func() (bool, string) {
			d2, r2, res2 := stats(t, old.roClient(), q)
			return d2 == d && r2 == r && res2 == res,
				fmt.Sprintf("delayed/ready/reserved %d/%d/%d, the leader %d/%d/%d", d2, r2, res2, d, r, res)
		})
	}
	if now := leader.infoField("replication", "master_replid"); now != leaderID {
		t.Errorf("the restarted node took leadership (leader %s, was %s): it should have rejoined as a follower", now, leaderID)
	}
}

// A client blocked on the leader is answered UNBLOCKED when the leader
// steps down (it lost its quorum: both followers frozen), as Redis answers
// the clients of a master that becomes a replica.
func TestClusterUnblockedOnStepDown(t *testing.T) {
	t.Parallel()
	cc := clStart(t, 3)
	leader := cc.waitLeader(t, 10*time.Second, nil)
	c := leader.Client(func(o *redis.Options) { o.ReadTimeout = 30 * time.Second })
	ch := popAsync(c, 30*time.Second, "{u}jobs", 0)
	leader.waitBlocked(t, 1)
	paused := time.Now()
	for _, f := range cc.followers(leader) {
		f.pause(t)
	}
	r := waitPop(t, ch, 15*time.Second)
	const want = "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)"
	if r.err == nil || r.err.Error() != want {
		t.Fatalf("the blocked DELAY.POP: got %s, want error %q", show(r.reply, r.err), want)
	}
	t.Logf("the blocked client was answered UNBLOCKED %v after both followers were paused (lease %d ms)",
		r.at.Sub(paused).Round(time.Millisecond), clElection/2)
	// The old leader now refuses writes, and its connection still works.
	if _, err := leader.do(c, "DELAY.ADD", "{u}jobs", 0, "x"); err == nil {
		t.Errorf("%v: a write after stepping down was acknowledged", leader)
	}
	for _, f := range cc.nodes {
		if f != leader {
			f.resume(t)
		}
	}
	now := cc.waitLeader(t, 20*time.Second, nil)
	// The group works again: a worker blocked on the leader gets a job.
	w := now.Client(func(o *redis.Options) { o.ReadTimeout = 10 * time.Second })
	ch = popAsync(w, 10*time.Second, "{u}jobs", 5)
	now.waitBlocked(t, 1)
	do(t, now.client(), "DELAY.ADD", "{u}jobs", 0, "after", "ID", "after")
	popTriple(t, waitPop(t, ch, 10*time.Second), "{u}jobs", "after", "after")
}

// A leader cut off from both followers acknowledges no write: one sent at
// once (while its lease may still run) is not answered OK, and one sent
// after the lease is refused. After healing, every acknowledged write is
// there; the unanswered one may or may not be.
func TestClusterMinorityAcknowledgesNothing(t *testing.T) {
	t.Parallel()
	cc := clStart(t, 3)
	leader := cc.waitLeader(t, 10*time.Second, nil)
	c := leader.Client(func(o *redis.Options) { o.ReadTimeout = 15 * time.Second })
	do(t, c, "DELAY.ADD", "{m}q", 60000, "before", "ID", "before")
	fs := cc.followers(leader)
	for _, f := range fs {
		f.pause(t)
	}
	paused := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	v, err := c.Do(ctx, "DELAY.ADD", "{m}q", 60000, "during", "ID", "during").Result()
	cancel()
	if err == nil || errors.Is(err, redis.Nil) {
		t.Fatalf("%v cut off from its followers acknowledged a write: %s", leader, show(v, err))
	}
	t.Logf("a write sent as the followers froze: %q after %v", err, time.Since(paused).Round(time.Millisecond))
	if kind := clErrKind(err); kind != "TRYAGAIN" && kind != "CLUSTERDOWN" && !strings.HasPrefix(kind, "MOVED") {
		t.Logf("note: the in-lease write ended with %q, not TRYAGAIN/CLUSTERDOWN/MOVED", err)
	}
	// Well past the lease: refused at once.
	time.Sleep(time.Until(paused.Add(2 * clElection * time.Millisecond)))
	start := time.Now()
	_, err = leader.do(c, "DELAY.ADD", "{m}q", 60000, "late", "ID", "late")
	if kind := clErrKind(err); kind != "CLUSTERDOWN" && kind != "MOVED" && kind != "TRYAGAIN" {
		t.Errorf("%v, minority, after its lease: DELAY.ADD answered %s, want CLUSTERDOWN (or MOVED/TRYAGAIN)", leader, show(nil, err))
	} else if d := time.Since(start); d > time.Second {
		t.Errorf("%v, minority, after its lease: the refusal took %v", leader, d)
	}
	_, err = leader.do(c, "DELAY.GET", "{m}q", "before")
	t.Logf("minority side after its lease: DELAY.GET answers %s", show(nil, err))

	for _, f := range fs {
		f.resume(t)
	}
	now := cc.waitLeader(t, 20*time.Second, nil)
	lc := now.client()
	if got, err := clGet(now, lc, "{m}q", "before"); err != nil || got == nil {
		t.Errorf("%v: the write acknowledged before the partition is gone: %v %v", now, got, err)
	}
	during, err := clGet(now, lc, "{m}q", "during")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after healing (%v leads; the old leader was %v): the unanswered write is there: %v", now, leader, during != nil)
	if got, err := clGet(now, lc, "{m}q", "late"); err != nil || got != nil {
		t.Errorf("%v: the write refused after the lease is there: %v %v", now, got, err)
	}
	do(t, lc, "DELAY.ADD", "{m}q", 60000, "healed", "ID", "healed")
	cc.waitCaughtUp(t, 15*time.Second, now, cc.nodes...)
	// (A follower applies what it holds once the leader tells it the
	// commit index, with the next append: poll.)
	for _, n := range cc.nodes {
		clWait(t, 5*time.Second, fmt.Sprintf("%v: every acknowledged job through READONLY", n), func() (bool, string) {
			for _, id := range []string{"before", "healed"} {
				if got, err := clGet(n, n.roClient(), "{m}q", id); err != nil || got == nil {
					return false, fmt.Sprintf("job %s: %v %v", id, got, err)
				}
			}
			got, err := clGet(n, n.roClient(), "{m}q", "during")
			return err == nil && (got != nil) == (during != nil),
				fmt.Sprintf("the unanswered write: present %v, the leader says %v (%v)", got != nil, during != nil, err)
		})
	}
}

// clRejoinJobs is how many jobs TestClusterWipedFollowerRejoins loads:
// DELAYD_IT_REJOIN_JOBS (1000000 for the measurement), else 20000.
func clRejoinJobs(t testing.TB) int {
	if s := os.Getenv("DELAYD_IT_REJOIN_JOBS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("DELAYD_IT_REJOIN_JOBS=%q: want a positive integer", s)
		}
		return n
	}
	return 20000
}

// A follower whose data dir is wiped starts again with --cluster-join and
// a new id: it replaces its old self in the group, catches up (a snapshot
// and the log's tail) and serves every job to READONLY reads within 10 s.
func TestClusterWipedFollowerRejoins(t *testing.T) {
	t.Parallel()
	jobs := clRejoinJobs(t)
	const queues = 8
	// A snapshot every 64 entries, but past a million jobs every 8192 (the
	// default): each is a capture of every job, seconds at millions, and
	// back to back they would hold the leader's writes for good.
	snapEvery, op, within := uint64(64), clOp, 60*time.Second
	if jobs > 1000000 {
		snapEvery, op, within = 8192, 60*time.Second, 10*time.Minute
	}
	// Entries alone decide (no growth rule): the test wants snapshots.
	cc := clStart(t, 3, "--cluster-snapshot-entries", strconv.FormatUint(snapEvery, 10), "--auto-rewrite-percentage", "0")
	leader := cc.waitLeader(t, 10*time.Second, nil)

	// Load with pipelines; every job delayed an hour, so none moves.
	load := time.Now()
	leader = clLoad(t, cc, leader, jobs, queues)
	entries := leader.infoField("replication", "master_repl_offset")
	t.Logf("loaded %d jobs in %v (%s Raft entries)", jobs, time.Since(load).Round(time.Millisecond), entries)
	// A pipeline makes few entries (one per flush of many commands), and
	// the leader keeps 10240 entries behind its last snapshot: a node
	// that needs older ones is sent the snapshot. Single writes from a few
	// clients make an entry each, or nearly: enough of them, and the
	// leader's log no longer starts at 1.
	churn := time.Now()
	extra := clChurnWithin(t, leader, "{w}extra", 10240+3*snapEvery, op, within)
	t.Logf("then %d single writes in %v, up to index %s", extra, time.Since(churn).Round(time.Millisecond),
		leader.infoField("replication", "master_repl_offset"))
	clWait(t, within/4, fmt.Sprintf("%v taking a snapshot past index %d", leader, 10240+snapEvery), func() (bool, string) {
		snaps := clSnapshots(leader.dir)
		return len(snaps) > 0 && snaps[len(snaps)-1] > 10240+snapEvery, fmt.Sprintf("snapshots at %v", snaps)
	})

	victim := cc.followers(leader)[0]
	oldID := victim.myID(t)
	victim.Kill9()
	if err := os.RemoveAll(victim.dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(victim.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// DELAYD_IT_REJOIN_OUT=dir keeps, for a breakdown of the time, the
	// wiped node's CPU profile (written when it stops) and both logs.
	var env []string
	out := os.Getenv("DELAYD_IT_REJOIN_OUT")
	if out != "" {
		env = []string{"DELAYD_CPUPROFILE=" + filepath.Join(out, "victim.cpu")}
	}
	start := time.Now()
	t.Logf("wiped %v and started it again at %s", victim, start.UTC().Format(time.RFC3339Nano))
	victim.spawnAgainEnv(t, env, "--cluster-join", leader.Addr())
	var first time.Duration
	clWait(t, within, fmt.Sprintf("%v (wiped) serving every job to READONLY reads", victim), func() (bool, string) {
		if err := victim.WaitReady(10 * time.Millisecond); err != nil && !strings.Contains(err.Error(), "no reply") {
			t.Fatalf("%v: %v", victim, err)
		}
		total := int64(0)
		for q := 0; q < queues; q++ {
			v, err := victim.do(victim.roClient(), "DELAY.STATS", fmt.Sprintf("{w}q%d", q))
			if err != nil {
				return false, fmt.Sprintf("DELAY.STATS: %v", err)
			}
			m := fields(t, "DELAY.STATS", v)
			total += asInt(t, "delayed", m["delayed"])
		}
		if total > 0 && first == 0 {
			first = time.Since(start)
		}
		if total == int64(jobs) {
			d, _, _ := stats(t, victim.roClient(), "{w}extra")
			total += d
		}
		return total == int64(jobs+extra), fmt.Sprintf("%d of %d jobs", total, jobs+extra)
	})
	rejoin := time.Since(start)
	snaps := clSnapshots(victim.dir)
	t.Logf("wiped follower with %d jobs: serving reads of them all %v after its start (first job seen after %v); snapshots on it at %v",
		jobs+extra, rejoin.Round(time.Millisecond), first.Round(time.Millisecond), snaps)
	if len(snaps) == 0 {
		t.Errorf("the wiped follower caught up without a snapshot; the leader's log should have been compacted")
	}
	if out != "" {
		for name, n := range map[string]*clNode{"leader.log": leader, "victim.log": victim} {
			if err := os.WriteFile(filepath.Join(out, name), []byte(n.Output()), 0o644); err != nil {
				t.Error(err)
			}
		}
	}
	// The line: 10M jobs back within 30 s; a million within 10.
	limit := 10 * time.Second
	if jobs > 1000000 {
		limit = 30 * time.Second
	}
	if rejoin > limit {
		t.Errorf("the wiped follower took %v to serve every job, want within %v", rejoin, limit)
	}

	// Every job, with its payload (a sample of one in every 50 at 1M).
	step := 1
	if jobs > 100000 {
		step = 50
	}
	ro := victim.roClient()
	if op != clOp {
		// At millions of jobs the node may be taking its own snapshot
		// now (seconds under its lock): reads wait for it.
		ro = victim.Client(func(o *redis.Options) {
			o.ReadTimeout = op
			o.OnConnect = func(ctx context.Context, c *redis.Conn) error { return c.ReadOnly(ctx).Err() }
		})
	}
	const batch = 1000
	for i := 0; i < jobs; i += batch * step {
		p := ro.Pipeline()
		for k := i; k < min(i+batch*step, jobs); k += step {
			p.Do(context.Background(), "DELAY.GET", fmt.Sprintf("{w}q%d", k%queues), fmt.Sprintf("j%d", k))
		}
		cmds, err := p.Exec(ctxT(t, max(30*time.Second, op)))
		if err != nil {
			t.Fatalf("%v: reading the jobs back: %v", victim, err)
		}
		for _, cmd := range cmds {
			v, err := cmd.(*redis.Cmd).Result()
			id := cmd.Args()[2].(string)
			m, ok := v.([]any)
			if err != nil || !ok {
				t.Fatalf("%v: DELAY.GET %s: %s", victim, id, show(v, err))
			}
			f := fields(t, "DELAY.GET", m)
			if f["payload"] != "p"+id[1:] || f["state"] != "delayed" {
				t.Fatalf("%v: DELAY.GET %s: %v", victim, id, f)
			}
		}
	}

	newID := victim.myID(t)
	if newID == oldID {
		t.Fatalf("the wiped node kept its id %s", oldID)
	}
	for _, n := range cc.nodes {
		clWait(t, 10*time.Second, fmt.Sprintf("%v listing the new id in place of the old", n), func() (bool, string) {
			lines, err := n.nodesView()
			if err != nil {
				return false, err.Error()
			}
			ids := map[string]bool{}
			for _, l := range lines {
				ids[l.id] = true
			}
			return len(lines) == 3 && ids[newID] && !ids[oldID], fmt.Sprintf("CLUSTER NODES %v", lines)
		})
	}
	if got := victim.role(); got != "slave" {
		t.Errorf("%v: role %q, want slave", victim, got)
	}
	// One snapshot received (hashicorp/raft logs each when it is on disk,
	// before its restore), sent to the new id: the leader's replication to
	// the old id at the same address sent another, restored as well
	// (seconds at millions of jobs), and so could a leader whose log went
	// past the one sent while it was restored.
	if n := strings.Count(victim.Output(), "copied to local snapshot"); n != 1 {
		t.Errorf("the wiped follower received %d snapshots, want 1", n)
	}
	if out != "" {
		// Stopped here, with time for a capture under way to end, so its
		// profile is written (the harness kills it after 5 s).
		if _, ok := victim.Server.Stop(2 * time.Minute); !ok {
			t.Errorf("%v did not stop", victim)
		}
	}
}
