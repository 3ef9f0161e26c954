// Package integration starts the real delayd binary and speaks to it the way
// its users do: with go-redis v9, with redis-cli, and with raw RESP over TCP.
//
// TestMain builds the binary once from the module root (with -race when
// DELAYD_IT_RACE=1), or uses the one named by DELAYD_IT_BIN. Every test that
// needs a server starts its own with startServer, on a free port of
// 127.0.0.1 and in its own temp dir, so the tests run in parallel and never
// share state. The server's output is shown only when the test fails, or
// always with DELAYD_IT_VERBOSE=1; a server that ignores SIGTERM gets SIGQUIT
// first, so its goroutine dump is in that output.
//
// The tests follow SPEC.md section by section; most read as a chain of
// command -> expected reply (see expect and chain in helpers_test.go).
// redis-cli tests skip when redis-cli is not installed.
//
//	go test ./integration_test/                      # about 20 s
//	DELAYD_IT_RACE=1 go test ./integration_test/     # server built with -race
//	DELAYD_IT_VERBOSE=1 go test -run TestQuickStart -v ./integration_test/
//	DELAYD_IT_ARGS="--appendonly yes --appendfsync always" go test ./integration_test/
package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
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

// binPath is the server binary built by TestMain.
var binPath string

// verbose reports whether server output and client logs are always shown.
var verbose = os.Getenv("DELAYD_IT_VERBOSE") == "1"

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if !verbose {
		redis.SetLogger(quietLogger{})
	}
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	if bin := os.Getenv("DELAYD_IT_BIN"); bin != "" {
		// test a binary built elsewhere (a release build, or while the tree
		// does not compile)
		if binPath, err = filepath.Abs(bin); err != nil {
			fmt.Fprintln(os.Stderr, "integration:", err)
			return 1
		}
		return m.Run()
	}
	root := filepath.Dir(wd) // this package lives in <module root>/integration_test
	tmp, err := os.MkdirTemp("", "delayd-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	defer os.RemoveAll(tmp)

	binPath = filepath.Join(tmp, "delayd")
	args := []string{"build", "-o", binPath}
	if os.Getenv("DELAYD_IT_RACE") == "1" {
		args = append(args, "-race")
	}
	args = append(args, ".")
	build := exec.Command("go", args...)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "integration: go %s in %s failed: %v\n%s",
			strings.Join(args, " "), root, err, out)
		return 1
	}
	return m.Run()
}

// quietLogger drops go-redis's own log lines (reconnects, pool notes): the
// tests check replies, and a failing test shows the server's log instead.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// syncBuffer collects the server's stdout and stderr.
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

// server is one running delayd process owned by one test.
type server struct {
	t    testing.TB
	port int
	cwd  string   // working directory of the process
	args []string // the full argument list
	env  []string // added to a copy of the test's environment without DELAYD_*
	out  *syncBuffer
	// tls, when set, is how clients reach a server whose port is its TLS
	// port (--port 0 --tls-port): the readiness PING and Client use it.
	tls *tls.Config

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{} // closed when the process has exited
	exitCode int

	adminOnce sync.Once
	admin     *redis.Client // for INFO polling; never blocks
}

// startServer starts delayd on a free port of 127.0.0.1 with its own data
// dir, the append-only log off and warn-level JSON logs; then the flags in
// env DELAYD_IT_ARGS (e.g. "--appendonly yes --appendfsync always" runs
// every test with the log on), then extraArgs, so later ones override. It returns once the server answers PING,
// and stops it when the test ends.
func startServer(t testing.TB, extraArgs ...string) *server {
	t.Helper()
	dir := t.TempDir()
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port := freePort(t)
		args := []string{
			"--bind", "127.0.0.1", "--http-addr", "",
			"--port", strconv.Itoa(port),
			"--dir", dir,
			"--appendonly", "no",
			"--log-level", "warn",
			"--log-format", "json",
		}
		args = append(args, strings.Fields(os.Getenv("DELAYD_IT_ARGS"))...)
		args = append(args, extraArgs...)
		s, err := launch(t, port, nil, args...)
		if err == nil {
			return s
		}
		lastErr = err
		if !strings.Contains(s.out.String(), "address already in use") {
			break
		}
		// Another test took the port between freePort and the bind: try another.
	}
	t.Fatalf("server did not start: %v", lastErr)
	return nil
}

// startServerWith starts delayd with exactly args (no defaults) and env added
// to the environment, and waits for it to answer on port. For the tests of
// flags, environment and config file.
func startServerWith(t testing.TB, port int, env []string, args ...string) *server {
	t.Helper()
	s, err := launch(t, port, env, args...)
	if err != nil {
		t.Fatalf("server did not start: %v", err)
	}
	return s
}

// launch starts the process and waits for readiness. On error the returned
// server (not nil) still holds the output and is already stopped.
func launch(t testing.TB, port int, env []string, args ...string) (*server, error) {
	t.Helper()
	return launchServer(newServer(t, port, env, args...))
}

// launchServer starts s (made by newServer) as launch does.
func launchServer(s *server) (*server, error) {
	if err := s.start(); err != nil {
		if s.running() {
			s.kill9()
		}
		return s, err
	}
	return s, nil
}

// newServer returns a server not started yet, stopped when the test ends.
func newServer(t testing.TB, port int, env []string, args ...string) *server {
	s := &server{t: t, port: port, cwd: t.TempDir(), args: args, env: env, out: &syncBuffer{}}
	t.Cleanup(func() {
		if s.running() {
			if _, ok := s.stop(5 * time.Second); !ok {
				t.Errorf("server did not exit within 5s of SIGTERM; sent SIGQUIT (goroutine dump below) and killed it")
			}
		}
		if strings.Contains(s.out.String(), "WARNING: DATA RACE") {
			t.Errorf("the server (built with -race) reported a data race")
		}
		if t.Failed() || verbose {
			t.Logf("server %s (args %q) output:\n%s", s.Addr(), s.args, s.out.String())
		}
	})
	return s
}

// freePort finds a free port on 127.0.0.1 and releases it.
func freePort(t testing.TB) int {
	t.Helper()
	return freePortOn(t, "127.0.0.1")
}

// freePortOn finds a free port on ip, below Linux's ephemeral range
// (32768-60999). A port the kernel hands out for ":0" comes from that
// range, which is also where every outgoing connection takes its local
// port: once a test kills a server, a client's (or a Raft peer's) outgoing
// connection could take the dead server's port before the test restarts it
// there, and the restart failed with "address already in use" (seen in CI
// on cluster failover tests). Ports from 26384 to 32767 are never taken that
// way; a random one is tried until one binds.
//
// No port is handed out twice in one test process: tests run in parallel,
// and a killed server's port, free until its restart, could be given to
// another test (compat's freePort saw it happen). compat picks from
// 20000-26383, so the two packages' processes, which go test runs side by
// side, never pick the same port either.
func freePortOn(t testing.TB, ip string) int {
	t.Helper()
	handed.Lock()
	defer handed.Unlock()
	for range 200 {
		port := 26384 + rand.IntN(32768-26384)
		if handed.ports[port] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
		if err != nil {
			continue
		}
		l.Close()
		handed.ports[port] = true
		return port
	}
	t.Fatalf("no free port on %s between 26384 and 32767", ip)
	return 0
}

// handed is every port freePortOn has given out in this process, on any ip.
var handed = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// cleanEnv is the test's environment without any DELAYD_ variable, so the
// machine's settings never leak into a test, and with the HTTP side off:
// servers run side by side, and only the tests of it ask for it (a flag
// beats the environment).
func cleanEnv() []string {
	env := []string{"DELAYD_HTTP_ADDR="}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DELAYD_") {
			env = append(env, kv)
		}
	}
	return env
}

func (s *server) start() error {
	if err := s.spawn(); err != nil {
		return err
	}
	return s.waitReady(10 * time.Second)
}

// spawn starts the process and returns at once.
func (s *server) spawn() error {
	cmd := exec.Command(binPath, s.args...)
	cmd.Dir = s.cwd
	cmd.Env = append(cleanEnv(), s.env...)
	cmd.Stdout = s.out
	cmd.Stderr = s.out
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		s.mu.Lock()
		s.exitCode = cmd.ProcessState.ExitCode()
		s.mu.Unlock()
		close(done)
	}()
	return nil
}

// waitReady polls with a raw PING until any reply but -LOADING (+PONG, or
// -NOAUTH when a password is set that the test did not pass as
// --requirepass) comes back, the process exits, or the deadline passes.
// With --requirepass the PING follows an AUTH, so the load is seen through
// the password too (a PING alone would get -NOAUTH while the log loads, and
// the test's first command -LOADING).
func (s *server) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	pass := s.requirepass()
	for {
		select {
		case <-s.done:
			return fmt.Errorf("server exited with code %d before it answered PING on %s", s.ExitCode(), s.Addr())
		default:
		}
		if pingOnceAuth(s.Addr(), s.tls, pass) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no reply to PING on %s within %v", s.Addr(), limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func pingOnce(addr string) bool { return pingOnceTLS(addr, nil) }

// requirepass is the last --requirepass of the server's arguments, or
// DELAYD_REQUIREPASS of its environment ("" when neither).
func (s *server) requirepass() string {
	pass := ""
	for _, kv := range s.env {
		if v, ok := strings.CutPrefix(kv, "DELAYD_REQUIREPASS="); ok {
			pass = v
		}
	}
	for i, a := range s.args {
		if a == "--requirepass" && i+1 < len(s.args) {
			pass = s.args[i+1]
		} else if v, ok := strings.CutPrefix(a, "--requirepass="); ok {
			pass = v
		}
	}
	return pass
}

// pingOnceTLS is pingOnce over TLS with cfg (nil: plain TCP).
func pingOnceTLS(addr string, cfg *tls.Config) bool { return pingOnceAuth(addr, cfg, "") }

// pingOnceAuth is pingOnceTLS, after AUTH pass when pass is not empty: true
// when the PING's reply is anything but -LOADING.
func pingOnceAuth(addr string, cfg *tls.Config, pass string) bool {
	var c net.Conn
	var err error
	if cfg != nil {
		c, err = tls.DialWithDialer(&net.Dialer{Timeout: 200 * time.Millisecond}, "tcp", addr, cfg)
	} else {
		c, err = net.DialTimeout("tcp", addr, 200*time.Millisecond)
	}
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	req := "*1\r\n$4\r\nPING\r\n"
	if pass != "" {
		req = fmt.Sprintf("*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n", len(pass), pass) + req
	}
	if _, err := c.Write([]byte(req)); err != nil {
		return false
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if pass != "" && err == nil {
		line, err = r.ReadString('\n') // the PING's, after AUTH's +OK or error
	}
	return err == nil && (strings.HasPrefix(line, "+") || strings.HasPrefix(line, "-")) &&
		!strings.HasPrefix(line, "-LOADING")
}

// Addr is host:port of the server.
func (s *server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port is the server's TCP port.
func (s *server) Port() int { return s.port }

func (s *server) running() bool {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// ExitCode is the exit code of the last run (-1 when killed by a signal).
func (s *server) ExitCode() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exitCode
}

// Signal sends sig to the process.
func (s *server) Signal(sig os.Signal) {
	s.t.Helper()
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if err := cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signal %v: %v", sig, err)
	}
}

// Exited returns a channel closed when the current process has exited.
func (s *server) Exited() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

// stop sends SIGTERM and waits up to limit; a server still running then gets
// SIGQUIT (the Go runtime prints every goroutine into the output shown on
// failure) and, 2 s later, SIGKILL. ok is false when SIGTERM was not enough.
func (s *server) stop(limit time.Duration) (code int, ok bool) {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return s.ExitCode(), true
	case <-time.After(limit):
	}
	_ = cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
	return s.ExitCode(), false
}

// Stop sends SIGTERM, waits for the exit (SIGKILL after 5 s, which fails the
// test) and returns the exit code.
func (s *server) Stop() int {
	s.t.Helper()
	code, ok := s.stop(5 * time.Second)
	if !ok {
		s.t.Errorf("server did not exit within 5s of SIGTERM; sent SIGQUIT (goroutine dump in the output) and killed it")
	}
	return code
}

func (s *server) kill9() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	_ = cmd.Process.Kill()
	<-done
}

// Kill9 kills the process with SIGKILL and waits for it.
func (s *server) Kill9() { s.kill9() }

// Restart stops the server if it runs (SIGTERM) and starts it again with the
// same arguments, so the same dir and port.
func (s *server) Restart() {
	s.t.Helper()
	if s.running() {
		s.Stop()
	}
	// A restart keeps its ports (a cluster node is known by its bus
	// address), and after a kill another process's outgoing connection may
	// hold one for a moment: such a start is tried again, a few times.
	for try := 1; ; try++ {
		before := len(s.out.String())
		err := s.start()
		if err == nil {
			return
		}
		if try == 5 || !strings.Contains(s.out.String()[before:], "address already in use") {
			s.t.Fatalf("restart: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// Client returns a go-redis client of one connection (PoolSize 1, so state
// such as AUTH or SETNAME sticks, like a redis-cli session), RESP2, no
// retries (a retried pop could take a second job), and deadlines taken from
// the context. opts may change any option.
func (s *server) Client(opts ...func(*redis.Options)) *redis.Client {
	o := &redis.Options{
		Addr:                  s.Addr(),
		Protocol:              2,
		PoolSize:              1,
		MaxRetries:            -1,
		DialTimeout:           2 * time.Second,
		ReadTimeout:           15 * time.Second,
		WriteTimeout:          5 * time.Second,
		ContextTimeoutEnabled: true,
		TLSConfig:             s.tls,
	}
	for _, f := range opts {
		f(o)
	}
	c := redis.NewClient(o)
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// Client3 is Client speaking RESP3 (go-redis sends HELLO 3 when it connects).
func (s *server) Client3(opts ...func(*redis.Options)) *redis.Client {
	return s.Client(append([]func(*redis.Options){func(o *redis.Options) { o.Protocol = 3 }}, opts...)...)
}

// adminClient is a client used only by the harness (INFO polling).
func (s *server) adminClient() *redis.Client {
	s.adminOnce.Do(func() { s.admin = s.Client() })
	return s.admin
}

// info returns field of INFO section, and whether the server reports it.
func (s *server) info(section, field string) (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	text, err := s.adminClient().Info(ctx, section).Result()
	if err != nil {
		return "", false
	}
	return infoValue(text, field)
}

// infoValue finds "field:value" in an INFO text.
func infoValue(text, field string) (string, bool) {
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, "\r")
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v, true
		}
	}
	return "", false
}

var warnBlockedOnce sync.Once

// waitBlocked waits until INFO clients reports blocked_clients:n. A server
// that does not report blocked_clients gets a plain 150 ms pause instead.
func (s *server) waitBlocked(t testing.TB, n int) {
	t.Helper()
	want := strconv.Itoa(n)
	deadline := time.Now().Add(5 * time.Second)
	for {
		v, ok := s.info("clients", "blocked_clients")
		if !ok {
			warnBlockedOnce.Do(func() {
				t.Logf("note: INFO clients has no blocked_clients; waiting 150 ms instead of polling")
			})
			time.Sleep(150 * time.Millisecond)
			return
		}
		if v == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("INFO clients blocked_clients stayed %s, want %s", v, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// cliPath returns redis-cli's path or skips the test.
func cliPath(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli not installed: apt-get install -y redis-tools")
	}
	return p
}

// cli runs `redis-cli -p PORT args...` and returns its stdout. redis-cli's
// exit code is not checked (it is 1 after an error reply); the caller checks
// the output.
func cli(t testing.TB, s *server, args ...string) string {
	t.Helper()
	return cliIn(t, s, "", args...)
}

// cliIn is cli with stdin (a pipe: one command per line when args is empty).
func cliIn(t testing.TB, s *server, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cliPath(t), append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(s.Port())}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("redis-cli %q did not finish within 10s; stdout %q stderr %q", args, stdout.String(), stderr.String())
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("redis-cli %q: %v", args, err)
	}
	if stderr.Len() > 0 {
		t.Logf("redis-cli %q stderr: %s", args, stderr.String())
	}
	return stdout.String()
}

// outputHas waits up to d for the server's output to hold want: a line the
// server logged before it answered may still be on its way through the
// pipe that copies its output into s.out.
func (s *server) outputHas(want string, d time.Duration) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(10 * time.Millisecond) {
		if strings.Contains(s.out.String(), want) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}
