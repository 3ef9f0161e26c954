package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayd/delayd/internal/testserver"
)

// previousRelease is the release a rolling upgrade starts from: the last
// one (CHANGELOG.md), built from this checkout's git history.
const previousRelease, previousCommit = "0.2.0", "316f31d"

// A rolling upgrade from the previous release, as docs/operations.md says
// to do one: a 3-node cluster of 0.2.0 (one node of this binary joined it)
// under a producer, each follower in
// turn stopped with SIGTERM and started on this binary, then the leader
// (which hands over). Along the way, the rule's edges: while a node of the
// old release is still a member the cluster's version stays 2, so a new
// leader writes nothing an old follower cannot read (a failure reason and a
// dead letter's origin are left out; DELAY.PAUSE is refused); once every
// node runs this binary the version is raised to 3 and DELAY.PAUSE works;
// a node of the old release that asks to join then is refused with a
// message that says why; and a member started again on the old release is
// named by the leader, and catches up once back on this binary. Every add the cluster acknowledged is there at the
// end, and every job a worker's ACK removed is gone.
func TestUpgradeRollingFromPrevious(t *testing.T) {
	t.Parallel()
	oldBin := buildRelease(t, previousCommit)
	cc := &clCluster{t: t}
	first := upStart(t, cc, oldBin, "--cluster-bootstrap")
	cc.waitLeader(t, 20*time.Second, first)
	upStart(t, cc, oldBin, "--cluster-join", first.Addr())
	// A node of this binary may join a cluster of the old one: it reads
	// what the old leader writes, and raises nothing.
	joiner := upStart(t, cc, binPath, "--cluster-join", first.Addr())
	leader := cc.waitFormed(t, 30*time.Second)
	if v := leader.clusterInfo("delayd_node_version"); v != "" {
		t.Fatalf("the %s binary says delayd_node_version:%s: it is not the old release", previousRelease, v)
	}
	if v := joiner.clusterInfo("delayd_cluster_version"); v != "2" {
		t.Errorf("a new node in a %s cluster says delayd_cluster_version:%s, want 2", previousRelease, v)
	}

	var addrs []string
	for _, n := range cc.nodes {
		addrs = append(addrs, n.Addr())
	}
	rc := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: addrs, Protocol: 2, DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: time.Second,
		ClusterStateReloadInterval: 200 * time.Millisecond,
	})
	defer rc.Close()
	pr := startProducer(rc, "{up}q", 3600000)
	defer pr.stop()
	// And a queue that workers drain as they go: adds due at once, popped
	// with an ack timeout and acknowledged.
	work := startProducer(rc, "{up}w", 0, "ACKTIMEOUT", 5000)
	defer work.stop()
	wk := startWorkers(rc, "{up}w")
	defer wk.stop()
	pr.wait(t, 50)

	// Followers first: each comes back on this binary while the old
	// leader leads; the cluster's version stays 2 (an old leader raises
	// nothing).
	pre := map[*clNode]string{} // each node's directory as the old release left it
	for _, n := range cc.followers(leader) {
		pre[n] = keepDir(t, n)
		upgradeNode(t, n, binPath)
		pr.wait(t, pr.count()+50)
		if v := n.clusterInfo("delayd_cluster_version"); v != "2" {
			t.Errorf("%v upgraded under an old leader says delayd_cluster_version:%s, want 2", n, v)
		}
	}
	// The leader last: its SIGTERM hands over to an upgraded follower. It
	// comes back on the old binary first (a node not upgraded yet), so a new
	// leader has an old follower.
	stopNode(t, leader)
	next := cc.waitLeader(t, 15*time.Second, nil)
	leader.server.Restart()
	pr.wait(t, pr.count()+50)
	cc.waitCaughtUp(t, 20*time.Second, next, cc.nodes...)
	mixedProbe(t, cc, next, leader)

	// The last old node: its SIGTERM, this binary, and the version raised.
	pre[leader] = keepDir(t, leader)
	upgradeNode(t, leader, binPath)
	pr.wait(t, pr.count()+50)
	final := cc.waitLeader(t, 15*time.Second, nil)
	clWait(t, 15*time.Second, "the cluster's version raised to 3", func() (bool, string) {
		v := final.clusterInfo("delayd_cluster_version")
		return v == "3", "delayd_cluster_version:" + v
	})
	if _, err := final.do(final.client(), "DELAY.PAUSE", "{up}paused"); err != nil {
		t.Errorf("DELAY.PAUSE once every node runs this binary: %v", err)
	}

	// A node of the old release asking to join now is refused, and says so.
	stray := upStart(t, cc, oldBin, "--cluster-join", final.Addr())
	cc.nodes = cc.nodes[:len(cc.nodes)-1] // never a member
	if !stray.outputHas("upgrade it to delayd 0.3.0 or later before it joins", 15*time.Second) {
		t.Errorf("the old node asking to join did not log why it was refused:\n%s", stray.Output())
	}
	if lines, err := final.nodesView(); err != nil || len(lines) != 3 {
		t.Errorf("after the old node asked to join, CLUSTER NODES lists %d nodes (%v), want 3", len(lines), err)
	}
	stopNode(t, stray)

	// A member started again on the old binary after the version rose
	// (a rollback). On the directory this binary ran on, the old release
	// refuses to start: its raft.db is this release's marker, which bbolt
	// does not open, where an absent one would have been an empty log.
	back := cc.followers(final)[0]
	stopNode(t, back)
	newArgs := back.Server.Args
	back.Server.Bin = oldBin
	if i := slices.Index(newArgs, "--http-addr"); i >= 0 { // a flag the old release does not know
		back.Server.Args = slices.Delete(slices.Clone(newArgs), i, i+2)
	}
	_ = back.server.Start()
	if !back.outputHas("invalid database", 10*time.Second) {
		t.Errorf("the %s binary on a directory this release ran on did not refuse it:\n%s", previousRelease, back.Output())
	}
	clWait(t, 10*time.Second, "the old binary to exit", func() (bool, string) { return !back.Running(), "running" })
	// On its directory from before the upgrade (the copy
	// docs/operations.md says to keep) it starts, and the leader names it,
	// since it cannot read the log; back on this binary and its own
	// directory, it catches up from its Raft log.
	oldArgs := slices.Clone(back.Server.Args)
	oldArgs[slices.Index(oldArgs, "--dir")+1] = pre[back]
	back.Server.Args = oldArgs
	back.server.Restart()
	if !final.outputHas("a member runs an older delayd than the cluster's version", 20*time.Second) {
		t.Errorf("the leader did not name a member back on %s:\n%s", previousRelease, final.Output())
	}
	stopNode(t, back)
	back.Server.Bin, back.Server.Args = binPath, newArgs
	mark := len(back.Output()) // what the old binary said of the log is expected
	back.server.Restart()
	cc.waitCaughtUp(t, 20*time.Second, final, back)

	acked := pr.stop()
	added := work.stop()
	done, unsure := wk.stop()
	final = cc.waitLeader(t, 15*time.Second, nil)
	cc.waitCaughtUp(t, 20*time.Second, final, cc.nodes...)
	present := func(key string, ids []string) []bool {
		pipe := final.client().Pipeline()
		gets := make([]*redis.Cmd, len(ids))
		for i, id := range ids {
			gets[i] = pipe.Do(context.Background(), "DELAY.GET", key, id)
		}
		if _, err := pipe.Exec(ctxT(t, 30*time.Second)); err != nil && !errors.Is(err, redis.Nil) {
			t.Fatalf("DELAY.GET of %d jobs of %s: %v", len(ids), key, err)
		}
		out := make([]bool, len(ids))
		for i, g := range gets {
			v, err := g.Result()
			out[i] = err == nil && v != nil
		}
		return out
	}
	missing := 0
	for i, ok := range present("{up}q", acked) {
		if !ok {
			if missing++; missing <= 5 {
				t.Errorf("acknowledged add %s is not in the cluster after the upgrade", acked[i])
			}
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged adds lost across the rolling upgrade", missing, len(acked))
	}
	// The workers' queue: a job whose ACK was answered 1 is gone; every
	// other acknowledged add is there, ready or reserved (an ACK that got
	// no answer may or may not have been applied: not asked).
	isDone := map[string]bool{}
	for _, id := range done {
		isDone[id] = true
	}
	var left []string
	for _, id := range added {
		if !isDone[id] && !unsure[id] {
			left = append(left, id)
		}
	}
	for i, ok := range present("{up}w", done) {
		if ok {
			t.Errorf("job %s, acknowledged by a worker (ACK answered 1), is back after the upgrade", done[i])
		}
	}
	for i, ok := range present("{up}w", left) {
		if !ok {
			t.Errorf("job %s, added and never acknowledged by a worker, is gone after the upgrade", left[i])
		}
	}
	if len(done) < 50 {
		t.Errorf("the workers acknowledged %d jobs across the upgrade: too few to say anything", len(done))
	}
	for _, n := range cc.nodes {
		out := n.Output()
		if n == back {
			out = out[mark:]
		}
		if strings.Contains(out, "did not apply") {
			t.Errorf("%v failed to apply a committed entry:\n%s", n, out)
		}
	}
	t.Logf("%d acknowledged adds across the rolling upgrade from %s, all present; workers' queue: %d added, %d acknowledged by workers (gone), %d left (there), %d ACKs unanswered",
		len(acked), previousRelease, len(added), len(done), len(left), len(unsure))
}

// mixedProbe checks a new leader with a follower of the old release: what
// the old follower cannot read is refused or left out, and what it gets
// it applies.
func mixedProbe(t *testing.T, cc *clCluster, leader, old *clNode) {
	t.Helper()
	if leader == old || leader.clusterInfo("delayd_node_version") != "3" {
		t.Fatalf("want a leader of this binary, have %v (the old node is %v)", leader, old)
	}
	if v := leader.clusterInfo("delayd_cluster_version"); v != "2" {
		t.Fatalf("a new leader with a live %s follower says delayd_cluster_version:%s, want 2", previousRelease, v)
	}
	c := leader.client()
	_, err := leader.do(c, "DELAY.PAUSE", "{up}q")
	if err == nil || !strings.Contains(err.Error(), "not every node of the cluster runs a delayd that reads it yet") {
		t.Errorf("DELAY.PAUSE with an old follower: %v, want the version gate's refusal", err)
	}
	// A failure reason (a move record's tail) and a dead letter's origin
	// (an add record's tail): the old follower gets both jobs, without.
	chain(t, c,
		cmd("m1", "DELAY.ADD", "{up}m1", 0, "p-m1", "ID", "m1", "ACKTIMEOUT", 60000),
		cmd("m2", "DELAY.ADD", "{up}m2", 0, "p-m2", "ID", "m2", "ACKTIMEOUT", 60000, "RETRY", 1, "DEADLETTER", "{up}dead"),
		cmd([]any{"{up}m1", "m1", "p-m1"}, "DELAY.POP", "{up}m1", 1),
		cmd(int64(1), "DELAY.NACK", "{up}m1", "m1", "ERROR", "try later"),
		cmd([]any{"{up}m2", "m2", "p-m2"}, "DELAY.POP", "{up}m2", 1),
		cmd(int64(1), "DELAY.NACK", "{up}m2", "m2", "ERROR", "boom"),
		cmd([]any{"{up}m2", "m2", "p-m2"}, "DELAY.POP", "{up}m2", 1),
		cmd(int64(1), "DELAY.NACK", "{up}m2", "m2", "ERROR", "boom again"),
	)
	// The leader keeps what it was told (until a rebuild).
	if got, err := clGet(leader, c, "{up}dead", "m2"); err != nil || got["error"] != "boom again" || got["origin"] != "{up}m2" {
		t.Errorf("the new leader's dead letter m2: %v %v, want its reason and origin", got, err)
	}
	cc.waitCaughtUp(t, 20*time.Second, leader, old)
	ro := old.roClient()
	for _, w := range []struct{ key, id, state, deliveries string }{
		{"{up}m1", "m1", "ready", "1"}, {"{up}dead", "m2", "ready", "2"},
	} {
		got, err := clGet(old, ro, w.key, w.id)
		if err != nil || got == nil || got["state"] != w.state || got["deliveries"] != w.deliveries {
			t.Errorf("the %s follower's copy of %s %s: %v %v, want %s with %s deliveries", previousRelease, w.key, w.id, got, err, w.state, w.deliveries)
		}
	}
	if strings.Contains(old.Output(), "did not apply") {
		t.Errorf("the %s follower could not apply what the new leader wrote:\n%s", previousRelease, old.Output())
	}
}

// upStart starts one more node of cc on bin (the old release's flags: it
// knows no --http-addr), with how (bootstrap or join).
func upStart(t *testing.T, cc *clCluster, bin string, how ...string) *clNode {
	t.Helper()
	n := &clNode{cc: cc, idx: len(cc.nodes), dir: t.TempDir()}
	cc.nodes = append(cc.nodes, n)
	var bus int
	s, err := testserver.StartFresh(ports, 2, func(p []int) *server {
		bus = p[1]
		s := newServer(t, p[0], nil, upArgs(n.dir, p[0], bus, how...)...)
		s.Bin = bin
		return s
	})
	if err != nil {
		t.Fatalf("node %d (%s) did not start: %v", n.idx, bin, err)
	}
	n.setServer(t, s, bus)
	return n
}

func upArgs(dir string, port, bus int, how ...string) []string {
	args := []string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir, "--log-level", "info", "--log-format", "json"}
	args = append(args, testserver.ClusterFlags(bus)...)
	return append(args, how...)
}

// upgradeNode stops n with SIGTERM and starts it on bin, with the same
// directory, ports and flags (and --http-addr off, which only this binary
// knows).
func upgradeNode(t *testing.T, n *clNode, bin string) {
	t.Helper()
	stopNode(t, n)
	n.Server.Bin = bin
	if !slices.Contains(n.Server.Args, "--http-addr") {
		n.Server.Args = append(n.Server.Args, "--http-addr", "")
	}
	n.server.Restart()
	t.Logf("%v runs %s now", n, bin)
}

// keepDir stops n with SIGTERM and copies its data directory, for a
// rollback later.
func keepDir(t *testing.T, n *clNode) string {
	t.Helper()
	stopNode(t, n)
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(n.dir)); err != nil {
		t.Fatalf("copy of %v's directory: %v", n, err)
	}
	return dst
}

func stopNode(t *testing.T, n *clNode) {
	t.Helper()
	if code, ok := n.Server.Stop(10 * time.Second); !ok || code != 0 {
		t.Fatalf("%v: SIGTERM did not stop it cleanly (exit %d)\n%s", n, code, n.Output())
	}
}

// producer adds jobs with ids w.0, w.1, ... to one queue from a few
// writers w through a cluster client, and keeps the ids the cluster
// acknowledged.
type producer struct {
	mu    sync.Mutex
	acked []string
	stopc context.CancelFunc
	wg    sync.WaitGroup
}

const producerWriters = 4

func startProducer(rc *redis.ClusterClient, key string, delay int64, opts ...any) *producer {
	ctx, cancel := context.WithCancel(context.Background())
	p := &producer{stopc: cancel}
	for w := range producerWriters {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				id := strconv.Itoa(w) + "." + strconv.Itoa(i)
				cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				err := rc.Do(cctx, append([]any{"DELAY.ADD", key, delay, "p", "ID", id}, opts...)...).Err()
				cancel()
				if err != nil {
					time.Sleep(10 * time.Millisecond) // not acknowledged: in or not, nothing is asked of it
					continue
				}
				p.mu.Lock()
				p.acked = append(p.acked, id)
				p.mu.Unlock()
			}
		}()
	}
	return p
}

func (p *producer) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked)
}

// wait waits until n adds were acknowledged: the cluster takes writes.
func (p *producer) wait(t *testing.T, n int) {
	t.Helper()
	clWait(t, 20*time.Second, fmt.Sprintf("%d acknowledged adds", n), func() (bool, string) {
		c := p.count()
		return c >= n, fmt.Sprintf("%d acknowledged", c)
	})
}

// workers pop jobs of one queue through a cluster client and ACK them,
// keeping the ids whose ACK was answered 1 (done) and those whose ACK got
// no answer (unsure: applied or not).
type workers struct {
	mu     sync.Mutex
	done   []string
	unsure map[string]bool
	stopc  context.CancelFunc
	wg     sync.WaitGroup
}

func startWorkers(rc *redis.ClusterClient, key string) *workers {
	ctx, cancel := context.WithCancel(context.Background())
	w := &workers{stopc: cancel, unsure: map[string]bool{}}
	for range 2 {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for ctx.Err() == nil {
				cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				v, err := rc.Do(cctx, "DELAY.POP", key, 1).Slice()
				cancel()
				if err != nil || len(v) != 3 {
					if err != nil && !errors.Is(err, redis.Nil) {
						time.Sleep(10 * time.Millisecond)
					}
					continue
				}
				id, _ := v[1].(string)
				cctx, cancel = context.WithTimeout(ctx, 3*time.Second)
				n, err := rc.Do(cctx, "DELAY.ACK", key, id).Int()
				cancel()
				w.mu.Lock()
				switch {
				case err == nil && n == 1:
					w.done = append(w.done, id)
				case err != nil:
					w.unsure[id] = true
				}
				w.mu.Unlock()
			}
		}()
	}
	return w
}

func (w *workers) stop() (done []string, unsure map[string]bool) {
	w.stopc()
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.done...), w.unsure
}

// stop stops the producer and returns the ids acknowledged.
func (p *producer) stop() []string {
	p.stopc()
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.acked...)
}

// buildRelease builds delayd as it was at commit, from this checkout's git
// history (git archive into a temp dir, then go build, which needs the
// module cache or proxy as any build does), once per machine: the binary
// is kept by commit in os.TempDir(). The test is skipped only outside a git
// checkout; a checkout without the commit (a shallow clone) fails, saying
// so.
func buildRelease(t *testing.T, commit string) string {
	t.Helper()
	root, err := testserver.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("git", "-C", root, "rev-parse", "--git-dir").CombinedOutput(); err != nil {
		t.Skipf("not a git checkout (git rev-parse: %v %s): the upgrade test builds the previous release from git history", err, bytes.TrimSpace(out))
	}
	full, err := exec.Command("git", "-C", root, "rev-parse", "--verify", commit+"^{commit}").Output()
	if err != nil {
		t.Fatalf("commit %s (release %s) is not in this checkout's history: fetch all of it (git fetch --unshallow; CI: fetch-depth 0)", commit, previousRelease)
	}
	dir := filepath.Join(os.TempDir(), "delayd-release-"+strings.TrimSpace(string(full)))
	bin := filepath.Join(dir, "delayd")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	src := t.TempDir()
	// git archive, not a worktree: nothing is registered in the
	// repository, so a test killed half way leaves nothing behind in it.
	sh := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", root, commit, src)
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", commit, err, out)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := fmt.Sprintf("%s.%d", bin, os.Getpid())
	build := exec.Command("go", "build", "-o", tmp, ".")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building release %s (%s): %v\n%s", previousRelease, commit, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil { // whole, or not there: a parallel run builds its own
		t.Fatal(err)
	}
	return bin
}
