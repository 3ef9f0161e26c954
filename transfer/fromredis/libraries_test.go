package fromredis

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/delayd/delayd/transfer"
)

// The tests of this file read delayed jobs that asynq and BullMQ wrote
// themselves, through their own clients and servers, into a redis-server
// of the test's; the generators (bench/rivals/cmd/asynqgen,
// bench/rivals/bullmq/gen.js) write down what they asked each library for.
// A third generator keeps adding while Read runs, as producers of a live
// system do. Then delayd must hold every job of the fill once, with its id
// and due time, and each job added meanwhile either right or not yet; a
// second Read, as a cut-over's second pass, brings the rest.

// need fails the test when the CI's environment asks for every check to
// run (DELAYD_COMPAT_REQUIRE, set by .ci/run), and skips it otherwise.
func need(t *testing.T, what string, err error) {
	t.Helper()
	if os.Getenv("DELAYD_COMPAT_REQUIRE") != "" {
		t.Fatalf("%s: %v", what, err)
	}
	t.Skipf("%s (set up by .ci/run): %v", what, err)
}

// recorder wraps a sink and keeps each job emitted, to check what does
// not show in DELAY.GET (retry limits, deliveries) and that no job came
// twice in one Read.
type recorder struct {
	*sink
	jobs map[string]transfer.Job
	dups int
}

func (r *recorder) emit(j transfer.Job) error {
	k := j.Queue + "\x00" + j.ID
	if _, ok := r.jobs[k]; ok {
		r.dups++
	}
	r.jobs[k] = j
	return r.sink.emit(j)
}

func (r *recorder) read(t *testing.T, o Options) Report {
	t.Helper()
	r.jobs, r.dups = map[string]transfer.Job{}, 0
	rep, err := Read(t.Context(), o, r.emit)
	if err == nil {
		err = r.flush()
	}
	if err != nil {
		t.Fatalf("Read: %v (report %+v)", err, rep)
	}
	if r.dups > 0 {
		t.Errorf("%d jobs emitted twice in one Read", r.dups)
	}
	return rep
}

// gen is a generator process; stop ends one that keeps adding.
type gen struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

func startGen(t *testing.T, dir string, name string, args ...string) *gen {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Wait() })
	// It says "adding" once its first job is in: the Read starts then.
	if l, err := bufio.NewReader(out).ReadString('\n'); l != "adding\n" {
		t.Fatalf("%s: %q, %v", name, l, err)
	}
	go io.Copy(io.Discard, out)
	return &gen{cmd: cmd, stdin: in}
}

func (g *gen) stop(t *testing.T) {
	t.Helper()
	g.stdin.Close()
	if err := g.cmd.Wait(); err != nil {
		t.Fatalf("%s: %v", g.cmd.Path, err)
	}
}

func runGen(t *testing.T, dir, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// checkJobs checks that delayd holds each job of ws with its due time and
// the task's name in its envelope, and that Read gave it the library's
// retry limit and runs made; with optional, a job delayd does not hold is
// no fault (one added while the Read ran). It returns how many it held.
func checkJobs(t *testing.T, addr string, r *recorder, ws []want, optional bool, retry func(want) int64, nameOf func(payload string) string) int {
	t.Helper()
	have := fetch(t, addr, ws)
	n, bad := 0, 0
	fault := func(format string, args ...any) {
		if bad++; bad <= 5 {
			t.Errorf(format, args...)
		}
	}
	for _, w := range ws {
		k := w.queue + "\x00" + w.id
		g, ok := have[k]
		if !ok {
			if !optional {
				fault("%s/%s (due %d) missing", w.queue, w.id, w.due)
			}
			continue
		}
		n++
		if g.due != w.due || nameOf(g.payload) != w.name {
			fault("%s/%s: due %d payload %s, want due %d name %s", w.queue, w.id, g.due, g.payload, w.due, w.name)
		}
		if j, ok := r.jobs[k]; ok && (j.Retry != retry(w) || int64(j.Deliveries) != w.done) {
			fault("%s/%s: retry %d deliveries %d, want %d and %d", w.queue, w.id, j.Retry, j.Deliveries, retry(w), w.done)
		}
	}
	if bad > 5 {
		t.Errorf("... %d faults in all", bad)
	}
	return n
}

func envelopeField(field string) func(string) string {
	return func(p string) string {
		var m map[string]any
		json.Unmarshal([]byte(p), &m)
		s, _ := m[field].(string)
		return s
	}
}

// liveImport is the test of one library: fill, fail some once, keep adding
// while reading, check, read again, check all.
func liveImport(t *testing.T, o Options, fill, fail func(out string), keep func(out string) *gen, queues []string, retry func(want) int64, nameOf func(string) string) Report {
	dir := t.TempDir()
	a, f, k := filepath.Join(dir, "fill.tsv"), filepath.Join(dir, "fail.tsv"), filepath.Join(dir, "keep.tsv")
	fill(a)
	fail(f)
	d := startDelayd(t)
	r := &recorder{sink: newSink(d.Addr())}
	producer := keep(k)

	rep := r.read(t, o)
	producer.stop(t)
	filled := append(readManifest(t, a), readManifest(t, f)...)
	kept := readManifest(t, k)
	checkJobs(t, d.Addr(), r, filled, false, retry, nameOf)
	during := checkJobs(t, d.Addr(), r, kept, true, retry, nameOf)
	t.Logf("first pass: %+v; of %d jobs added while it ran, %d came", rep, len(kept), during)
	if rep.Read < int64(len(filled)) {
		t.Errorf("first pass read %d, want at least the %d filled", rep.Read, len(filled))
	}

	rep = r.read(t, o)
	t.Logf("second pass: %+v", rep)
	all := append(filled, kept...)
	checkJobs(t, d.Addr(), r, all, false, retry, nameOf)
	if n := held(t, d.Addr(), queues...); n != int64(len(all)) {
		t.Errorf("delayd holds %d jobs, want %d: each job once", n, len(all))
	}
	if rep.Read != int64(len(all)) {
		t.Errorf("second pass read %d, want %d", rep.Read, len(all))
	}
	return rep
}

const testJobs = "5000"

func TestAsynqWrittenByAsynq(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server and delayd")
	}
	raddr := startRedis(t)
	bin := filepath.Join(t.TempDir(), "asynqgen")
	build := exec.Command("go", "build", "-o", bin, "./cmd/asynqgen")
	build.Dir = rivals(t)
	if out, err := build.CombinedOutput(); err != nil {
		need(t, "building bench/rivals/cmd/asynqgen (asynq's module)", fmt.Errorf("%w\n%s", err, out))
	}
	dir := rivals(t)
	liveImport(t, Options{URL: "redis://" + raddr, Format: "asynq", PageSize: 300},
		func(out string) { runGen(t, dir, bin, "-addr", raddr, "-n", testJobs, "-out", out) },
		func(out string) { runGen(t, dir, bin, "-addr", raddr, "-retries", "40", "-out", out) },
		func(out string) *gen {
			return startGen(t, dir, bin, "-addr", raddr, "-from", testJobs, "-keep", "-n", "0", "-rate", "2000", "-out", out)
		},
		[]string{"q0", "q1", "retryq"},
		func(w want) int64 { return retryOf(w.retry) },
		envelopeField("type"))
}

func TestBullMQWrittenByBullMQ(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server and delayd")
	}
	raddr := startRedis(t)
	_, port, _ := net.SplitHostPort(raddr)
	dir := filepath.Join(rivals(t), "bullmq")
	if _, err := exec.LookPath("node"); err != nil {
		need(t, "node", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "bullmq")); err != nil {
		need(t, "bench/rivals/bullmq's node_modules (npm ci there)", err)
	}
	rep := liveImport(t, Options{URL: "redis://" + raddr, Format: "bullmq", PageSize: 300},
		func(out string) {
			runGen(t, dir, "node", "gen.js", "--port", port, "--n", testJobs, "--schedulers", "2", "--out", out)
		},
		func(out string) { runGen(t, dir, "node", "gen.js", "--port", port, "--retries", "40", "--out", out) },
		func(out string) *gen {
			return startGen(t, dir, "node", "gen.js", "--port", port, "--from", testJobs, "--keep", "--n", "0", "--rate", "2000", "--out", out)
		},
		[]string{"bq0", "bq1", "bretryq"},
		func(w want) int64 {
			return retryOf(w.retry - 1) // attempts: every run, 0 is 1
		},
		envelopeField("name"))
	if rep.Skipped != 2 || rep.Reasons[reasonBullRepeat] != 2 {
		t.Errorf("skipped %d (%v), want the 2 job schedulers' next runs", rep.Skipped, rep.Reasons)
	}
}
