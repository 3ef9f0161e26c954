package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// SPEC "Data directory": one process at a time holds a lock on it; a second
// is refused at start with an error naming the directory and the holder's
// pid, in single-node and cluster mode, and a kill -9 frees it at once.

// lockPID is the pid of s's current process.
func lockPID(s *server) int { return s.Pid() }

// lockRun runs the binary with args to its exit (bounded by limit) and
// returns its combined output, exit code and how long it ran.
func lockRun(t testing.TB, limit time.Duration, args ...string) (string, int, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = cleanEnv()
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("%q still ran after %v (it should have been refused at once); output:\n%s", args, limit, out)
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%q: %v", args, err)
	}
	return string(out), cmd.ProcessState.ExitCode(), took
}

// lockCheckRefusal checks a refused start's output: one line, naming the
// directory (absolute) and the holder's pid.
func lockCheckRefusal(t testing.TB, out string, code int, dir string, pid int) {
	t.Helper()
	if code == 0 {
		t.Fatalf("second server on %s exited 0; output:\n%s", dir, out)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1 {
		t.Errorf("refusal is %d lines, want 1:\n%s", len(lines), out)
	}
	want := fmt.Sprintf("data directory %s is in use by another delayd (pid %d); one process at a time", abs, pid)
	if !strings.Contains(out, want) {
		t.Errorf("refusal %q does not say %q", out, want)
	}
}

func TestDirLockSecondServerRefused(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
	dir := durDir(t, s)
	c := s.Client()
	before := durAddMany(t, c, "q", 600000, 200)

	port := freePort(t)
	out, code, _ := lockRun(t, 10*time.Second, "--bind", "127.0.0.1", "--http-addr", "",
		"--port", strconv.Itoa(port), "--dir", dir, "--appendonly", "yes",
		"--log-level", "info", "--log-format", "json")
	lockCheckRefusal(t, out, code, dir, lockPID(s))
	if pingOnce(net.JoinHostPort("127.0.0.1", strconv.Itoa(port))) {
		t.Errorf("the refused server answers on its port")
	}

	// delayd check-log may cut the tail of the log it reads: it is refused
	// beside a running server too.
	out, code, _ = lockRun(t, 10*time.Second, "check-log", "--dir", dir)
	if code == 0 || !strings.Contains(out, "is in use by another delayd (pid "+strconv.Itoa(lockPID(s))+")") {
		t.Errorf("check-log beside the server: exit %d, %q; want refused naming the pid", code, out)
	}

	// The first server still serves, and its log is whole.
	after := durAddMany(t, c, "q", 600000, 200)
	expectStats(t, c, "q", 400, 0, 0)
	durStopClean(t, s)
	if out, code, _ := lockRun(t, 10*time.Second, "check-log", "--dir", dir); code != 0 {
		t.Fatalf("check-log after the stop: exit %d\n%s", code, out)
	}
	if out, err := durStart(t, s); err != nil {
		t.Fatalf("restart: %v\n%s", err, out)
	}
	c = s.Client()
	all := append(before, after...)
	if found := durExisting(t, c, "q", all); len(found) != len(all) {
		t.Errorf("%d of %d jobs after the restart", len(found), len(all))
	}
}

func TestDirLockSecondClusterNodeRefused(t *testing.T) {
	t.Parallel()
	cc := clStart(t, 1)
	n := cc.nodes[0]
	if _, err := n.do(n.client(), "DELAY.ADD", "q", 600000, "before"); err != nil {
		t.Fatalf("DELAY.ADD: %v", err)
	}

	port, bus := freePort(t), freePort(t)
	out, code, took := lockRun(t, 20*time.Second, "--bind", "127.0.0.1", "--http-addr", "",
		"--port", strconv.Itoa(port), "--dir", n.dir,
		"--log-level", "info", "--log-format", "json",
		"--cluster-enabled", "yes", "--cluster-bootstrap",
		"--cluster-bus-addr", net.JoinHostPort("127.0.0.1", strconv.Itoa(bus)))
	lockCheckRefusal(t, out, code, n.dir, lockPID(n.server))
	// Before the lock, the second node waited 10 s on raft.db and said
	// only "timeout".
	if took > 5*time.Second {
		t.Errorf("the refusal took %v, want it at once", took)
	}

	if _, err := n.do(n.client(), "DELAY.ADD", "q", 600000, "after"); err != nil {
		t.Fatalf("DELAY.ADD after the refused start: %v", err)
	}
	expectStats(t, n.client(), "q", 2, 0, 0)
}

// TestDirLockFreeAfterKill9 is the crash case: the kernel drops the lock
// with the process, so a restart on the same directory is not refused, and
// the LOCK file the dead process left behind is no obstacle.
func TestDirLockFreeAfterKill9(t *testing.T) {
	t.Parallel()
	t.Run("single", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
		ids := durAddMany(t, s.Client(), "q", 600000, 100)
		s.Kill9()
		start := time.Now()
		if out, err := durStart(t, s); err != nil {
			t.Fatalf("restart after kill -9: %v\n%s", err, out)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("restart after kill -9 took %v", took)
		}
		if found := durExisting(t, s.Client(), "q", ids); len(found) != len(ids) {
			t.Errorf("%d of %d jobs after the restart", len(found), len(ids))
		}
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		cc := clStart(t, 1)
		n := cc.nodes[0]
		n.Kill9()
		n.Restart() // fails the test unless it comes up
		if strings.Contains(n.Output(), "is in use") {
			t.Errorf("restart after kill -9 was refused:\n%s", n.Output())
		}
	})
}

// A data directory written in one mode and started in the other used to
// come up empty and say nothing (a cluster node reads only raft/, a single
// node only delayd.aof), the jobs still on disk beside it. Now the start is
// refused in one line that names the directory, what it holds and the way
// out, and the jobs are still there for the right mode.
func TestDirModeMismatchRefused(t *testing.T) {
	t.Parallel()
	t.Run("single-node log, cluster start", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
		dir := durDir(t, s)
		durAddMany(t, s.Client(), "q", 600000, 50)
		s.Stop()

		port, bus := freePort(t), freePort(t)
		out, code, _ := lockRun(t, 20*time.Second, "--bind", "127.0.0.1", "--http-addr", "",
			"--port", strconv.Itoa(port), "--dir", dir, "--log-level", "info", "--log-format", "json",
			"--cluster-enabled", "yes", "--cluster-bootstrap",
			"--cluster-bus-addr", net.JoinHostPort("127.0.0.1", strconv.Itoa(bus)))
		abs, _ := filepath.Abs(dir)
		want := fmt.Sprintf("data directory %s holds a single-node log (delayd.aof, ", abs)
		if code == 0 || !strings.Contains(out, want) || strings.Count(strings.TrimSpace(out), "\n") != 0 {
			t.Fatalf("cluster start on a single node's directory: exit %d, output:\n%s\nwant one line with %q", code, out, want)
		}
		s.Restart()
		expectStats(t, s.Client(), "q", 50, 0, 0)
	})
	t.Run("cluster data, single-node start", func(t *testing.T) {
		t.Parallel()
		cc := clStart(t, 1)
		n := cc.nodes[0]
		if _, err := n.do(n.client(), "DELAY.ADD", "q", 600000, "x"); err != nil {
			t.Fatalf("DELAY.ADD: %v", err)
		}
		n.Stop()

		port := freePort(t)
		out, code, _ := lockRun(t, 20*time.Second, "--bind", "127.0.0.1", "--http-addr", "",
			"--port", strconv.Itoa(port), "--dir", n.dir, "--appendonly", "yes",
			"--log-level", "info", "--log-format", "json")
		abs, _ := filepath.Abs(n.dir)
		want := fmt.Sprintf("data directory %s holds a cluster node's Raft data (raft/)", abs)
		if code == 0 || !strings.Contains(out, want) || strings.Count(strings.TrimSpace(out), "\n") != 0 {
			t.Fatalf("single-node start on a cluster node's directory: exit %d, output:\n%s\nwant one line with %q", code, out, want)
		}
		n.Restart()
		cc.waitLeader(t, 15*time.Second, n)
		expectStats(t, n.client(), "q", 1, 0, 0)
	})
}
