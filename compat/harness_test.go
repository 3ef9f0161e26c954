package compat

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayd/delayd/internal/testserver"
)

var (
	// serverBin is the server the checks run against: the delayd binary
	// built by TestMain, or redis-server.
	serverBin string
	// againstRedis is true when the target is redis-server, to prove that a
	// check of plain Redis behaviour is a real check.
	againstRedis bool
	// require makes a missing interpreter or module a failure (CI).
	require = os.Getenv("DELAYD_COMPAT_REQUIRE") == "1"
	verbose = os.Getenv("DELAYD_COMPAT_VERBOSE") == "1"
	// moduleRoot is the repository root (this package is <root>/compat).
	moduleRoot string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	raiseParallel()
	defer func() {
		if goExamplesDir != "" {
			os.RemoveAll(goExamplesDir)
		}
	}()
	if !verbose {
		redis.SetLogger(quietLogger{})
	}
	var err error
	if moduleRoot, err = testserver.ModuleRoot(); err != nil {
		fmt.Fprintln(os.Stderr, "compat:", err)
		return 1
	}
	switch target := os.Getenv("DELAYD_COMPAT_TARGET"); {
	case target == "" || target == "delayd":
	case filepath.Base(target) == "redis-server":
		againstRedis = true
		if serverBin, err = exec.LookPath(target); err != nil {
			fmt.Fprintln(os.Stderr, "compat: DELAYD_COMPAT_TARGET:", err)
			return 1
		}
		return m.Run()
	default:
		fmt.Fprintf(os.Stderr, "compat: DELAYD_COMPAT_TARGET=%q: want delayd, redis-server or a path to redis-server\n", target)
		return 1
	}
	bin, remove, err := testserver.Binary("DELAYD_COMPAT_BIN", false)
	if err != nil {
		fmt.Fprintln(os.Stderr, "compat:", err)
		return 1
	}
	defer remove()
	serverBin = bin
	return m.Run()
}

// quietLogger drops go-redis's own log lines (reconnects, pool notes).
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// ports are this package's (integration_test and web/e2e have their own
// ranges; see testserver's package comment).
var ports = testserver.NewPorts(testserver.CompatPorts)

// server is one delayd (or redis-server) process owned by one check.
type server struct{ *testserver.Server }

// newServer returns the target, not started, on port with its data dir
// (also its working dir) and the append-only log on (so a restart keeps
// the jobs), with requirepass when password is set, and extra flags (a
// cluster node's, a TLS port) after the defaults.
func newServer(port int, dir, password string, extra ...string) *server {
	p := strconv.Itoa(port)
	var args []string
	if againstRedis {
		args = []string{"--port", p, "--bind", "127.0.0.1", "--dir", dir, "--save", "",
			"--appendonly", "yes", "--daemonize", "no", "--logfile", ""}
	} else {
		args = []string{"--bind", "127.0.0.1", "--http-addr", "", "--port", p, "--dir", dir, "--appendonly", "yes",
			"--log-level", "warn", "--log-format", "json"}
	}
	if password != "" {
		args = append(args, "--requirepass", password)
	}
	if !againstRedis {
		args = append(args, extra...)
	}
	return &server{testserver.New(serverBin, port, dir, args...)}
}

// startServer starts the target on a free port of 127.0.0.1 (see
// newServer). Stop it with stop.
func startServer(dir, password string) (*server, error) {
	return testserver.StartFresh(ports, 1, func(p []int) *server { return newServer(p[0], dir, password) })
}

func (s *server) addr() string { return s.Addr() }

// stop sends SIGTERM, then SIGQUIT after 5 s (a goroutine dump in the
// output); it reports whether SIGTERM was enough.
func (s *server) stop() bool {
	_, ok := s.Stop(5 * time.Second)
	return ok
}

// pause stops the server with SIGSTOP for d, then lets it go on (SIGCONT):
// a process that froze (a long GC pause, a VM stall, a partition that
// healed) and comes back believing what it believed before.
func (s *server) pause(d time.Duration) {
	if s.Signal(syscall.SIGSTOP) != nil {
		return
	}
	defer func() { _ = s.Signal(syscall.SIGCONT) }()
	time.Sleep(d)
}

// restart stops the server (SIGTERM) and starts it again on the same port
// and dir, as an operator's restart does.
func (s *server) restart() error {
	ok, err := s.Restart()
	if !ok {
		return fmt.Errorf("server did not exit within 5s of SIGTERM")
	}
	return err
}

// env is what a check gets: a running server of its own, or for a cluster
// feature a cluster of its own.
type env struct {
	srv      *server
	cluster  *testCluster
	addr     string    // the server's address; a cluster's first node's
	addrs    []string  // every node's address (the server's alone)
	password string    // set for the AUTH check's server
	tls      *tlsFiles // set for the TLS check's server; addr is its TLS port
	log      *testserver.Buffer
}

// restart restarts the check's server.
func (e *env) restart() error {
	if e.srv == nil {
		return fmt.Errorf("a cluster check restarts nodes with cluster.restartKilled")
	}
	return e.srv.restart()
}

// stop stops the check's server or cluster, reporting whether each exited
// within 5 s of SIGTERM.
func (e *env) stop() bool {
	if e.cluster != nil {
		return e.cluster.stop()
	}
	return e.srv.stop()
}

// output is what the server or cluster printed.
func (e *env) output() string {
	if e.cluster != nil {
		return e.cluster.output()
	}
	return e.srv.Output()
}

// logf notes a step; the notes are shown when the check fails.
func (e *env) logf(format string, args ...any) { fmt.Fprintf(e.log, format+"\n", args...) }

// readyCmd is the command that adds a ready job with a payload to a queue:
// DELAY.ADD with delay 0 on delayd, RPUSH (which delayd defines as the
// same thing) on redis-server.
func readyCmd(queue, payload string) []any {
	if againstRedis {
		return []any{"RPUSH", queue, payload}
	}
	return []any{"DELAY.ADD", queue, "0", payload}
}

// errNA marks a check as not applicable (a client or version without the
// feature).
type errNA struct{ reason string }

func (e errNA) Error() string { return "n/a: " + e.reason }

// errMissing marks a check whose interpreter or module is not installed.
type errMissing struct{ what string }

func (e errMissing) Error() string { return e.what + " is not installed" }

// toolOnce caches the look-up of each script runtime.
var (
	pythonOnce sync.Once
	pythonPath string
	pythonErr  error
	nodeOnce   sync.Once
	nodePath   string
	nodeErr    error
)

// python returns Debian's python3 with its redis module. The pyenv python on
// a developer's PATH does not have python3-redis, so the system one is used.
func python() (string, error) {
	pythonOnce.Do(func() {
		pythonPath = "/usr/bin/python3"
		if p := os.Getenv("DELAYD_COMPAT_PYTHON"); p != "" {
			pythonPath = p
		}
		if _, err := os.Stat(pythonPath); err != nil {
			pythonErr = errMissing{pythonPath + " (apt-get install python3)"}
			return
		}
		if out, err := exec.Command(pythonPath, "-c", "import redis").CombinedOutput(); err != nil {
			pythonErr = errMissing{fmt.Sprintf("redis-py for %s (apt-get install python3-redis): %s", pythonPath, strings.TrimSpace(string(out)))}
		}
	})
	return pythonPath, pythonErr
}

// node returns node, once compat/node/node_modules holds ioredis and redis.
func node() (string, error) {
	nodeOnce.Do(func() {
		if nodePath, nodeErr = exec.LookPath("node"); nodeErr != nil {
			nodeErr = errMissing{"node (apt-get install nodejs npm)"}
			return
		}
		for _, mod := range []string{"ioredis", "redis"} {
			if _, err := os.Stat(filepath.Join(moduleRoot, "compat", "node", "node_modules", mod, "package.json")); err != nil {
				nodeErr = errMissing{"the npm module " + mod + " (run npm ci in compat/node)"}
				return
			}
		}
	})
	return nodePath, nodeErr
}

// scriptCheck runs a Python or Node check script for one feature. The
// script gets the server in DELAYD_COMPAT_ADDR (and _PASSWORD, _TARGET),
// every node's address in DELAYD_COMPAT_ADDRS (comma-separated; the one
// server's when not a cluster), exits 0 when the check passes, 3 after
// printing "N/A: reason" when the client has no such feature, anything else
// on failure. A script that prints the line RESTART waits for a line on
// stdin, sent once the server has been restarted; in a cluster check,
// KILL_LEADER is answered with the killed leader's address once it is dead
// (SIGKILL), and RESTART_KILLED with "restarted" once that node is back and
// the cluster whole again, and PAUSE_LEADER with the address of the leader
// once it has been stopped (SIGSTOP) for pauseFor, let go on (SIGCONT) and
// the cluster agrees on a leader again (or "error: ..." when any failed).
func scriptCheck(runtime func() (string, error), script string, args ...string) func(*env) error {
	return func(e *env) error {
		interp, err := runtime()
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, interp, append([]string{filepath.Join(moduleRoot, "compat", script)}, args...)...)
		cmd.Dir = filepath.Join(moduleRoot, "compat")
		target := "delayd"
		if againstRedis {
			target = "redis"
		}
		cmd.Env = append(os.Environ(), "DELAYD_COMPAT_ADDR="+e.addr, "DELAYD_COMPAT_ADDRS="+strings.Join(e.addrs, ","),
			"DELAYD_COMPAT_PASSWORD="+e.password,
			"DELAYD_COMPAT_TARGET="+target, "PYTHONDONTWRITEBYTECODE=1")
		cmd.Env = append(cmd.Env, e.tls.scriptEnv()...)
		cmd.Stderr = e.log
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		var na string
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(e.log, line)
			switch {
			case line == "RESTART":
				if err := e.restart(); err != nil {
					_ = cmd.Process.Kill()
					_ = cmd.Wait()
					return fmt.Errorf("restart: %w", err)
				}
				_, _ = io.WriteString(stdin, "restarted\n")
			case line == "KILL_LEADER" && e.cluster != nil:
				addr, err := e.cluster.killLeader()
				if err != nil {
					addr = "error: " + err.Error()
				}
				fmt.Fprintf(e.log, "killed the leader %s (SIGKILL)\n", addr)
				_, _ = io.WriteString(stdin, addr+"\n")
			case line == "PAUSE_LEADER" && e.cluster != nil:
				answer, err := e.cluster.pauseLeader()
				if err != nil {
					answer = "error: " + strings.ReplaceAll(err.Error(), "\n", " ")
				}
				fmt.Fprintf(e.log, "paused the leader %s for %v (SIGSTOP, SIGCONT)\n", answer, pauseFor)
				_, _ = io.WriteString(stdin, answer+"\n")
			case line == "RESTART_KILLED" && e.cluster != nil:
				answer := "restarted"
				if err := e.cluster.restartKilled(); err != nil {
					answer = "error: " + strings.ReplaceAll(err.Error(), "\n", " ")
				}
				fmt.Fprintln(e.log, answer)
				_, _ = io.WriteString(stdin, answer+"\n")
			case strings.HasPrefix(line, "N/A: "):
				na = strings.TrimPrefix(line, "N/A: ")
			}
		}
		err = cmd.Wait()
		if ctx.Err() != nil {
			return fmt.Errorf("%s %s did not finish within 45s", script, strings.Join(args, " "))
		}
		if exit, ok := err.(*exec.ExitError); ok && exit.ExitCode() == 3 && na != "" {
			return errNA{na}
		}
		if err != nil {
			return fmt.Errorf("%s %s: %v (its output is below)", script, strings.Join(args, " "), err)
		}
		return nil
	}
}
