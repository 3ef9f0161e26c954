package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayd/delayd/transfer"
)

// delayd export and delayd import, the real binary against real servers:
// the same jobs on the other side, twice adds nothing, an interrupted
// import goes on from where it says, and a single node's jobs move into a
// cluster through a pipe.

// xferRun runs `delayd args...` with stdin, and returns its stdout, stderr
// and exit code.
func xferRun(t testing.TB, stdin io.Reader, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env = cleanEnv()
	cmd.Stdin = stdin
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("delayd %q: %v", args, err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// xferExport exports every queue of the server at addr and returns the
// jobs by queue and id.
func xferExport(t testing.TB, addr string) map[string]transfer.Job {
	t.Helper()
	out, errs, code := xferRun(t, nil, "export", "--addr", addr)
	if code != 0 {
		t.Fatalf("export from %s: exit %d: %s", addr, code, errs)
	}
	return xferParse(t, out)
}

func xferParse(t testing.TB, lines string) map[string]transfer.Job {
	t.Helper()
	jobs := map[string]transfer.Job{}
	sc := bufio.NewScanner(strings.NewReader(lines))
	sc.Buffer(nil, 1<<26)
	for sc.Scan() {
		var j transfer.Job
		if err := json.Unmarshal(sc.Bytes(), &j); err != nil {
			t.Fatalf("an export line %q: %v", sc.Text(), err)
		}
		k := j.Queue + "/" + j.ID
		if _, dup := jobs[k]; dup {
			t.Fatalf("%s exported twice", k)
		}
		jobs[k] = j
	}
	return jobs
}

// xferMoved is what a job exported from one server is after an import into
// another: a reservation is a delayed job due at its ack deadline.
func xferMoved(j transfer.Job) transfer.Job {
	if j.State == "reserved" {
		j.State, j.Due, j.AckDeadline = "delayed", j.AckDeadline, 0
	}
	return j
}

// xferSame checks that the jobs at dst are src's, moved.
func xferSame(t testing.TB, src, dst map[string]transfer.Job) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(src)) {
		if got, want := dst[k], xferMoved(src[k]); got != want {
			t.Errorf("%s:\n got %+v\nwant %+v", k, got, want)
		}
	}
	for k := range dst {
		if _, ok := src[k]; !ok {
			t.Errorf("%s: not in the source", k)
		}
	}
}

// xferEveryState fills queues {x}q and {x}w (one slot: a cluster takes
// their dead letters) with jobs in every state and with every option,
// and returns the ready payloads of {x}q in the order they go out.
func xferEveryState(t testing.TB, c *redis.Client) []string {
	t.Helper()
	for _, cmd := range [][]any{
		{"DELAY.ADD", "{x}q", 0, "r1", "ID", "r1", "ACKTIMEOUT", 600000},
		{"DELAY.ADD", "{x}q", 0, "r2", "ID", "r2", "ACKTIMEOUT", 600000},
		{"DELAY.ADD", "{x}q", 0, "r3", "ID", "r3", "GROUP", "ga"},
		{"DELAY.ADD", "{x}q", 0, "r4", "ACKTIMEOUT", 0, "RETRY", 0},
		{"DELAY.ADD", "{x}q", 0, "r5", "ID", "r5", "PRIORITY", 3},
		{"DELAY.ADD", "{x}q", 0, "r6", "ID", "r6", "GROUP", "gb", "PRIORITY", 3},
		{"DELAY.ADD", "{x}q", 600000, "later", "ID", "d1", "RETRY", 4, "DEADLETTER", "{x}dlq"},
		{"DELAY.ADD", "{x}q", 900000, "\xff\xfe\x00binary"},
		{"DELAY.ADD", "{x}q", 900000, "", "ID", "empty"},
		{"DELAY.ADD", "{x}w", 0, "dead", "ID", "dead", "ACKTIMEOUT", 100, "RETRY", 0, "DEADLETTER", "{x}q"},
		{"DELAY.POP", "{x}w", 1},
		{"DELAY.NACK", "{x}w", "dead", "ERROR", "boom"},
		{"DELAY.ADD", "{x}w", 0, "taken", "ID", "taken", "ACKTIMEOUT", 600000},
		{"DELAY.POP", "{x}w", 1}, // reserved
		{"DELAY.ADD", "{x}w", 0, "again", "ID", "again", "ACKTIMEOUT", 600000},
		{"DELAY.POP", "{x}w", 1},
		{"DELAY.NACK", "{x}w", "again", 300000, "ERROR", "retry later"}, // delayed, with deliveries and a reason
	} {
		if err := c.Do(context.Background(), cmd...).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	ready, err := c.LRange(context.Background(), "{x}q", 0, -1).Result()
	if err != nil || len(ready) != 7 {
		t.Fatalf("the ready jobs of {x}q: %q %v", ready, err)
	}
	return ready
}

// TestExportImportSameJobs: a server's jobs in every state, exported and
// imported into another server, are the same jobs there (both exports
// compared, and DELAY.GET of each); the ready ones go out in the same
// order; a payload that is not UTF-8 comes through; importing twice adds
// nothing.
func TestExportImportSameJobs(t *testing.T) {
	t.Parallel()
	a, b := startServer(t), startServer(t, "--appendonly", "yes")
	ready := xferEveryState(t, a.Client())
	file := filepath.Join(t.TempDir(), "jobs.jsonl")
	if _, errs, code := xferRun(t, nil, "export", "--addr", a.Addr(), "-o", file); code != 0 || !strings.Contains(errs, "delayd export: 12 jobs of 2 queues") {
		t.Fatalf("export: exit %d: %s", code, errs)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	src := xferParse(t, string(data))
	if j := src["{x}w/taken"]; j.State != "reserved" || j.AckDeadline == 0 || j.Deliveries != 1 {
		t.Fatalf("the reserved job exported as %+v", j)
	}
	if j := src["{x}q/dead"]; j.Origin != "{x}w" || j.Error != "boom" || j.OriginAckTimeout != 100 || j.OriginRetry != -1 {
		t.Fatalf("the dead letter exported as %+v", j)
	}

	if _, errs, code := xferRun(t, nil, "import", "--addr", b.Addr(), "-i", file); code != 0 ||
		!strings.Contains(errs, "read 12, added 12, already there 0, failed 0") {
		t.Fatalf("import: exit %d: %s", code, errs)
	}
	xferSame(t, src, xferExport(t, b.Addr()))
	ca, cb := a.Client(), b.Client()
	ctx := context.Background()
	for k, j := range src {
		ga, _ := ca.Do(ctx, "DELAY.GET", j.Queue, j.ID).Result()
		gb, _ := cb.Do(ctx, "DELAY.GET", j.Queue, j.ID).Result()
		fa, fb := fields(t, k, ga), fields(t, k, gb)
		if j.State == "reserved" {
			fa["state"], fa["due"] = "delayed", fa["ack_deadline"]
			delete(fa, "ack_deadline")
		}
		if fmt.Sprint(fa) != fmt.Sprint(fb) {
			t.Errorf("DELAY.GET %s:\n%v\n%v", k, fa, fb)
		}
	}
	if got, _ := cb.LRange(ctx, "{x}q", 0, -1).Result(); !slices.Equal(got, ready) {
		t.Errorf("ready order:\n got %q\nwant %q", got, ready)
	}
	if got, _ := cb.Do(ctx, "DELAY.GET", "{x}q", src["{x}q/d1"].ID).Result(); got == nil {
		t.Error("d1 is gone")
	}
	var binary string
	for _, j := range src {
		if j.PayloadBase64 != "" {
			g, _ := cb.Do(ctx, "DELAY.GET", j.Queue, j.ID).Result()
			binary, _ = fields(t, "binary", g)["payload"].(string)
		}
	}
	if binary != "\xff\xfe\x00binary" {
		t.Errorf("the binary payload came back as %q", binary)
	}

	// Twice: nothing added, nothing changed; and through stdin.
	if _, errs, code := xferRun(t, bytes.NewReader(data), "import", "--addr", b.Addr()); code != 0 ||
		!strings.Contains(errs, "read 12, added 0, already there 12, failed 0") {
		t.Fatalf("second import: exit %d: %s", code, errs)
	}
	xferSame(t, src, xferExport(t, b.Addr()))

	// It survives a restart of the server it went to (DELAY.IMPORT is in
	// its log).
	b.Restart()
	xferSame(t, src, xferExport(t, b.Addr()))
}

// TestImportInterruptedResumes: an import stopped midway (SIGINT, its
// input still open) says after which line it stopped; everything before
// that line is on the server, and a rerun with --skip at that line brings
// the rest, adding each job once.
func TestImportInterruptedResumes(t *testing.T) {
	t.Parallel()
	a, b := startServer(t), startServer(t)
	const n = 12000
	ca := a.Client()
	pipe := ca.Pipeline()
	for i := range n {
		pipe.Do(context.Background(), "DELAY.ADD", fmt.Sprint("q", i%3), 600000+i, fmt.Sprint("p", i), "ID", fmt.Sprint("j", i))
	}
	if _, err := pipe.Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
	out, errs, code := xferRun(t, nil, "export", "--addr", a.Addr())
	if code != 0 {
		t.Fatalf("export: exit %d: %s", code, errs)
	}
	lines := strings.SplitAfter(out, "\n")

	// Two thirds of the lines, then silence: the import sends its full
	// batches and waits for more input, which never comes.
	cmd := exec.Command(binPath, "import", "--addr", b.Addr())
	cmd.Env = cleanEnv()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	io.WriteString(in, strings.Join(lines[:2*n/3], ""))
	cb := b.Client()
	deadline := time.Now().Add(30 * time.Second)
	for xferCount(t, cb) < 4096 {
		if time.Now().After(deadline) {
			t.Fatalf("the import did not start: %s", errb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The server's count runs ahead of the import, which learns a batch
	// went in only when it reads the replies: wait until the count stops
	// growing (every full batch sent and its replies read), so the resume
	// point it reports covers what the server holds.
	for last, still := int64(-1), 0; still < 15; time.Sleep(20 * time.Millisecond) {
		if n := xferCount(t, cb); n != last {
			last, still = n, 0
		} else {
			still++
		}
		if time.Now().After(deadline) {
			t.Fatalf("the import did not settle: %s", errb.String())
		}
	}
	cmd.Process.Signal(os.Interrupt)
	if err := cmd.Wait(); err == nil {
		t.Fatalf("an interrupted import exited 0: %s", errb.String())
	}
	m := regexp.MustCompile(`stopped after line (\d+): .*; rerun with --skip (\d+) to go on`).FindStringSubmatch(errb.String())
	if m == nil || m[1] != m[2] {
		t.Fatalf("no resume point in:\n%s", errb.String())
	}
	at, _ := strconv.Atoi(m[1])
	if at < 4096 || at > 2*n/3 {
		t.Fatalf("stopped after line %d of %d sent", at, 2*n/3)
	}
	have := xferCount(t, cb)
	for _, line := range lines[:at] {
		var j transfer.Job
		json.Unmarshal([]byte(line), &j)
		if cb.Do(context.Background(), "DELAY.GET", j.Queue, j.ID).Val() == nil {
			t.Fatalf("%s/%s, before the resume point, is not there", j.Queue, j.ID)
		}
	}

	// The rerun from the resume point: every line after it read, the
	// jobs that the interrupted run wrote past it already there.
	_, errs, code = xferRun(t, strings.NewReader(out), "import", "--addr", b.Addr(), "--skip", m[1])
	want := fmt.Sprintf("read %d, added %d, already there %d, failed 0", n-at, n-int(have), int(have)-at)
	if code != 0 || !strings.Contains(errs, want) {
		t.Fatalf("resumed import: exit %d, want %q: %s", code, want, errs)
	}
	xferSame(t, xferParse(t, out), xferExport(t, b.Addr()))
}

// xferCount is the jobs of a server.
func xferCount(t testing.TB, c *redis.Client) int64 {
	t.Helper()
	var n int64
	for _, q := range []string{"q0", "q1", "q2"} {
		d, r, res := stats(t, c, q)
		n += d + r + res
	}
	return n
}

// TestSingleNodeToCluster: the way from a single node to a cluster is
// `delayd export --addr single | delayd import --addr node`: every job of
// the single node, in every state, is in the 3-node cluster after it, sent
// to a follower (which answers MOVED to the leader); and a cluster node
// started on the single node's data directory is refused with a message
// naming that way.
func TestSingleNodeToCluster(t *testing.T) {
	t.Parallel()
	single := startServer(t, "--appendonly", "yes")
	xferEveryState(t, single.Client())
	src := xferExport(t, single.Addr())

	cc := clStart(t, 3)
	leader := cc.waitFormed(t, 20*time.Second)
	follower := cc.followers(leader)[0]
	sh := fmt.Sprintf("%q export --addr %s | %q import --addr %s", binPath, single.Addr(), binPath, follower.Addr())
	out, err := exec.Command("sh", "-c", sh).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "added 12, already there 0, failed 0") {
		t.Fatalf("%s: %v\n%s", sh, err, out)
	}
	got := xferExport(t, follower.Addr())
	for k := range got { // the helpers' probe writes

		if strings.HasPrefix(k, "{cl}probe/") {
			delete(got, k)
		}
	}
	xferSame(t, src, got)

	// The refusal names the way across.
	dir := durDir(t, single)
	single.Stop()
	port, bus := freePort(t), freePort(t)
	msg, code, _ := lockRun(t, 20*time.Second, "--bind", "127.0.0.1", "--http-addr", "",
		"--port", strconv.Itoa(port), "--dir", dir, "--log-format", "json",
		"--cluster-enabled", "yes", "--cluster-bootstrap",
		"--cluster-bus-addr", fmt.Sprintf("127.0.0.1:%d", bus))
	if code == 0 || !strings.Contains(msg, "delayd export --addr <single node> | delayd import --addr <cluster node>") {
		t.Fatalf("a cluster start on the single node's directory: exit %d:\n%s", code, msg)
	}
}

// TestExportImportAuth: both verbs log in as a client does, with --user and
// --password or the password in DELAYD_PASSWORD, and without it stop at once with
// the server's refusal.
func TestExportImportAuth(t *testing.T) {
	t.Parallel()
	a := startServer(t, "--requirepass", "pw-a")
	b := startServer(t, "--requirepass", "pw-b")
	ca := a.Client(func(o *redis.Options) { o.Password = "pw-a" })
	if err := ca.Do(context.Background(), "DELAY.ADD", "q", 60000, "x", "ID", "j").Err(); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := xferRun(t, nil, "export", "--addr", a.Addr()); code != 1 || !strings.Contains(errs, "NOAUTH") {
		t.Fatalf("export without a password: exit %d: %s", code, errs)
	}
	out, errs, code := xferRun(t, nil, "export", "--addr", a.Addr(), "--user", "default", "--password", "pw-a")
	if code != 0 {
		t.Fatalf("export with --password: exit %d: %s", code, errs)
	}
	cmd := exec.Command(binPath, "import", "--addr", b.Addr())
	cmd.Env = append(cleanEnv(), "DELAYD_PASSWORD=pw-b")
	cmd.Stdin = strings.NewReader(out)
	if got, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(got), "added 1,") {
		t.Fatalf("import with DELAYD_PASSWORD: %v: %s", err, got)
	}
	cb := b.Client(func(o *redis.Options) { o.Password = "pw-b" })
	if v, err := cb.Do(context.Background(), "DELAY.GET", "q", "j").Result(); err != nil || fields(t, "j", v)["payload"] != "x" {
		t.Fatalf("DELAY.GET q j on the second server: %v %v", v, err)
	}
}

// TestExportImportFarBuckets: a server whose jobs are mostly far (a
// horizon of one second, so that they sit in the buckets on disk, some in
// runs after a restart) exports every one of them; wiped (FLUSHALL) and
// imported back, it holds the same jobs, field by field, and they go out
// to disk again.
func TestExportImportFarBuckets(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--appendonly", "yes", "--horizon", "1000", "--far-buckets", "yes")
	c := s.Client()
	ctx := context.Background()
	farJobs := func(min int64) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			v, _ := s.info("memory", "far_jobs")
			if n, _ := strconv.ParseInt(v, 10, 64); n >= min {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("far_jobs %s, want at least %d", v, min)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	pipe := c.Pipeline()
	for i := range 3000 {
		q := fmt.Sprint("q", i%3)
		switch {
		case i%10 == 0: // near: stays in memory
			pipe.Do(ctx, "DELAY.ADD", q, 600_000, fmt.Sprint("near", i))
		case i%7 == 0:
			pipe.Do(ctx, "DELAY.ADD", q, 3_600_000+i*1000, fmt.Sprint("opts", i), "ID", fmt.Sprint("id", i),
				"ACKTIMEOUT", 5000, "RETRY", 2, "PRIORITY", 1+i%5, "GROUP", fmt.Sprint("g", i%4))
		default:
			pipe.Do(ctx, "DELAY.ADD", q, 3_600_000+i*1000, strings.Repeat(fmt.Sprint(i), 1+i%40))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	farJobs(2000)
	s.Restart() // a graceful stop seals the open bucket: the far jobs are in runs
	farJobs(2000)
	src := xferExport(t, s.Addr())
	if len(src) != 3000 {
		t.Fatalf("exported %d of 3000 jobs", len(src))
	}
	if j := src["q1/id721"]; j.AckTimeout != 5000 || j.Retry != 2 || j.Priority != 1+721%5 || j.Group != "g1" || j.Payload != "opts721" {
		t.Fatalf("a far job with options exported as %+v", j)
	}
	file := filepath.Join(t.TempDir(), "jobs.jsonl")
	if _, errs, code := xferRun(t, nil, "export", "--addr", s.Addr(), "-o", file); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errs)
	}
	if err := c.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.DBSize(ctx).Result(); n != 0 {
		t.Fatalf("DBSIZE %d after FLUSHALL", n)
	}
	if _, errs, code := xferRun(t, nil, "import", "--addr", s.Addr(), "-i", file); code != 0 ||
		!strings.Contains(errs, "read 3000, added 3000, already there 0, failed 0") {
		t.Fatalf("import: exit %d: %s", code, errs)
	}
	farJobs(2000)
	xferSame(t, src, xferExport(t, s.Addr()))
}
