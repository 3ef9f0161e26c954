package compat

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayd/delayd/internal/testserver"
)

// The programs of examples/ run as their users run them, against a real
// server: the producer adds jobs with IDs (and its retry changes nothing),
// the worker pops and acks them and stops after MAX_JOBS, a SIGTERM in the
// middle of a job lets the worker finish and ack it before it exits 0, and
// the list worker takes jobs with BLPOP.

// example is how to run one language's three programs.
type example struct {
	lang    string
	prefix  string                 // the producer's default ID_PREFIX
	runtime func() (string, error) // the interpreter, or "" for a binary
	dir     string                 // in examples/
	files   [3]string              // producer, worker, list worker
	env     []string
}

var (
	goExamplesOnce sync.Once
	goExamplesDir  string
	goExamplesErr  error
)

// goExamples builds examples/go/... once and returns the directory of the
// three binaries.
func goExamples() (string, error) {
	goExamplesOnce.Do(func() {
		dir, err := os.MkdirTemp("", "delayd-examples-")
		if err != nil {
			goExamplesErr = err
			return
		}
		build := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "./examples/go/...")
		build.Dir = moduleRoot
		if out, err := build.CombinedOutput(); err != nil {
			goExamplesErr = fmt.Errorf("go build ./examples/go/...: %v\n%s", err, out)
		}
		goExamplesDir = dir
	})
	return goExamplesDir, goExamplesErr
}

func examples() []example {
	return []example{
		{lang: "go", prefix: "go", files: [3]string{"producer", "worker", "listworker"}},
		{lang: "python", prefix: "py", runtime: python, dir: "python", files: [3]string{"producer.py", "worker.py", "list_worker.py"}},
		// node finds ioredis through NODE_PATH in the suite's locked
		// install, and the delayd package (clients/node) through a link
		// named delayd; a user runs npm install in examples/node instead.
		{lang: "node", prefix: "node", runtime: node, dir: "node", files: [3]string{"producer.js", "worker.js", "list_worker.js"},
			env: []string{"NODE_PATH=" + filepath.Join(moduleRoot, "compat", "node", "node_modules") + string(filepath.ListSeparator) + nodeLibDir()}},
	}
}

// nodeLibDir is a directory that holds only a link named delayd to
// clients/node, for NODE_PATH: the package needs no module of its own (it
// uses the ioredis the example gives it).
var nodeLibDir = sync.OnceValue(func() string {
	dir, err := os.MkdirTemp("", "delayd-nodelib-")
	if err != nil {
		return ""
	}
	_ = os.Symlink(filepath.Join(moduleRoot, "clients", "node"), filepath.Join(dir, "delayd"))
	return dir
})

// command is the exec.Cmd that runs file of ex with env added.
func (ex example) command(ctx context.Context, file string, env ...string) (*exec.Cmd, error) {
	var cmd *exec.Cmd
	if ex.runtime == nil {
		dir, err := goExamples()
		if err != nil {
			return nil, err
		}
		cmd = exec.CommandContext(ctx, filepath.Join(dir, file))
	} else {
		interp, err := ex.runtime()
		if err != nil {
			return nil, err
		}
		cmd = exec.CommandContext(ctx, interp, filepath.Join(moduleRoot, "examples", ex.dir, file))
	}
	cmd.Env = append(append(os.Environ(), ex.env...), env...)
	return cmd, nil
}

func TestExamples(t *testing.T) {
	if againstRedis {
		t.Skip("n/a: the examples use DELAY.* commands")
	}
	for _, ex := range examples() {
		t.Run(ex.lang, func(t *testing.T) {
			t.Parallel()
			if ex.runtime == nil {
				if _, err := goExamples(); err != nil {
					t.Fatal(err)
				}
			}
			srv, err := startServer(t.TempDir(), "")
			if err != nil {
				t.Fatalf("server did not start: %v", err)
			}
			defer srv.stop()
			rdb := redis.NewClient(&redis.Options{Addr: srv.addr()})
			defer rdb.Close()
			addr := "DELAYD_ADDR=" + srv.addr()

			run := func(file string, env ...string) string {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				cmd, err := ex.command(ctx, file, append(env, addr)...)
				if err != nil {
					skipOrFail(t, err)
				}
				began := time.Now()
				out, err := cmd.CombinedOutput()
				t.Logf("%s %v: %v", file, env, time.Since(began).Round(time.Millisecond))
				if err != nil {
					t.Fatalf("%s %s: %v\n%s", ex.lang, file, err, out)
				}
				return string(out)
			}
			want := func(out string, lines ...string) {
				t.Helper()
				for _, l := range lines {
					if !strings.Contains(out, l+"\n") {
						t.Errorf("output lacks the line %q:\n%s", l, out)
					}
				}
			}

			// producer, then the worker takes and acks every job
			start := time.Now()
			out := run(ex.files[0], "QUEUE=jobs:email", "COUNT=3", "DELAY_MS=500")
			w := ex.prefix + "-welcome-"
			want(out, "added "+w+"1", "added "+w+"2", "added "+w+"3",
				"retry of "+w+"1: already added, nothing changed", "scheduled daily-digest")
			if n, err := rdb.Do(context.Background(), "DELAY.SCHEDULES", "jobs:digest").Slice(); err != nil || len(n) != 1 {
				t.Errorf("DELAY.SCHEDULES jobs:digest after the producer: %v (%v), want the daily digest", n, err)
			}
			out = run(ex.files[1], "QUEUE=jobs:email", "MAX_JOBS=3", "WORK_MS=10")
			if took := time.Since(start); took < 500*time.Millisecond {
				t.Errorf("the worker had 3 jobs of delay 500 ms after %v", took)
			}
			want(out, "acked "+w+"1", "acked "+w+"2", "acked "+w+"3", "worker stopped after 3 jobs",
				"limit: at most 10 jobs of jobs:email in flight")
			want(out, "processing "+w+`1 {"user":1,"mail":"welcome"}`)
			// UNIQUE: the producer run again after the jobs are done adds nothing.
			out = run(ex.files[0], "QUEUE=jobs:email", "COUNT=1", "DELAY_MS=500")
			want(out, w+"1 was already added")
			stats, err := rdb.Do(context.Background(), "DELAY.STATS", "jobs:email").Result()
			if m, ok := stats.(map[any]any); err != nil || !ok || m["delayed"] != int64(0) || m["ready"] != int64(0) || m["reserved"] != int64(0) {
				t.Errorf("DELAY.STATS after the worker: %v (%v), want nothing left", stats, err)
			}

			// SIGTERM in the middle of a job: it is finished and acked
			run(ex.files[0], "QUEUE=jobs:stop", "COUNT=1", "DELAY_MS=0")
			gracefulStop(t, ex, addr)
			if err := rdb.Do(context.Background(), "DELAY.GET", "jobs:stop", ex.prefix+"-welcome-1").Err(); !errors.Is(err, redis.Nil) {
				t.Errorf("DELAY.GET of the job in hand at SIGTERM: %v, want nil (acked)", err)
			}

			// the stock BLPOP worker
			for _, p := range []string{"first", "second"} {
				if err := rdb.Do(context.Background(), "DELAY.ADD", "jobs:list", "200", p).Err(); err != nil {
					t.Fatal(err)
				}
			}
			out = run(ex.files[2], "QUEUE=jobs:list", "MAX_JOBS=2")
			want(out, "got first", "got second", "list worker stopped after 2 jobs")
		})
	}
}

// gracefulStop starts the worker with a slow job, sends SIGTERM while the
// job is in hand, and expects the job acked and exit 0.
func gracefulStop(t *testing.T, ex example, addr string) {
	t.Helper()
	// A bound on a hung worker, not a timing check: on a loaded 2-CPU
	// machine node alone took 5 s to start and add 3 jobs, and 20 s once
	// ran out before a worker that had signalled its stop could exit.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd, err := ex.command(ctx, ex.files[1], "QUEUE=jobs:stop", "WORK_MS=1500", addr)
	if err != nil {
		skipOrFail(t, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr testserver.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	sc := bufio.NewScanner(stdout)
	signalled := false
	for sc.Scan() {
		line := sc.Text()
		out.WriteString(line + "\n")
		if strings.HasPrefix(line, "processing ") && !signalled {
			time.Sleep(100 * time.Millisecond) // into the job's work
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			signalled = true
		}
	}
	err = cmd.Wait()
	if !signalled {
		t.Fatalf("the worker never took the job:\n%s%s", out.String(), stderr.String())
	}
	if err != nil {
		t.Fatalf("worker after SIGTERM: %v, want exit 0\n%s%s", err, out.String(), stderr.String())
	}
	for _, l := range []string{"acked " + ex.prefix + "-welcome-1", "worker stopped after 1 jobs"} {
		if !strings.Contains(out.String(), l+"\n") {
			t.Errorf("worker output after SIGTERM lacks %q:\n%s%s", l, out.String(), stderr.String())
		}
	}
}

// skipOrFail skips a test whose interpreter or module is missing, unless
// DELAYD_COMPAT_REQUIRE=1.
func skipOrFail(t *testing.T, err error) {
	t.Helper()
	var missing errMissing
	if errors.As(err, &missing) && !require {
		t.Skipf("%v (DELAYD_COMPAT_REQUIRE=1 makes this a failure)", err)
	}
	t.Fatal(err)
}

// clusterFiles are each language's cluster producer and worker.
var clusterFiles = map[string][2]string{
	"go":     {"clusterproducer", "clusterworker"},
	"python": {"cluster_producer.py", "cluster_worker.py"},
	"node":   {"cluster_producer.js", "cluster_worker.js"},
}

// The cluster examples against a 3-node cluster, one language after the
// other: the worker runs while the producer adds three jobs; once they are
// acked the leader is killed (SIGKILL) and the producer, started at once,
// adds three more through the election; the worker takes and acks them
// through the failover and stops after six, exit 0.
func TestClusterExamples(t *testing.T) {
	if againstRedis {
		t.Skip("n/a: a delayd cluster")
	}
	tc, err := startCluster(t.TempDir(), clusterSize)
	defer func() {
		tc.stop()
		if t.Failed() {
			t.Logf("cluster output:\n%s", tc.output())
		}
	}()
	if err != nil {
		t.Fatal(err)
	}
	seeds := "DELAYD_CLUSTER=" + strings.Join(tc.addrs(), ",")
	for _, ex := range examples() {
		t.Run(ex.lang, func(t *testing.T) {
			files := clusterFiles[ex.lang]
			queue := "QUEUE={ex}:" + ex.lang
			if err := tc.waitReady(15 * time.Second); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			worker, err := ex.command(ctx, files[1], seeds, queue, "MAX_JOBS=6", "WORK_MS=10")
			if err != nil {
				skipOrFail(t, err)
			}
			out := &testserver.Buffer{}
			worker.Stdout, worker.Stderr = out, out
			if err := worker.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- worker.Wait() }()
			produce := func(prefix string) {
				t.Helper()
				cmd, err := ex.command(ctx, files[0], seeds, queue, "COUNT=3", "DELAY_MS=300", "ID_PREFIX="+prefix)
				if err != nil {
					skipOrFail(t, err)
				}
				began := time.Now()
				got, err := cmd.CombinedOutput()
				t.Logf("producer %s: %v", prefix, time.Since(began).Round(time.Millisecond))
				if err != nil {
					t.Fatalf("%s %s: %v\n%s", ex.lang, files[0], err, got)
				}
				for i := 1; i <= 3; i++ {
					if l := fmt.Sprintf("added %s-order-%d\n", prefix, i); !strings.Contains(string(got), l) {
						t.Errorf("producer output lacks %q:\n%s", l, got)
					}
				}
			}
			acked := func(prefix string) error {
				for i := 1; i <= 3; i++ {
					if l := fmt.Sprintf("acked %s-order-%d\n", prefix, i); !strings.Contains(out.String(), l) {
						return fmt.Errorf("the worker has not acked %s-order-%d:\n%s", prefix, i, out.String())
					}
				}
				return nil
			}

			produce(ex.prefix)
			if err := waitFor(20*time.Second, func() error { return acked(ex.prefix) }); err != nil {
				t.Fatal(err)
			}
			killed, err := tc.killLeader()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("killed the leader %s", killed)
			produce(ex.prefix + "2") // through the election
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("the worker: %v\n%s", err, out.String())
				}
			case <-time.After(45 * time.Second):
				t.Fatalf("the worker did not finish six jobs within 45 s of the failover:\n%s", out.String())
			}
			if err := acked(ex.prefix + "2"); err != nil {
				t.Error(err)
			}
			if !strings.Contains(out.String(), "worker stopped after 6 jobs\n") {
				t.Errorf("worker output:\n%s", out.String())
			}
			if err := tc.restartKilled(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A cluster worker stopped while no node answers exits (within the Node
// worker's 20 s bound) instead of waiting for the cluster to come back:
// ioredis's Cluster holds commands without a timeout while it has no node.
func TestClusterExamplesStopWithClusterDown(t *testing.T) {
	if againstRedis {
		t.Skip("n/a: a delayd cluster")
	}
	for _, ex := range examples() {
		t.Run(ex.lang, func(t *testing.T) {
			tc, err := startCluster(t.TempDir(), clusterSize)
			stopped := false
			defer func() {
				if !stopped {
					tc.stop()
				}
			}()
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.waitReady(15 * time.Second); err != nil {
				t.Fatal(err)
			}
			seeds := "DELAYD_CLUSTER=" + strings.Join(tc.addrs(), ",")
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			files := clusterFiles[ex.lang]
			queue := "QUEUE={down}:" + ex.lang
			worker, err := ex.command(ctx, files[1], seeds, queue, "WORK_MS=10")
			if err != nil {
				skipOrFail(t, err)
			}
			out := &testserver.Buffer{}
			worker.Stdout, worker.Stderr = out, out
			if err := worker.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- worker.Wait() }()
			// One job through, so the worker is in its pop loop.
			produce, err := ex.command(ctx, files[0], seeds, queue, "COUNT=1", "DELAY_MS=0", "ID_PREFIX=down")
			if err != nil {
				skipOrFail(t, err)
			}
			if got, err := produce.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", files[0], err, got)
			}
			if err := waitFor(30*time.Second, func() error {
				if !strings.Contains(out.String(), "acked down-order-1\n") {
					return fmt.Errorf("the worker has not acked down-order-1:\n%s", out.String())
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}

			tc.stop()
			stopped = true
			time.Sleep(500 * time.Millisecond) // into a pop with no node
			if err := worker.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case <-exited:
			case <-time.After(40 * time.Second):
				t.Fatalf("the worker did not exit within 40 s of SIGTERM with the cluster down:\n%s", out.String())
			}
			if !strings.Contains(out.String(), "stopping: finishing the job in hand\n") {
				t.Errorf("worker output:\n%s", out.String())
			}
		})
	}
}
