package integration

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Moving slots between Raft groups (docs/decisions/slot-moves.md): the slot
// map is group 0's log's, CLUSTER SETSLOT changes it, and every address of
// every node routes by it.
//
//	go test -count=1 -run 'TestClusterSlotMoves' -v ./integration_test/

// grOwners reads CLUSTER NODES at addr: each slot range's master address
// ("0-99" -> "127.0.0.1:7100"), every range of every master.
func grOwners(addr string) (map[string]string, error) {
	v, err := grAsk(addr, "CLUSTER", "NODES")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(fmt.Sprint(v)), "\n") {
		f := strings.Fields(l)
		if len(f) < 9 || !strings.Contains(f[2], "master") || strings.Contains(f[2], "fail") {
			continue
		}
		a, _, _ := strings.Cut(f[1], "@")
		for _, r := range f[8:] {
			if !strings.HasPrefix(r, "[") {
				out[r] = a
			}
		}
	}
	return out, nil
}

// slotWant is want (slot range -> group) with slot given to group g.
func slotWant(want map[string]int, slot, g int) map[string]int {
	var owner [16384]int
	for r, grp := range want {
		lo, hi, ok := strings.Cut(r, "-")
		if !ok {
			hi = lo
		}
		a, _ := strconv.Atoi(lo)
		b, _ := strconv.Atoi(hi)
		for s := a; s <= b; s++ {
			owner[s] = grp
		}
	}
	owner[slot] = g
	out := map[string]int{}
	for s := 0; s < len(owner); {
		e := s
		for e+1 < len(owner) && owner[e+1] == owner[s] {
			e++
		}
		r := strconv.Itoa(s)
		if e > s {
			r += "-" + strconv.Itoa(e)
		}
		out[r] = owner[s]
		s = e + 1
	}
	return out
}

// grKeyIn finds a key whose slot is in [lo, hi].
func grKeyIn(t *testing.T, addr string, lo, hi int, prefix string) (string, int) {
	t.Helper()
	for i := 0; ; i++ {
		k := prefix + strconv.Itoa(i)
		v, err := grAsk(addr, "CLUSTER", "KEYSLOT", k)
		if err != nil {
			t.Fatal(err)
		}
		if s := int(v.(int64)); s >= lo && s <= hi {
			return k, s
		}
	}
}

func TestClusterSlotMoves(t *testing.T) {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("no redis-cli")
	}
	t.Parallel()
	nodes := grCluster(t)
	id := func(n *grNode, g int) string {
		v, err := grAsk(n.addr(g), "CLUSTER", "MYID")
		if err != nil {
			t.Fatal(err)
		}
		return v.(string)
	}
	// Each range's group (its master's address, whichever node leads it).
	want := map[string]int{"0-99": 1, "100-5460": 0, "5461-10921": 1, "10922-16383": 2}
	groupOf := func(addr string) int {
		for _, n := range nodes {
			for g := 0; g < grCount; g++ {
				if n.addr(g) == addr {
					return g
				}
			}
		}
		return -1
	}
	agreed := func(what string) {
		t.Helper()
		for _, n := range nodes {
			for g := 0; g < grCount; g++ {
				addr := n.addr(g)
				clWait(t, 15*time.Second, what, func() (bool, string) {
					m, err := grOwners(addr)
					got := map[string]int{}
					for r, a := range m {
						got[r] = groupOf(a)
					}
					return err == nil && fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprint(addr, ": ", m, err)
				})
			}
		}
	}

	// A worker blocked on an empty queue of a slot that moves follows the
	// slot: MOVED, as Redis redirects it (there is nothing to MIGRATE).
	wq, wslot := grKeyIn(t, nodes[0].addr(0), 0, 99, "w")
	blocked := make(chan error, 1)
	go func() {
		c := redis.NewClient(&redis.Options{Addr: nodes[0].addr(0), Protocol: 2, MaxRetries: -1, ReadTimeout: time.Minute})
		defer c.Close()
		blocked <- c.Do(ctxT(t, time.Minute), "DELAY.POP", wq, 0).Err()
	}()
	clWait(t, 5*time.Second, "the worker blocked", func() (bool, string) {
		v, err := grAsk(nodes[0].addr(0), "CLIENT", "LIST")
		return err == nil && strings.Contains(fmt.Sprint(v), "cmd=delay.pop"), fmt.Sprint(v, err)
	})

	// redis-cli moves 100 empty slots from group 0 to group 1, as it
	// moves them between Redis masters: IMPORTING, MIGRATING, no keys to
	// MIGRATE, then NODE at the target, the source and every master.
	out, err := exec.Command("redis-cli", "--cluster", "reshard", nodes[2].addr(0),
		"--cluster-from", id(nodes[0], 0), "--cluster-to", id(nodes[1], 1),
		"--cluster-slots", "100", "--cluster-yes").CombinedOutput()
	if err != nil || strings.Contains(string(out), "[ERR]") {
		t.Fatalf("redis-cli --cluster reshard: %v\n%s", err, out)
	}
	agreed("every address routes slots 0-99 to group 1")
	select {
	case err := <-blocked:
		if want := fmt.Sprintf("MOVED %d %s", wslot, nodes[1].addr(1)); err == nil || err.Error() != want {
			t.Errorf("the blocked worker got %v, want %s", err, want)
		}
	case <-time.After(10 * time.Second):
		t.Error("the blocked worker was not sent after its slot")
	}
	clWait(t, 15*time.Second, "redis-cli --cluster check clean", func() (bool, string) {
		out, err := exec.Command("redis-cli", "--cluster", "check", nodes[1].addr(2)).CombinedOutput()
		s := string(out)
		return err == nil && strings.Contains(s, "[OK] All nodes agree about slots configuration.") &&
			strings.Contains(s, "[OK] All 16384 slots covered.") && !strings.Contains(s, "[ERR]") &&
			!strings.Contains(s, "[WARNING]"), s
	})

	// A client follows: a key of slot 0-99 is group 1's now.
	k, slot := grKeyIn(t, nodes[0].addr(0), 0, 99, "m")
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{nodes[0].addr(0)}, Protocol: 2})
	defer rc.Close()
	ctx := ctxT(t, 30*time.Second)
	if err := rc.Do(ctx, "DELAY.ADD", k, 0, "p", "ID", "j1").Err(); err != nil {
		t.Fatalf("DELAY.ADD %s: %v", k, err)
	}
	if _, err := grAsk(nodes[1].addr(1), "DELAY.GET", k, "j1"); err != nil {
		t.Errorf("the job is not in group 1: %v", err)
	}
	if _, err := grAsk(nodes[0].addr(0), "DELAY.GET", k, "j1"); err == nil || !strings.HasPrefix(err.Error(), fmt.Sprintf("MOVED %d %s", slot, nodes[1].addr(1))) {
		t.Errorf("group 0's leader on slot %d: %v, want MOVED to group 1", slot, err)
	}

	// The slot migrates to group 2: a queue still in group 1 is served
	// there, a missing one is sent to group 2 with ASK, which takes it
	// only after ASKING.
	if _, err := grAsk(nodes[2].addr(2), "CLUSTER", "SETSLOT", slot, "IMPORTING", id(nodes[1], 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := grAsk(nodes[1].addr(1), "CLUSTER", "SETSLOT", slot, "MIGRATING", id(nodes[2], 2)); err != nil {
		t.Fatal(err)
	}
	other := "{" + k + "}other"
	if _, err := grAsk(nodes[1].addr(1), "DELAY.GET", k, "j1"); err != nil {
		t.Errorf("a queue still in the migrating group: %v", err)
	}
	if _, err := grAsk(nodes[1].addr(1), "LLEN", other); err == nil || err.Error() != fmt.Sprintf("ASK %d %s", slot, nodes[2].addr(2)) {
		t.Errorf("a missing queue of a migrating slot: %v, want ASK to group 2", err)
	}
	if _, err := grAsk(nodes[2].addr(2), "RPUSH", other, "x"); err == nil || !strings.HasPrefix(err.Error(), "MOVED ") {
		t.Errorf("the importing group without ASKING: %v, want MOVED", err)
	}
	c := redis.NewClient(&redis.Options{Addr: nodes[2].addr(2), Protocol: 2})
	defer c.Close()
	pipe := c.Pipeline()
	pipe.Do(ctx, "ASKING")
	push := pipe.Do(ctx, "RPUSH", other, "x")
	if _, err := pipe.Exec(ctx); err != nil || push.Val() != int64(1) {
		t.Errorf("ASKING then RPUSH at the importing group: %v %v", push.Val(), err)
	}
	// go-redis follows the ASK.
	if n, err := rc.Do(ctx, "LLEN", other).Int(); err != nil || n != 1 {
		t.Errorf("ClusterClient LLEN %s during the move: %d %v", other, n, err)
	}
	// Group 1 still holds a queue of the slot: NODE elsewhere is refused.
	if _, err := grAsk(nodes[1].addr(1), "CLUSTER", "SETSLOT", slot, "NODE", id(nodes[2], 2)); err == nil || !strings.Contains(err.Error(), "still hold keys") {
		t.Errorf("SETSLOT NODE away from a group holding keys: %v", err)
	}
	pipe = c.Pipeline()
	pipe.Do(ctx, "ASKING")
	pipe.Do(ctx, "DEL", other)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for g := 1; g <= 2; g++ {
		if _, err := grAsk(nodes[g].addr(g), "CLUSTER", "SETSLOT", slot, "STABLE"); err != nil {
			t.Fatal(err)
		}
	}
	agreed("the map after STABLE")

	// A move cut short (the slot open at both ends, its queue still in
	// group 1) is finished by redis-cli --cluster fix.
	if _, err := grAsk(nodes[2].addr(2), "CLUSTER", "SETSLOT", slot, "IMPORTING", id(nodes[1], 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := grAsk(nodes[1].addr(1), "CLUSTER", "SETSLOT", slot, "MIGRATING", id(nodes[2], 2)); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command("redis-cli", "--cluster", "fix", nodes[0].addr(0), "--cluster-yes").CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("Fixing open slot %d", slot)) {
		t.Fatalf("redis-cli --cluster fix: %v\n%s", err, out) // full output
	}
	want = slotWant(want, slot, 2)
	agreed("the map after fix")
	if _, err := grAsk(nodes[2].addr(2), "DELAY.GET", k, "j1"); err != nil {
		t.Errorf("the job after fix: %v", err)
	}
	if v, err := grAsk(nodes[1].addr(1), "CLUSTER", "COUNTKEYSINSLOT", slot); err != nil || v.(int64) != 0 {
		t.Errorf("group 1 after fix: %v queues in slot %d, %v", v, slot, err)
	}

	// A node restarted reads the map back from its log.
	nodes[2].Kill9()
	if err := nodes[2].Server.Start(); err != nil {
		t.Fatalf("restart: %v", err)
	}
	agreed("the restarted node's map")
}

// grScan lists a queue's jobs at addr (DELAY.SCAN): id -> "state due
// deliveries ack_deadline".
func grScan(t *testing.T, addr, q string) map[string]string {
	t.Helper()
	out := map[string]string{}
	cursor := "0"
	for {
		v, err := grAsk(addr, "DELAY.SCAN", q, cursor, "COUNT", 1000)
		if err != nil {
			t.Fatalf("DELAY.SCAN %s at %s: %v", q, addr, err)
		}
		page := v.([]any)
		for _, j := range page[1].([]any) {
			f := j.([]any)
			m := map[string]string{}
			for i := 0; i+1 < len(f); i += 2 {
				m[fmt.Sprint(f[i])] = fmt.Sprint(f[i+1])
			}
			if _, dup := out[m["id"]]; dup {
				t.Errorf("%s: job %s listed twice", q, m["id"])
			}
			out[m["id"]] = m["state"] + " " + m["due"] + " " + m["deliveries"] + " " + m["ack_deadline"]
		}
		if cursor = fmt.Sprint(page[0]); cursor == "0" {
			return out
		}
	}
}

// redis-cli --cluster reshard moves slots holding queues: every job
// arrives in the target group once, in its state with its times, none is
// left in the source, and a ClusterClient adding meanwhile loses nothing.
func TestClusterReshardMovesJobs(t *testing.T) {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("no redis-cli")
	}
	t.Parallel()
	nodes := grCluster(t)
	id := func(n *grNode, g int) string {
		v, err := grAsk(n.addr(g), "CLUSTER", "MYID")
		if err != nil {
			t.Fatal(err)
		}
		return v.(string)
	}
	src, dst := nodes[0].addr(0), nodes[1].addr(1)
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{nodes[2].addr(0)}, Protocol: 2, MaxRedirects: 16})
	defer rc.Close()
	ctx := ctxT(t, 120*time.Second)
	// Queues in slots 0-199, each with ready, delayed and reserved jobs.
	var queues []string
	for i := 0; len(queues) < 12; i++ {
		k, _ := grKeyIn(t, src, 0, 199, "rq"+strconv.Itoa(i)+"-")
		queues = append(queues, k)
	}
	for _, q := range queues {
		for i := 0; i < 20; i++ {
			delay := 0
			if i%2 == 1 {
				delay = 3_600_000 + i
			}
			if err := rc.Do(ctx, "DELAY.ADD", q, delay, "p", "ID", fmt.Sprint("j", i)).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := rc.Do(ctx, "DELAY.POP", q, 0).Err(); err != nil { // j0 reserved
			t.Fatal(err)
		}
	}
	// A queue with a schedule and a limit and no job moves too.
	schedQ, _ := grKeyIn(t, src, 0, 199, "sched-")
	if err := rc.Do(ctx, "DELAY.SCHEDULE", schedQ, "hourly", "EVERY", 3_600_000, "tick").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.Do(ctx, "DELAY.LIMIT", schedQ, "CONCURRENCY", 4).Err(); err != nil {
		t.Fatal(err)
	}
	before := map[string]map[string]string{}
	for _, q := range queues {
		before[q] = grScan(t, src, q)
	}
	// A worker blocked on a queue that moves (only delayed jobs in it) is
	// told to try again (TRYAGAIN) while the MIGRATE runs, and its retry
	// is sent after the queue (ASK, or MOVED once the slot is the
	// target's), as go-redis's cluster client retries.
	blockedQ, _ := grKeyIn(t, src, 0, 199, "blocked-")
	if err := rc.Do(ctx, "DELAY.ADD", blockedQ, 3_600_000, "later").Err(); err != nil {
		t.Fatal(err)
	}
	blocked := make(chan error, 1)
	go func() {
		c := redis.NewClient(&redis.Options{Addr: src, Protocol: 2, MaxRetries: -1, ReadTimeout: time.Minute})
		defer c.Close()
		for {
			err := c.Do(ctx, "DELAY.POP", blockedQ, 0).Err()
			if err == nil || !strings.HasPrefix(err.Error(), "TRYAGAIN") {
				blocked <- err
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	clWait(t, 5*time.Second, "the worker blocked", func() (bool, string) {
		v, err := grAsk(src, "CLIENT", "LIST")
		return err == nil && strings.Contains(fmt.Sprint(v), "cmd=delay.pop"), fmt.Sprint(v, err)
	})
	// A producer adds to a queue of a moving slot all along.
	live, _ := grKeyIn(t, src, 0, 199, "live-")
	stop, done := make(chan struct{}), make(chan int)
	go func() {
		n := 0
		defer func() { done <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for try := 0; ; try++ {
				err := rc.Do(ctx, "DELAY.ADD", live, 3_600_000, "x", "ID", fmt.Sprint("l", n)).Err()
				if err == nil {
					break
				}
				if try == 50 {
					t.Errorf("DELAY.ADD %s l%d through the move: %v", live, n, err)
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
			n++
		}
	}()
	began := time.Now()
	out, err := exec.Command("redis-cli", "--cluster", "reshard", nodes[2].addr(1),
		"--cluster-from", id(nodes[0], 0), "--cluster-to", id(nodes[1], 1),
		"--cluster-slots", "200", "--cluster-yes", "--cluster-pipeline", "5").CombinedOutput()
	took := time.Since(began)
	close(stop)
	added := <-done
	if err != nil || strings.Contains(string(out), "[ERR]") {
		t.Fatalf("redis-cli --cluster reshard: %v\n%s", err, out)
	}
	clWait(t, 15*time.Second, "redis-cli --cluster check clean", func() (bool, string) {
		out, err := exec.Command("redis-cli", "--cluster", "check", nodes[2].addr(2)).CombinedOutput()
		s := string(out)
		return err == nil && strings.Contains(s, "[OK] All nodes agree about slots configuration.") &&
			strings.Contains(s, "[OK] All 16384 slots covered.") && !strings.Contains(s, "[ERR]") &&
			!strings.Contains(s, "[WARNING]"), s
	})
	select {
	case err := <-blocked:
		if err == nil || !(strings.HasPrefix(err.Error(), "ASK ") || strings.HasPrefix(err.Error(), "MOVED ")) || !strings.HasSuffix(err.Error(), " "+dst) {
			t.Errorf("the blocked worker got %v, want ASK or MOVED to %s", err, dst)
		}
	case <-time.After(10 * time.Second):
		t.Error("the blocked worker was not sent after its queue")
	}
	for _, q := range queues {
		if got := grScan(t, dst, q); fmt.Sprint(got) != fmt.Sprint(before[q]) {
			t.Errorf("%s in the target group:\n%v\nwas\n%v", q, got, before[q])
		}
	}
	if v, err := grAsk(dst, "DELAY.SCHEDULES", schedQ); err != nil || !strings.Contains(fmt.Sprint(v), "hourly") {
		t.Errorf("the schedule in the target group: %v %v", v, err)
	}
	if v, err := grAsk(dst, "DELAY.LIMIT", schedQ); err != nil || !strings.Contains(fmt.Sprint(v), "concurrency 4") {
		t.Errorf("the limit in the target group: %v %v", v, err)
	}
	// Nothing is left in the source group: its engine holds no queue of
	// the slots (COUNTKEYSINSLOT counts this address's own queues, with a
	// schedule or a limit too).
	for s := 0; s < 200; s++ {
		if v, err := grAsk(src, "CLUSTER", "COUNTKEYSINSLOT", s); err != nil || v.(int64) != 0 {
			t.Fatalf("slot %d in the source group: %v %v", s, v, err)
		}
	}
	// Every job the producer was told was added is there, once.
	got := grScan(t, dst, live)
	for i := 0; i < added; i++ {
		if _, ok := got[fmt.Sprint("l", i)]; !ok {
			t.Errorf("l%d, added during the move, is missing", i)
		}
	}
	if len(got) < added || len(got) > added+1 { // the add in flight at the stop may have landed
		t.Errorf("%d jobs in %s, %d added", len(got), live, added)
	}
	t.Logf("%d slots, %d queues (%d jobs) moved in %v; the producer added %d jobs meanwhile", 200, len(queues)+3, len(queues)*20+1+len(got), took.Round(time.Millisecond), added)

	// A move that stopped between the target's commit and the source's
	// drop (what a crash of the source's leader leaves): the target holds
	// a copy, the source goes on serving the queue. redis-cli --cluster
	// fix finishes it: every job once, at the target, none left behind.
	cq, cslot := grKeyIn(t, src, 200, 5460, "crash-")
	for i := 0; i < 10; i++ {
		if err := rc.Do(ctx, "DELAY.ADD", cq, (i%2)*3_600_000, "c", "ID", fmt.Sprint("c", i)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := grAsk(dst, "CLUSTER", "SETSLOT", cslot, "IMPORTING", id(nodes[0], 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := grAsk(src, "CLUSTER", "SETSLOT", cslot, "MIGRATING", id(nodes[1], 1)); err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(dst, ":")
	if v, err := grAsk(src, "MIGRATE", host, port, "", 0, 5000, "COPY", "KEYS", cq); err != nil || v != "OK" {
		t.Fatalf("MIGRATE COPY: %v %v", v, err)
	}
	if _, err := grAsk(src, "DELAY.ADD", cq, 0, "late", "ID", "after-copy"); err != nil {
		t.Fatalf("the source serves its queue after the copy: %v", err)
	}
	want := grScan(t, src, cq)
	out, err = exec.Command("redis-cli", "--cluster", "fix", nodes[2].addr(0), "--cluster-yes").CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster fix: %v\n%s", err, out)
	}
	// redis-cli gives the slot to the group holding most of its queues
	// (here one each: either), then moves the other's there.
	owner, other := src, dst
	if _, err := grAsk(src, "DELAY.GET", cq, "c0"); err != nil {
		if !strings.HasPrefix(err.Error(), fmt.Sprintf("MOVED %d %s", cslot, dst)) {
			t.Fatalf("after fix, slot %d at the source: %v", cslot, err)
		}
		owner, other = dst, src
	}
	if got := grScan(t, owner, cq); len(got) != 11 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after fix, %s at its owner %s:\n%v\nthe source had\n%v", cq, owner, got, want)
	}
	if v, err := grAsk(other, "CLUSTER", "COUNTKEYSINSLOT", cslot); err != nil || v.(int64) != 0 {
		t.Errorf("after fix, %s holds %v queues of slot %d: %v", other, v, cslot, err)
	}
	clWait(t, 15*time.Second, "redis-cli --cluster check clean after fix", func() (bool, string) {
		out, err := exec.Command("redis-cli", "--cluster", "check", owner).CombinedOutput()
		s := string(out)
		return err == nil && !strings.Contains(s, "[ERR]") && !strings.Contains(s, "[WARNING]"), s
	})

	// rebalance moves slots back to even shares, the queues with them.
	out, err = exec.Command("redis-cli", "--cluster", "rebalance", nodes[2].addr(2), "--cluster-threshold", "1").CombinedOutput()
	if err != nil || strings.Contains(string(out), "[ERR]") || !strings.Contains(string(out), "Moving") {
		t.Fatalf("redis-cli --cluster rebalance: %v\n%s", err, out)
	}
	clWait(t, 15*time.Second, "redis-cli --cluster check clean after rebalance", func() (bool, string) {
		out, err := exec.Command("redis-cli", "--cluster", "check", owner).CombinedOutput()
		s := string(out)
		return err == nil && !strings.Contains(s, "[ERR]") && !strings.Contains(s, "[WARNING]"), s
	})
	total := 0
	for _, n := range nodes {
		for g := 0; g < grCount; g++ {
			if v, err := grAsk(n.addr(g), "INFO", "replication"); err != nil || !strings.Contains(fmt.Sprint(v), "role:master") {
				continue
			}
			for _, q := range append(append([]string{live, cq}, queues...), blockedQ) {
				if _, err := grAsk(n.addr(g), "DELAY.SCAN", q, 0, "COUNT", 1); err == nil {
					total += len(grScan(t, n.addr(g), q))
				}
			}
		}
	}
	if want := len(queues)*20 + len(got) + 11 + 1; total != want {
		t.Errorf("after rebalance, %d jobs in the queues, want %d", total, want)
	}
	t.Logf("rebalance:\n%s", lastLines(string(out), 3))
}

// lastLines is s's last n lines.
func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}
