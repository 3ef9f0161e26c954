package integration

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayd/delayd/internal/testserver"
)

// SPEC "Running it": flags, environment, config file, their precedence, and
// what SIGTERM/SIGINT do.

// writeConfig writes a YAML config file and returns its path.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "delayd.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// baseArgs are the flags every config test passes (none of them under test).
func baseArgs(t *testing.T) []string {
	return []string{"--bind", "127.0.0.1", "--dir", t.TempDir(), "--appendonly", "no", "--log-level", "warn"}
}

// expectNotListening checks nothing answers on port.
func expectNotListening(t *testing.T, port int, why string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 300*time.Millisecond)
	if err == nil {
		c.Close()
		t.Errorf("something listens on port %d (%s)", port, why)
	}
}

// expectMaxPayload checks the effective max-payload-bytes is n.
func expectMaxPayload(t *testing.T, c *redis.Client, n int) {
	t.Helper()
	expect(t, c, anyReply{}, "DELAY.ADD", "q", 0, strings.Repeat("x", n))
	expect(t, c, errIs(fmt.Sprintf("ERR payload exceeds max-payload-bytes (%d)", n)), "DELAY.ADD", "q", 0, strings.Repeat("x", n+1))
}

func TestConfigPrecedence(t *testing.T) {
	t.Parallel()

	t.Run("flags", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, "--max-payload-bytes", "64", "--max-jobs", "2", "--ack-timeout", "0", "--tick", "2",
			"--auto-rewrite-percentage", "50", "--auto-rewrite-min-size", "1048576", "--appendfsync", "always")
		c := s.Client()
		expectMaxPayload(t, c, 64)
		add(t, c, "q", 0, "second")
		expect(t, c, errPrefix("OOM max-jobs reached (2)"), "DELAY.ADD", "q", 0, "third")
		expect(t, c, []any{"port", strconv.Itoa(s.Port())}, "CONFIG", "GET", "port")
		expect(t, c, []any{"max-payload-bytes", "64"}, "CONFIG", "GET", "max-payload-bytes")
	})

	t.Run("environment", func(t *testing.T) {
		t.Parallel()
		port := freePort(t)
		s := startServerWith(t, port, []string{
			"DELAYD_PORT=" + strconv.Itoa(port),
			"DELAYD_MAX_PAYLOAD_BYTES=100",
			"DELAYD_MAX_JOBS=2",
		}, baseArgs(t)...)
		c := s.Client()
		expectMaxPayload(t, c, 100)
		add(t, c, "q", 0, "second")
		expect(t, c, errPrefix("OOM max-jobs reached (2)"), "DELAY.ADD", "q", 0, "third")
	})

	t.Run("file", func(t *testing.T) {
		t.Parallel()
		port := freePort(t)
		cfg := writeConfig(t, fmt.Sprintf("port: %d\nmax-payload-bytes: 100\nmax-jobs: 5\n", port))
		s := startServerWith(t, port, nil, append(baseArgs(t), "--config", cfg)...)
		c := s.Client()
		expectMaxPayload(t, c, 100)
		expect(t, c, []any{"max-jobs", "5"}, "CONFIG", "GET", "max-jobs")
	})

	t.Run("env beats file", func(t *testing.T) {
		t.Parallel()
		filePort, envPort := freePort(t), freePort(t)
		cfg := writeConfig(t, fmt.Sprintf("port: %d\nmax-payload-bytes: 100\n", filePort))
		s := startServerWith(t, envPort, []string{
			"DELAYD_PORT=" + strconv.Itoa(envPort),
			"DELAYD_MAX_PAYLOAD_BYTES=200",
		}, append(baseArgs(t), "--config", cfg)...)
		expectNotListening(t, filePort, "the file's port, overridden by DELAYD_PORT")
		expectMaxPayload(t, s.Client(), 200)
	})

	t.Run("flag beats env beats file", func(t *testing.T) {
		t.Parallel()
		filePort, envPort, flagPort := freePort(t), freePort(t), freePort(t)
		cfg := writeConfig(t, fmt.Sprintf("port: %d\nmax-payload-bytes: 100\nmax-jobs: 7\n", filePort))
		s := startServerWith(t, flagPort, []string{
			"DELAYD_PORT=" + strconv.Itoa(envPort),
			"DELAYD_MAX_PAYLOAD_BYTES=200",
		}, append(baseArgs(t), "--config", cfg, "--port", strconv.Itoa(flagPort), "--max-payload-bytes", "300")...)
		expectNotListening(t, filePort, "the file's port, overridden by --port")
		expectNotListening(t, envPort, "DELAYD_PORT, overridden by --port")
		c := s.Client()
		expectMaxPayload(t, c, 300)
		// a key set only in the file still applies
		expect(t, c, []any{"max-jobs", "7"}, "CONFIG", "GET", "max-jobs")
	})

	t.Run("requirepass from env", func(t *testing.T) {
		t.Parallel()
		port := freePort(t)
		s := startServerWith(t, port, []string{"DELAYD_REQUIREPASS=s3cret"},
			append(baseArgs(t), "--port", strconv.Itoa(port))...)
		expect(t, s.Client(), errIs("NOAUTH Authentication required."), "PING")
		expect(t, s.Client(func(o *redis.Options) { o.Password = "s3cret" }), "PONG", "PING")
	})
}

// TestSignalAnswersBlockedClientsAndExitsZero: on SIGTERM or SIGINT a client
// blocked in DELAY.POP 0 gets a null reply and the process exits 0.
func TestSignalAnswersBlockedClientsAndExitsZero(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			s := startServer(t)
			// several blocked clients of each kind: the reply to each races
			// with the connections being closed
			waiters := map[string]<-chan popResult{}
			for i := 0; i < 4; i++ {
				waiters[fmt.Sprintf("RESP2 client %d", i)] = popAsync(s.Client(), 10*time.Second, "q", "0")
				waiters[fmt.Sprintf("RESP3 client %d", i)] = popAsync(s.Client3(), 10*time.Second, "q", "0")
			}
			var raws []*rawConn
			for i := 0; i < 4; i++ {
				raw := s.dialRaw(t)
				raw.send("DELAY.POP", "q", "0")
				raws = append(raws, raw)
			}
			s.waitBlocked(t, len(waiters)+len(raws))
			// a delayed job must not be handed out on the way down
			add(t, s.Client(), "q", 60000, "later")

			s.Signal(sig)
			for _, name := range sortedKeys(anyMap(waiters)) {
				r := waitPop(t, waiters[name], 6*time.Second)
				if !errors.Is(r.err, redis.Nil) {
					t.Errorf("%s blocked in DELAY.POP 0: got %s, want a null reply", name, show(r.reply, r.err))
				}
			}
			for i, raw := range raws {
				if line, err := raw.tryReadLine(); line != "*-1" {
					t.Errorf("raw RESP2 client %d blocked in DELAY.POP 0: got %q (%v), want *-1", i, line, err)
				}
			}
			select {
			case <-s.Exited():
			case <-time.After(5 * time.Second):
				t.Fatalf("still running 5 s after %v", sig)
			}
			if code := s.ExitCode(); code != 0 {
				t.Errorf("exit code %d after %v, want 0", code, sig)
			}
			expectNotListening(t, s.Port(), "after the exit")
		})
	}
}

// TestRestartKeepsPort checks the harness itself: Stop and Restart reuse the
// data dir and port, and Stop reports exit code 0.
func TestRestartKeepsPort(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	expect(t, s.Client(), "PONG", "PING")
	if code := s.Stop(); code != 0 {
		t.Errorf("SIGTERM: exit code %d, want 0", code)
	}
	s.Restart()
	expect(t, s.Client(), []any{"port", strconv.Itoa(s.Port())}, "CONFIG", "GET", "port")
	s.Kill9()
	s.Restart()
	expect(t, s.Client(), "PONG", "PING")
}

// runToExit runs the binary with args and env and waits (up to 10 s) for it
// to exit on its own; it returns the exit code and the output.
func runToExit(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(cleanEnv(), env...)
	out := &testserver.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%q: still running after 10 s, want it to refuse to start; output:\n%s", args, out.String())
	}
	return cmd.ProcessState.ExitCode(), out.String()
}

// TestBadConfigRefusesToStart: a value the server cannot use stops the start
// with a non-zero exit and a message naming the setting.
func TestBadConfigRefusesToStart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		env     []string
		args    []string
		mention string
	}{
		{"port not a number", nil, []string{"--port", "notaport"}, "port"},
		{"appendonly", nil, []string{"--appendonly", "maybe"}, "appendonly"},
		{"appendfsync", nil, []string{"--appendonly", "yes", "--appendfsync", "sometimes"}, "appendfsync"},
		{"log-format", nil, []string{"--log-format", "xml"}, "log-format"},
		{"max-payload-bytes", nil, []string{"--max-payload-bytes", "-1"}, "max-payload-bytes"},
		{"env DELAYD_PORT", []string{"DELAYD_PORT=notaport"}, nil, "port"},
		{"missing config file", nil, []string{"--config", "/nonexistent/delayd.yaml"}, "delayd.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := []string{"--bind", "127.0.0.1", "--dir", t.TempDir(), "--appendonly", "no"}
			if tc.env == nil { // else the environment is under test, and a flag would win
				args = append(args, "--port", strconv.Itoa(freePort(t)))
			}
			args = append(args, tc.args...)
			code, out := runToExit(t, tc.env, args...)
			if code == 0 {
				t.Errorf("%q (env %q): exit code 0, want a failure", tc.args, tc.env)
			}
			if !strings.Contains(out, tc.mention) {
				t.Errorf("%q (env %q): output does not name %q:\n%s", tc.args, tc.env, tc.mention, out)
			}
		})
	}
}

// TestShutdownCommand: SHUTDOWN and SHUTDOWN NOSAVE stop the server with
// exit code 0, answering blocked clients with a null reply.
func TestShutdownCommand(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"SHUTDOWN"}, {"SHUTDOWN", "NOSAVE"}, {"SHUTDOWN", "SAVE"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			s := startServer(t)
			w := popAsync(s.Client(), 10*time.Second, "q", "0")
			s.waitBlocked(t, 1)
			rc := s.dialRaw(t)
			rc.send(args...)
			select {
			case <-s.Exited():
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: still running after 5 s", strings.Join(args, " "))
			}
			if code := s.ExitCode(); code != 0 {
				t.Errorf("%s: exit code %d, want 0", strings.Join(args, " "), code)
			}
			// Redis closes the connection without a reply; +OK is tolerated
			if line, err := rc.tryReadLine(); line != "" && line != "+OK" {
				t.Errorf("%s: replied %q (%v), want no reply (or +OK)", strings.Join(args, " "), line, err)
			}
			if r := waitPop(t, w, 5*time.Second); !errors.Is(r.err, redis.Nil) {
				t.Errorf("client blocked in DELAY.POP 0 during %s: got %s, want a null reply", strings.Join(args, " "), show(r.reply, r.err))
			}
		})
	}
}

// anyMap is for sortedKeys.
func anyMap[V any](m map[string]V) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestDefaults: with no settings but the port, CONFIG GET shows the
// defaults SPEC lists.
func TestDefaults(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	// run in its own working directory: the default dir is ./data
	s := startServerWith(t, port, nil, "--port", strconv.Itoa(port), "--log-level", "warn")
	c := s.Client()
	want := map[string]string{
		"bind":                    "127.0.0.1",
		"port":                    strconv.Itoa(port),
		"dir":                     "./data",
		"appendonly":              "yes",
		"appendfsync":             "everysec",
		"max-payload-bytes":       "4194304",
		"max-jobs":                "0",
		"max-clients":             "10000",
		"ack-timeout":             "0",
		"tick":                    "1",
		"auto-rewrite-percentage": "100",
		"auto-rewrite-min-size":   "67108864",
		"slowlog-log-slower-than": "10000",
		"slowlog-max-len":         "128",
	}
	for k, w := range want {
		expect(t, c, []any{k, w}, "CONFIG", "GET", k)
	}
	expect(t, c, "PONG", "PING")
}
