package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayd/delayd/backup"
)

// Backup and restore with the real binary: BGSAVE, SYNC (redis-cli --rdb and
// delayd backup), delayd check-backup and delayd restore, single node and a
// 3-node cluster under load restored into a new cluster.

// delaydCLI runs the delayd binary with args (a subcommand) and returns its
// output and exit status.
func delaydCLI(t testing.TB, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binPath, args...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	case err != nil:
		t.Fatalf("delayd %s: %v", strings.Join(args, " "), err)
	}
	return string(out), 0
}

// bkState is what a client sees of a server's state, command by command:
// DELAY.GET of every job named, DELAY.SCHEDULES, DELAY.LIMIT and the state
// fields of DELAY.STATS (its counters are statistics, not state: a restart
// zeroes them too).
func bkState(t testing.TB, c *redis.Client, jobs map[string][]string, names []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for q, ids := range jobs {
		for _, id := range ids {
			v, err := c.Do(ctxT(t, 5*time.Second), "DELAY.GET", q, id).Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				t.Fatalf("DELAY.GET %s %s: %v", q, id, err)
			}
			out["get "+q+" "+id] = showValue(v)
		}
	}
	out["schedules"] = showValue(do(t, c, "DELAY.SCHEDULES"))
	for _, q := range names {
		if lim, err := c.Do(ctxT(t, 5*time.Second), "DELAY.LIMIT", q).Result(); !errors.Is(err, redis.Nil) {
			out["limit "+q] = showValue(lim)
		}
		st := fields(t, "DELAY.STATS", do(t, c, "DELAY.STATS", q))
		out["stats "+q] = fmt.Sprint(st["delayed"], st["ready"], st["reserved"], st["paused"])
	}
	return out
}

func TestBackupRestoreSingleNode(t *testing.T) {
	data := t.TempDir()
	s := startServer(t, "--appendonly", "yes", "--dir", data)
	c := s.Client()
	chain(t, c,
		cmd("a", "DELAY.ADD", "q", 0, "ready job", "ID", "a", "PRIORITY", 7),
		cmd("b", "DELAY.ADD", "q", 3600000, "later", "ID", "b", "RETRY", 2, "DEADLETTER", "dlq", "GROUP", "g1"),
		cmd("c", "DELAY.ADD", "r", 0, "work", "ID", "c", "ACKTIMEOUT", 3600000),
		cmd([]any{"r", "c", "work"}, "DELAY.POP", "r", 0),
		cmd("d", "DELAY.ADD", "r", 0, "\x00\xffbinary", "ID", "d", "ACKTIMEOUT", 3600000, "RETRY", 5),
		cmd([]any{"r", "d", "\x00\xffbinary"}, "DELAY.POP", "r", 0),
		cmd(int64(1), "DELAY.NACK", "r", "d"),
		cmd("u", "DELAY.ADD", "q", 0, "once", "ID", "u", "UNIQUE", 3600000),
		cmd(int64(1), "DELAY.CANCEL", "q", "u"),
		cmd("OK", "DELAY.LIMIT", "q", "CONCURRENCY", 3, "RATE", 100, 1000),
		cmd("OK", "DELAY.PAUSE", "p"),
		cmd("OK", "DELAY.SCHEDULE", "s", "tick", "EVERY", 3600000, "tock", "ACKTIMEOUT", 5000),
	)
	for i := range 200 {
		do(t, c, "DELAY.ADD", "bulk", i%3*100000, fmt.Sprint("p", i), "ID", fmt.Sprint("j", i))
	}
	sid := do(t, c, "DELAY.ADD", "q", 0, "server id").(string)
	jobs := map[string][]string{"q": {"a", "b", "u", sid}, "r": {"c", "d"}}
	for i := range 200 {
		jobs["bulk"] = append(jobs["bulk"], fmt.Sprint("j", i))
	}
	names := []string{"q", "r", "p", "s", "bulk", "dlq"}
	before := bkState(t, c, jobs, names)

	dir := t.TempDir()
	file := filepath.Join(dir, "b.backup")
	out, code := delaydCLI(t, "backup", "--addr", s.Addr(), "-o", file)
	if code != 0 || !strings.Contains(out, "ok: 205 jobs") {
		t.Fatalf("delayd backup: exit %d: %s", code, out)
	}
	// A write after the backup's reply is not in it.
	chain(t, c, cmd("late", "DELAY.ADD", "q", 0, "after", "ID", "late"))

	out, code = delaydCLI(t, "check-backup", file)
	for _, want := range []string{"ok", "mode: single", "jobs: 205", "reserved: 1", "schedules: 1", "limits: 1", "pauses: 1", "tombstones: 1"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("check-backup: exit %d, no %q in:\n%s", code, want, out)
		}
	}

	// redis-cli --rdb reads the same stream unchanged; BGSAVE writes the
	// file in the data directory.
	if _, err := exec.LookPath("redis-cli"); err == nil {
		rdb := filepath.Join(dir, "cli.backup")
		cmd := exec.Command("redis-cli", "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port()), "--rdb", rdb)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("redis-cli --rdb: %v: %s", err, b)
		}
		if out, code := delaydCLI(t, "check-backup", rdb); code != 0 || !strings.Contains(out, "jobs: 206") {
			t.Fatalf("redis-cli --rdb's file: exit %d: %s", code, out)
		}
	}
	chain(t, c, cmd("Background saving started", "BGSAVE"))
	clWait(t, 10*time.Second, "BGSAVE to finish", func() (bool, string) {
		info := do(t, c, "INFO", "persistence").(string)
		v, _ := infoValue(info, "rdb_saves")
		return v == "1", "rdb_saves:" + v
	})
	if out, code := delaydCLI(t, "check-backup", filepath.Join(data, "delayd.backup")); code != 0 {
		t.Fatalf("BGSAVE's file: exit %d: %s", code, out)
	}

	// Restore: refused on a directory that holds anything, in one line.
	if out, code := delaydCLI(t, "restore", "--dir", data, file); code != 1 || !strings.Contains(out, "is not empty") || strings.Count(out, "\n") != 1 {
		t.Fatalf("restore into a used directory: exit %d: %q", code, out)
	}
	// A damaged file is refused before anything is written.
	bad := filepath.Join(dir, "bad.backup")
	raw, _ := os.ReadFile(file)
	raw[len(raw)/2] ^= 1
	os.WriteFile(bad, raw, 0o600)
	empty := filepath.Join(dir, "empty")
	if out, code := delaydCLI(t, "restore", "--dir", empty, bad); code != 1 || !strings.Contains(out, "checksum mismatch") {
		t.Fatalf("restore of a damaged file: exit %d: %s", code, out)
	}
	if out, code := delaydCLI(t, "check-backup", bad); code != 1 || !strings.Contains(out, "checksum mismatch") {
		t.Fatalf("check-backup of a damaged file: exit %d: %s", code, out)
	}

	fresh := filepath.Join(dir, "restored")
	if out, code := delaydCLI(t, "restore", "--dir", fresh, file); code != 0 || !strings.Contains(out, "restored 205 jobs") {
		t.Fatalf("restore: exit %d: %s", code, out)
	}
	s2 := startServer(t, "--appendonly", "yes", "--dir", fresh)
	c2 := s2.Client()
	after := bkState(t, c2, jobs, names)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s: before the backup %s, restored %s", k, v, after[k])
		}
	}
	chain(t, c2,
		cmd(nil, "DELAY.GET", "q", "late"),                             // after the backup: not in it
		cmd(nil, "DELAY.ADD", "q", 0, "again", "ID", "u", "UNIQUE", 1), // the tombstone holds the id
	)
	// Server ids go on after the restored ones, never reusing one.
	if next := do(t, c2, "DELAY.ADD", "q", 0, "next").(string); next == sid {
		t.Fatalf("a new job took the restored job's server id %s", sid)
	}
	if got := before["get q "+sid]; after["get q "+sid] != got {
		t.Fatalf("the job of server id %s: %s, restored %s", sid, got, after["get q "+sid])
	}
}

// TestBackupAuth: delayd backup authenticates as the server's clients do,
// and says in one line why it could not.
func TestBackupAuth(t *testing.T) {
	s := startServer(t, "--requirepass", "s3cret")
	file := filepath.Join(t.TempDir(), "f.backup")
	if out, code := delaydCLI(t, "backup", "--addr", s.Addr(), "-o", file); code != 1 || !strings.Contains(out, "NOAUTH") || strings.Count(out, "\n") != 1 {
		t.Fatalf("without a password: exit %d: %q", code, out)
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused backup left %s: %v", file, err)
	}
	if out, code := delaydCLI(t, "backup", "--addr", s.Addr(), "--password", "wrong", "-o", file); code != 1 || !strings.Contains(out, "WRONGPASS") {
		t.Fatalf("a wrong password: exit %d: %q", code, out)
	}
	if out, code := delaydCLI(t, "backup", "--addr", s.Addr(), "--password", "s3cret", "-o", file); code != 0 || !strings.Contains(out, "ok: 0 jobs") {
		t.Fatalf("with the password: exit %d: %q", code, out)
	}
}

// bkAdd is one acknowledged (or failed) add of the load.
type bkAdd struct {
	id         string
	sent, done time.Time
	ok         bool
}

// TestBackupRestoreCluster: a 3-node cluster under load is backed up
// through a follower (MOVED to the leader); the backup restored into a new
// cluster (the first node restores, two join) holds every add acknowledged
// before the backup was asked for and none sent after its reply, the
// reservations with their deadlines and deliveries, the schedule and the
// limit; the nodes that joined got it by snapshot.
func TestBackupRestoreCluster(t *testing.T) {
	cc := clStart(t, 3)
	leader := cc.waitFormed(t, 20*time.Second)
	lc := leader.client()
	do(t, lc, "DELAY.LIMIT", "{b}q", "CONCURRENCY", 50)
	do(t, lc, "DELAY.SCHEDULE", "{b}s", "tick", "EVERY", 3600000, "tock")
	var reserved []string
	for i := range 20 {
		id := fmt.Sprint("r", i)
		do(t, lc, "DELAY.ADD", "{b}q", 0, "work", "ID", id, "ACKTIMEOUT", 3600000)
		do(t, lc, "DELAY.POP", "{b}q", 0)
		reserved = append(reserved, id)
	}

	// The load: writers adding one job at a time, each add timed.
	var mu sync.Mutex
	var adds []bkAdd
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := leader.Client(func(o *redis.Options) { o.ReadTimeout = clOp })
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				a := bkAdd{id: fmt.Sprintf("w%d-%d", w, i), sent: time.Now()}
				ctx, cancel := context.WithTimeout(context.Background(), clOp)
				err := c.Do(ctx, "DELAY.ADD", "{b}load", i%2*3600000, "p"+a.id, "ID", a.id).Err()
				cancel()
				a.done, a.ok = time.Now(), err == nil
				mu.Lock()
				adds = append(adds, a)
				mu.Unlock()
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	var follower *clNode
	for _, n := range cc.followers(leader) {
		follower = n
	}
	file := filepath.Join(t.TempDir(), "cluster.backup")
	asked := time.Now()
	out, code := delaydCLI(t, "backup", "--addr", follower.Addr(), "-o", file)
	replied := time.Now()
	time.Sleep(1 * time.Second)
	close(stop)
	wg.Wait()
	if code != 0 || !strings.Contains(out, "exact at Raft index") {
		t.Fatalf("delayd backup via a follower: exit %d: %s", code, out)
	}
	t.Logf("delayd backup took %v: %s", replied.Sub(asked), strings.TrimSpace(out))
	out, code = delaydCLI(t, "check-backup", file)
	if code != 0 || !strings.Contains(out, "mode: cluster") || !strings.Contains(out, "reserved: 20") {
		t.Fatalf("check-backup: exit %d: %s", code, out)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	h, _, err := backup.Check(f)
	f.Close()
	if err != nil || h.Index == 0 {
		t.Fatalf("header %+v: %v", h, err)
	}
	wantReserved := map[string]map[string]string{}
	for _, id := range reserved {
		job, err := clGet(leader, lc, "{b}q", id)
		if err != nil || job["state"] != "reserved" {
			t.Fatalf("reserved job %s: %v %v", id, job, err)
		}
		wantReserved[id] = job
	}
	wantSchedules := showValue(do(t, lc, "DELAY.SCHEDULES", "{b}s"))
	wantLimit := showValue(do(t, lc, "DELAY.LIMIT", "{b}q"))

	// A new cluster: the first node restores, two join it empty.
	dir0 := t.TempDir()
	if out, code := delaydCLI(t, "restore", "--cluster", "--dir", dir0, file); code != 0 {
		t.Fatalf("restore --cluster: exit %d: %s", code, out)
	}
	nc := &clCluster{t: t}
	first := &clNode{cc: nc, dir: dir0}
	nc.nodes = append(nc.nodes, first)
	first.launch(t, "--cluster-bootstrap")
	nc.waitLeader(t, 20*time.Second, first)
	for range 2 {
		nc.add(t, "--cluster-join", first.Addr())
	}
	nl := nc.waitFormed(t, 30*time.Second)
	if _, err := os.Stat(filepath.Join(dir0, "raft", "restore.snap")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the restore file is still there after the restore: %v", err)
	}
	nlc := nl.client()

	// Job by job, pipelined.
	var before, after, between, failed int
	check := make([]bkAdd, 0, len(adds))
	for _, a := range adds {
		switch {
		case !a.ok:
			failed++
		case a.done.Before(asked):
			before++
			check = append(check, a)
		case a.sent.After(replied):
			after++
			check = append(check, a)
		default:
			between++
		}
	}
	if before == 0 || after == 0 {
		t.Fatalf("no add on one side of the backup: %d before, %d after", before, after)
	}
	t.Logf("%d adds acknowledged before the backup was asked for, %d sent after its reply, %d in between, %d failed",
		before, after, between, failed)
	for i := 0; i < len(check); i += 500 {
		part := check[i:min(i+500, len(check))]
		p := nlc.Pipeline()
		cmds := make([]*redis.Cmd, len(part))
		for k, a := range part {
			cmds[k] = p.Do(context.Background(), "DELAY.GET", "{b}load", a.id)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		p.Exec(ctx)
		cancel()
		for k, a := range part {
			v, err := cmds[k].Result()
			in := err == nil
			if err != nil && !errors.Is(err, redis.Nil) {
				t.Fatalf("DELAY.GET %s: %v", a.id, err)
			}
			if a.done.Before(asked) && !in {
				t.Fatalf("add %s acknowledged %v before the backup was asked for is not in the restored cluster", a.id, asked.Sub(a.done))
			}
			if a.sent.After(replied) && in {
				t.Fatalf("add %s sent %v after the backup's reply is in the restored cluster: %v", a.id, a.sent.Sub(replied), v)
			}
			if in {
				job := fields(t, "DELAY.GET", v)
				if job["payload"] != "p"+a.id {
					t.Fatalf("job %s restored with payload %v", a.id, job["payload"])
				}
			}
		}
	}
	for id, want := range wantReserved {
		got, err := clGet(nl, nlc, "{b}q", id)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("reservation %s: had %v, restored %v (%v)", id, want, got, err)
		}
	}
	if got := showValue(do(t, nlc, "DELAY.SCHEDULES", "{b}s")); got != wantSchedules {
		t.Fatalf("schedules: had %s, restored %s", wantSchedules, got)
	}
	if got := showValue(do(t, nlc, "DELAY.LIMIT", "{b}q")); got != wantLimit {
		t.Fatalf("limit: had %s, restored %s", wantLimit, got)
	}
	// The nodes that joined hold it too: they got it as Raft's snapshot.
	counts := func(v any) string {
		st := fields(t, "DELAY.STATS", v)
		return fmt.Sprint(st["delayed"], st["ready"], st["reserved"])
	}
	want := counts(do(t, nlc, "DELAY.STATS", "{b}load"))
	for _, n := range nc.followers(nl) {
		clWait(t, 10*time.Second, fmt.Sprintf("%v holding the restored jobs", n), func() (bool, string) {
			v, err := n.do(n.roClient(), "DELAY.STATS", "{b}load")
			if err != nil {
				return false, err.Error()
			}
			got := counts(v)
			return got == want, "delayed, ready, reserved " + got + ", the leader's " + want
		})
	}
}

// TestBackupTLS: delayd backup over mutual TLS with redis-cli's flags.
func TestBackupTLS(t *testing.T) {
	e := startTLS(t, "yes")
	file := filepath.Join(t.TempDir(), "f.backup")
	if out, code := delaydCLI(t, "backup", "--addr", e.addr(), "--tls", "--cacert", e.caFile, "-o", file); code != 1 {
		t.Fatalf("without a client certificate: exit %d: %q", code, out)
	}
	out, code := delaydCLI(t, "backup", "--addr", e.addr(), "--tls", "--cacert", e.caFile,
		"--cert", e.clientCert, "--key", e.clientKey, "-o", file)
	if code != 0 || !strings.Contains(out, "ok: 0 jobs") {
		t.Fatalf("over TLS: exit %d: %q", code, out)
	}
}

// TestBackupAcrossModes: a single node's backup restores as a cluster, and
// that cluster's backup as a single node: the records are the same.
func TestBackupAcrossModes(t *testing.T) {
	s := startServer(t)
	c := s.Client()
	chain(t, c,
		cmd("a", "DELAY.ADD", "{m}q", 3600000, "kept", "ID", "a", "RETRY", 3),
		cmd("OK", "DELAY.LIMIT", "{m}q", "CONCURRENCY", 2),
	)
	want := showValue(do(t, c, "DELAY.GET", "{m}q", "a"))
	dir := t.TempDir()
	single := filepath.Join(dir, "single.backup")
	if out, code := delaydCLI(t, "backup", "--addr", s.Addr(), "-o", single); code != 0 {
		t.Fatalf("backup: exit %d: %s", code, out)
	}

	node := filepath.Join(dir, "node")
	if out, code := delaydCLI(t, "restore", "--cluster", "--dir", node, single); code != 0 {
		t.Fatalf("restore --cluster: exit %d: %s", code, out)
	}
	cc := &clCluster{t: t}
	n := &clNode{cc: cc, dir: node}
	cc.nodes = append(cc.nodes, n)
	n.launch(t, "--cluster-bootstrap")
	cc.waitLeader(t, 20*time.Second, n)
	if got := showValue(do(t, n.client(), "DELAY.GET", "{m}q", "a")); got != want {
		t.Fatalf("as a cluster: had %s, restored %s", want, got)
	}
	clustered := filepath.Join(dir, "cluster.backup")
	if out, code := delaydCLI(t, "backup", "--addr", n.Addr(), "-o", clustered); code != 0 || !strings.Contains(out, "Raft index") {
		t.Fatalf("backup of the cluster: exit %d: %s", code, out)
	}

	back := filepath.Join(dir, "back")
	if out, code := delaydCLI(t, "restore", "--dir", back, clustered); code != 0 {
		t.Fatalf("restore: exit %d: %s", code, out)
	}
	s2 := startServer(t, "--appendonly", "yes", "--dir", back)
	c2 := s2.Client()
	if got := showValue(do(t, c2, "DELAY.GET", "{m}q", "a")); got != want {
		t.Fatalf("back as a single node: had %s, restored %s", want, got)
	}
	chain(t, c2, cmd([]any{"concurrency", int64(2), "rate", int64(0), "per_ms", int64(0), "group_concurrency", int64(0), "reserved", int64(0), "tokens", int64(-1)},
		"DELAY.LIMIT", "{m}q"))
}
