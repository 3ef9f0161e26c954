// Package integration starts the real delayd binary and speaks to it the way
// its users do: with go-redis v9, with redis-cli, and with raw RESP over TCP.
//
// TestMain builds the binary once from the module root (with -race when
// DELAYD_IT_RACE=1), or uses the one named by DELAYD_IT_BIN. Every test that
// needs a server starts its own with startServer, on a free port of
// 127.0.0.1 and in its own temp dir, so the tests run in parallel and never
// share state. The server's output is shown only when the test fails, or
// always with DELAYD_IT_VERBOSE=1; a server that ignores SIGTERM gets SIGQUIT
// first, so its goroutine dump is in that output. internal/testserver does
// the building, starting and stopping, as for compat and web/e2e; this file
// adds the test-bound wrappers, go-redis clients and redis-cli.
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
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayd/delayd/internal/testserver"
)

// binPath is the server binary built by TestMain.
var binPath string

// verbose reports whether server output and client logs are always shown.
var verbose = os.Getenv("DELAYD_IT_VERBOSE") == "1"

// ports are this package's (compat and web/e2e have their own ranges; see
// testserver's package comment).
var ports = testserver.NewPorts(testserver.IntegrationPorts)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if !verbose {
		redis.SetLogger(quietLogger{})
	}
	bin, remove, err := testserver.Binary("DELAYD_IT_BIN", os.Getenv("DELAYD_IT_RACE") == "1")
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	defer remove()
	binPath = bin
	return m.Run()
}

// quietLogger drops go-redis's own log lines (reconnects, pool notes): the
// tests check replies, and a failing test shows the server's log instead.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// server is one running delayd process owned by one test: the harness's
// process, with the test's clients and checks on top.
type server struct {
	*testserver.Server
	t testing.TB

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
	s, err := testserver.StartFresh(ports, 1, func(p []int) *server {
		args := []string{
			"--bind", "127.0.0.1", "--http-addr", "",
			"--port", strconv.Itoa(p[0]),
			"--dir", dir,
			"--appendonly", "no",
			"--log-level", "warn",
			"--log-format", "json",
		}
		args = append(args, strings.Fields(os.Getenv("DELAYD_IT_ARGS"))...)
		args = append(args, extraArgs...)
		return newServer(t, p[0], nil, args...)
	})
	if err != nil {
		t.Fatalf("server did not start: %v", err)
	}
	return s
}

// startServerWith starts delayd with exactly args (no defaults) and env added
// to the environment, and waits for it to answer on port. For the tests of
// flags, environment and config file.
func startServerWith(t testing.TB, port int, env []string, args ...string) *server {
	t.Helper()
	s := newServer(t, port, env, args...)
	if err := s.Start(); err != nil {
		t.Fatalf("server did not start: %v", err)
	}
	return s
}

// newServer returns a server not started yet, in a working dir of its own,
// stopped when the test ends (testserver.Watch).
func newServer(t testing.TB, port int, env []string, args ...string) *server {
	ts := testserver.New(binPath, port, t.TempDir(), args...)
	ts.Env = env
	testserver.Watch(t, ts, verbose)
	return &server{Server: ts, t: t}
}

// freePort finds a free port on 127.0.0.1 and releases it.
func freePort(t testing.TB) int {
	t.Helper()
	return freePortOn(t, "127.0.0.1")
}

// freePortOn finds a free port on ip from this package's range, never one
// handed out before (testserver.Ports says why).
func freePortOn(t testing.TB, ip string) int {
	t.Helper()
	port, err := ports.Take(ip)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// cleanEnv is the test's environment without DELAYD_ variables and with the
// HTTP side off (testserver.CleanEnv).
func cleanEnv() []string { return testserver.CleanEnv() }

func pingOnce(addr string) bool { return testserver.Ping(addr) }

// Signal sends sig to the process.
func (s *server) Signal(sig os.Signal) {
	s.t.Helper()
	if err := s.Server.Signal(sig); err != nil {
		s.t.Fatalf("signal %v: %v", sig, err)
	}
}

// Stop sends SIGTERM, waits for the exit (SIGKILL after 5 s, which fails the
// test) and returns the exit code.
func (s *server) Stop() int {
	s.t.Helper()
	code, ok := s.Server.Stop(5 * time.Second)
	if !ok {
		s.t.Errorf("server did not exit within 5s of SIGTERM; sent SIGQUIT (goroutine dump in the output) and killed it")
	}
	return code
}

// Kill9 kills the process with SIGKILL and waits for it.
func (s *server) Kill9() { s.Kill() }

// Restart stops the server if it runs (SIGTERM) and starts it again with the
// same arguments, so the same dir and port.
func (s *server) Restart() {
	s.t.Helper()
	ok, err := s.Server.Restart()
	if !ok {
		s.t.Errorf("server did not exit within 5s of SIGTERM; sent SIGQUIT (goroutine dump in the output) and killed it")
	}
	if err != nil {
		s.t.Fatalf("restart: %v", err)
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
		TLSConfig:             s.TLS,
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
func infoValue(text, field string) (string, bool) { return testserver.InfoField(text, field) }

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

// outputHas waits up to d for the server's output to hold want.
func (s *server) outputHas(want string, d time.Duration) bool { return s.OutputHas(want, d) }
