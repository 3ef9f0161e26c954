package compat

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
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
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "compat:", err)
		return 1
	}
	moduleRoot = filepath.Dir(wd)
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
	if bin := os.Getenv("DELAYD_COMPAT_BIN"); bin != "" {
		if serverBin, err = filepath.Abs(bin); err != nil {
			fmt.Fprintln(os.Stderr, "compat:", err)
			return 1
		}
		return m.Run()
	}
	tmp, err := os.MkdirTemp("", "delayd-compat-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "compat:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	serverBin = filepath.Join(tmp, "delayd")
	build := exec.Command("go", "build", "-o", serverBin, ".")
	build.Dir = moduleRoot
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "compat: go build in %s failed: %v\n%s", moduleRoot, err, out)
		return 1
	}
	return m.Run()
}

// quietLogger drops go-redis's own log lines (reconnects, pool notes).
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// syncBuffer collects a process's output.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// server is one delayd (or redis-server) process owned by one check.
type server struct {
	port     int
	dir      string
	password string
	// extra are more flags (a cluster node's); the node's --cluster-*
	// ports are part of them.
	extra []string
	out   *syncBuffer

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// startServer starts the target on a free port of 127.0.0.1 with its own
// data dir and the append-only log on (so a restart keeps the jobs), with
// requirepass when password is set. Stop it with stop.
func startServer(dir, password string) (*server, error) {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var port int
		if port, err = freePort(); err != nil {
			return nil, err
		}
		s := &server{port: port, dir: dir, password: password, out: &syncBuffer{}}
		if err = s.start(); err == nil {
			return s, nil
		}
		if !strings.Contains(s.out.String(), "address already in use") {
			return s, err
		}
		// another process took the port between freePort and the bind
	}
	return nil, err
}

// freePort finds a free port on 127.0.0.1 below Linux's ephemeral range
// (32768-60999), where outgoing connections take their local ports: a
// killed cluster node restarted on its port could find it taken by one
// (integration_test's freePortOn says more).
//
// It never hands out the same port twice in one test process. Checks run in
// parallel, and a killed node's ports are free until its restart: another
// check's cluster was given the killed leader's bus port in that window, so
// the restart failed with "address already in use" and the other cluster's
// node took Raft requests from the first cluster's (CI, rueidis/failover
// beside node-redis/cluster). And it picks from 20000-26383, integration_test
// from 26384-32767: go test runs the two packages' processes side by side.
func freePort() (int, error) {
	handed.Lock()
	defer handed.Unlock()
	var err error
	for range 200 {
		port := 20000 + rand.IntN(26384-20000)
		if handed.ports[port] {
			continue
		}
		var l net.Listener
		if l, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			l.Close()
			handed.ports[port] = true
			return port, nil
		}
	}
	if err == nil {
		err = fmt.Errorf("no port between 20000 and 26383 left to hand out")
	}
	return 0, err
}

// handed is every port freePort has given out in this process.
var handed = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

func (s *server) args() []string {
	port := strconv.Itoa(s.port)
	if againstRedis {
		a := []string{"--port", port, "--bind", "127.0.0.1", "--dir", s.dir, "--save", "",
			"--appendonly", "yes", "--daemonize", "no", "--logfile", ""}
		if s.password != "" {
			a = append(a, "--requirepass", s.password)
		}
		return a
	}
	a := []string{"--bind", "127.0.0.1", "--http-addr", "", "--port", port, "--dir", s.dir, "--appendonly", "yes",
		"--log-level", "warn", "--log-format", "json"}
	if s.password != "" {
		a = append(a, "--requirepass", s.password)
	}
	return append(a, s.extra...)
}

func (s *server) start() error {
	cmd := exec.Command(serverBin, s.args()...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = s.out, s.out
	for _, kv := range os.Environ() { // the machine's DELAYD_ settings never leak in
		if !strings.HasPrefix(kv, "DELAYD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	go func() { _ = cmd.Wait(); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-done:
			return fmt.Errorf("server exited before it answered PING on %s", s.addr())
		default:
		}
		if pingOnce(s.addr(), s.password) {
			return nil
		}
		if time.Now().After(deadline) {
			s.stop()
			return fmt.Errorf("no reply to PING on %s within 10s", s.addr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pingOnce reports whether a raw PING gets a reply other than LOADING. With
// a password it authenticates first: a server still loading answers an
// unauthenticated PING with -NOAUTH (authentication is checked before
// loading, as Redis does), which said nothing about loading and let a
// check start against a server that then answered LOADING (rueidis/auth,
// once under load).
func pingOnce(addr, password string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	req := "*1\r\n$4\r\nPING\r\n"
	if password != "" {
		req = fmt.Sprintf("*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n", len(password), password) + req
	}
	if _, err := c.Write([]byte(req)); err != nil {
		return false
	}
	r := bufio.NewReader(c)
	if password != "" {
		if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "+") {
			return false
		}
	}
	line, err := r.ReadString('\n')
	return err == nil && (strings.HasPrefix(line, "+") ||
		strings.HasPrefix(line, "-") && !strings.HasPrefix(line, "-LOADING"))
}

func (s *server) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// stop sends SIGTERM, then SIGKILL after 5 s; it reports whether SIGTERM
// was enough.
func (s *server) stop() bool {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return true
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return true
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		return false
	}
}

// kill ends the server with SIGKILL, as a crash or a pulled plug would:
// no clean shutdown, no goodbye to its clients or peers.
func (s *server) kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// pause stops the server with SIGSTOP for d, then lets it go on (SIGCONT):
// a process that froze (a long GC pause, a VM stall, a partition that
// healed) and comes back believing what it believed before.
func (s *server) pause(d time.Duration) {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGSTOP)
	defer func() { _ = cmd.Process.Signal(syscall.SIGCONT) }()
	time.Sleep(d)
}

// restart stops the server (SIGTERM) and starts it again on the same port
// and dir, as an operator's restart does.
func (s *server) restart() error {
	if !s.stop() {
		return fmt.Errorf("server did not exit within 5s of SIGTERM")
	}
	return s.start()
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
	log      *syncBuffer
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
	return e.srv.out.String()
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
