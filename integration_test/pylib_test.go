package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayd/delayd/internal/testserver"
)

// The Python library's own suite (clients/python/tests, stdlib unittest),
// run by Debian's /usr/bin/python3 with its redis-py against a server (and
// a 3-node cluster) started here: the suite takes their addresses from
// DELAYD_TEST_ADDR and DELAYD_TEST_CLUSTER. Without redis-py for that
// python the tests skip, unless DELAYD_COMPAT_REQUIRE=1 (CI) makes that a
// failure, as compat does.

// pyTests are the tests each run must pass (not skip): the worker
// contract's, so a suite that skipped them all cannot pass here.
var pyTests = []string{
	"test_aio_stop_deadline_cancels",
	"test_kill9_mid_job_redelivered_once",
	"test_job_3x_its_ack_timeout_not_redelivered",
	"test_failing_job_retried_with_policy_then_dead_lettered",
	"test_sigterm_finishes_running_takes_nothing_more",
	"test_batches_by_free_slots_and_acks_with_next_fetch",
	"test_producer_options",
	"test_aio_worker",
	"test_aio_heartbeat",
	"test_aio_sigterm_finishes_running_takes_nothing_more",
	"test_raw_worker_example",
}

func TestPythonLibrary(t *testing.T) {
	t.Parallel()
	py := pythonWithRedis(t)
	s := startServer(t)
	out, err := runPySuite(t, py, "test_*.py", []string{"DELAYD_TEST_ADDR=" + s.Addr()}, nil)
	checkPySuite(t, out, err, pyTests, 2)
}

func TestPythonLibraryCluster(t *testing.T) {
	t.Parallel()
	py := pythonWithRedis(t)
	cc := clStart(t, 3)
	var addrs []string
	for _, n := range cc.nodes {
		addrs = append(addrs, n.Addr())
	}
	// The suite prints DELAYD_TEST KILL_LEADER once its worker works under
	// load; the answer is the address of the leader killed (SIGKILL).
	kill := func() string {
		l, why := cc.leaderNow()
		if l == nil {
			return "error: " + why
		}
		l.Kill9()
		t.Logf("killed the leader %v", l)
		return l.Addr()
	}
	out, err := runPySuite(t, py, "test_cluster.py",
		[]string{"DELAYD_TEST_CLUSTER=" + strings.Join(addrs, ","), "DELAYD_TEST_KILL=go"},
		map[string]func() string{"DELAYD_TEST KILL_LEADER": kill})
	checkPySuite(t, out, err, []string{"test_leader_killed_under_load", "test_workers_on_queues_of_two_slots"}, 0)
}

// pythonWithRedis is /usr/bin/python3 when it imports redis; otherwise the
// test skips (fails with DELAYD_COMPAT_REQUIRE=1).
func pythonWithRedis(t *testing.T) string {
	t.Helper()
	const py = "/usr/bin/python3"
	out, err := exec.Command(py, "-c", "import redis").CombinedOutput()
	if err == nil {
		return py
	}
	msg := fmt.Sprintf("%s with redis-py (apt-get install python3-redis): %v %s", py, err, strings.TrimSpace(string(out)))
	if os.Getenv("DELAYD_COMPAT_REQUIRE") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg + " (DELAYD_COMPAT_REQUIRE=1 makes this a failure)")
	return ""
}

// runPySuite runs `python -m unittest discover -v` of the tests matching
// pattern with env added, answering each stdout line named in answers
// with its func's reply on stdin, and returns everything it printed.
func runPySuite(t *testing.T, py, pattern string, env []string, answers map[string]func() string) (string, error) {
	t.Helper()
	root, err := testserver.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := filepath.Join(root, "clients", "python")
	cmd := exec.CommandContext(ctx, py, "-m", "unittest", "discover", "-v", "-s", "tests", "-p", pattern)
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(), append([]string{"PYTHONPATH=" + dir, "PYTHONDONTWRITEBYTECODE=1"}, env...)...)
	var all testserver.Buffer
	cmd.Stderr = &all
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(&all, line)
			if f, ok := answers[line]; ok {
				_, _ = io.WriteString(stdin, f()+"\n")
			}
		}
	}()
	wg.Wait()
	err = cmd.Wait()
	if ctx.Err() != nil {
		err = fmt.Errorf("did not finish within 4 minutes: %w", err)
	}
	return all.String(), err
}

var (
	pyRan = regexp.MustCompile(`(?m)^Ran (\d+) tests? in `)
	pyOK  = regexp.MustCompile(`(?m)^OK(?: \(skipped=(\d+)\))?$`)
)

// checkPySuite fails t unless the suite passed, ran every test of want and
// skipped exactly skips (the tests of the other run: the cluster's, or all
// but the cluster's).
func checkPySuite(t *testing.T, out string, err error, want []string, skips int) {
	t.Helper()
	if err != nil {
		t.Fatalf("the Python suite: %v\n%s", err, out)
	}
	ran, ok := pyRan.FindStringSubmatch(out), pyOK.FindStringSubmatch(out)
	switch {
	case ran == nil || ok == nil:
		t.Errorf("no \"Ran N tests\" and \"OK\" lines in the output")
	case ok[1] != fmt.Sprint(skips) && !(ok[1] == "" && skips == 0):
		t.Errorf("%s tests skipped, want %d", ok[1], skips)
	}
	for _, name := range want {
		if !strings.Contains(out, name+" (") {
			t.Errorf("%s did not run", name)
		}
	}
	if t.Failed() || verbose {
		t.Logf("the Python suite's output:\n%s", out)
	}
}
