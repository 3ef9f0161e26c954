package testserver

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrPortTaken marks a start that failed because another process held one
// of the server's ports: a start on fresh ports, or the same start a moment
// later, may succeed.
var ErrPortTaken = errors.New("address already in use")

// Server is one server process, started and stopped as often as a test
// likes on the same ports and dirs. The exported fields are read at each
// start, so a test may change them in between (a restart with more flags).
type Server struct {
	Bin  string   // the binary: delayd, or redis-server for compat's check of the checks
	Args []string // the whole argument list
	// Env is added to a copy of the test's environment without DELAYD_*
	// (see CleanEnv).
	Env []string
	Dir string // the working directory
	// TLS, when set, is how the readiness PING reaches a server whose port
	// is its TLS port (--port 0 --tls-port).
	TLS *tls.Config
	// ReadyWithin bounds the wait for the first reply to PING (10 s when 0).
	ReadyWithin time.Duration

	port int
	out  Buffer

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{} // closed when the process has exited
	exitCode int
}

// New returns a server of bin on port (the RESP port the readiness PING
// goes to) with args, not started yet.
func New(bin string, port int, dir string, args ...string) *Server {
	return &Server{Bin: bin, Args: args, Dir: dir, port: port}
}

// Buffer collects a process's output: exec copies stdout and stderr from
// goroutines of its own while the test reads what came so far.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (o *Buffer) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

func (o *Buffer) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// CleanEnv is the test's environment without any DELAYD_ variable, so the
// machine's settings never leak into a test, and with the HTTP side off:
// servers run side by side, and only the tests of it ask for it (a flag
// beats the environment).
func CleanEnv() []string {
	env := []string{"DELAYD_HTTP_ADDR="}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DELAYD_") {
			env = append(env, kv)
		}
	}
	return env
}

// Addr is host:port of the server.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port is the server's RESP port (its TLS port when TLS is set).
func (s *Server) Port() int { return s.port }

// Output is everything the process printed, over all its runs.
func (s *Server) Output() string { return s.out.String() }

// OutputHas waits up to d for the output to hold want: a line the server
// logged before it answered may still be on its way through the pipe that
// copies its output.
func (s *Server) OutputHas(want string, d time.Duration) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(10 * time.Millisecond) {
		if strings.Contains(s.out.String(), want) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// Start starts the process and waits until it answers PING. On error the
// process is gone (a server that did not answer got SIGQUIT, so its
// goroutines are in the output), and the error wraps ErrPortTaken when
// this run said a port was in use.
func (s *Server) Start() error {
	before := len(s.out.String())
	if err := s.Spawn(); err != nil {
		return err
	}
	limit := s.ReadyWithin
	if limit == 0 {
		limit = 10 * time.Second
	}
	err := s.WaitReady(limit)
	if err == nil {
		return nil
	}
	if s.Running() {
		s.quit()
	}
	if strings.Contains(s.out.String()[before:], "address already in use") {
		return fmt.Errorf("%w: %v", ErrPortTaken, err)
	}
	return err
}

// Spawn starts the process and returns at once.
func (s *Server) Spawn() error {
	cmd := exec.Command(s.Bin, s.Args...)
	cmd.Dir = s.Dir
	cmd.Env = append(CleanEnv(), s.Env...)
	cmd.Stdout = &s.out
	cmd.Stderr = &s.out
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

// WaitReady polls with a raw PING until any reply but -LOADING (+PONG, or
// -NOAUTH when a password is set that is not in the arguments) comes back,
// the process exits, or limit passes. With a password (see Password) the
// PING follows an AUTH, so the load is seen through the password too: a
// PING alone gets -NOAUTH while the log loads (authentication is checked
// before loading, as Redis does), and the test's first command -LOADING.
func (s *Server) WaitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	pass := s.Password()
	done := s.Exited()
	for {
		select {
		case <-done:
			return fmt.Errorf("server exited with code %d before it answered PING on %s", s.ExitCode(), s.Addr())
		default:
		}
		if PingAuth(s.Addr(), s.TLS, pass) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no reply to PING on %s within %v", s.Addr(), limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Password is the last --requirepass of the arguments, or else
// DELAYD_REQUIREPASS of Env ("" when neither).
func (s *Server) Password() string {
	pass := ""
	for _, kv := range s.Env {
		if v, ok := strings.CutPrefix(kv, "DELAYD_REQUIREPASS="); ok {
			pass = v
		}
	}
	for i, a := range s.Args {
		if a == "--requirepass" && i+1 < len(s.Args) {
			pass = s.Args[i+1]
		} else if v, ok := strings.CutPrefix(a, "--requirepass="); ok {
			pass = v
		}
	}
	return pass
}

// Running reports whether the process of the last start runs.
func (s *Server) Running() bool {
	done := s.Exited()
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

// Exited returns a channel closed when the current process has exited (nil
// before the first start).
func (s *Server) Exited() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

// ExitCode is the exit code of the last run (-1 when killed by a signal).
func (s *Server) ExitCode() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exitCode
}

// Pid is the process id of the last start.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd.Process.Pid
}

// Signal sends sig to the process.
func (s *Server) Signal(sig os.Signal) error {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		return errors.New("testserver: signal to a server never started")
	}
	return cmd.Process.Signal(sig)
}

// Stop sends SIGTERM and waits up to limit; a server still running then
// gets SIGQUIT (the Go runtime prints every goroutine into the output) and,
// 2 s later, SIGKILL. ok is false when SIGTERM was not enough. A server
// never started, or already gone, is stopped at once.
func (s *Server) Stop(limit time.Duration) (code int, ok bool) {
	if !s.Running() {
		return s.ExitCode(), true
	}
	_ = s.Signal(syscall.SIGTERM)
	select {
	case <-s.Exited():
		return s.ExitCode(), true
	case <-time.After(limit):
	}
	s.quit()
	return s.ExitCode(), false
}

// quit sends SIGQUIT and, if the process is still there 2 s later, SIGKILL.
func (s *Server) quit() {
	_ = s.Signal(syscall.SIGQUIT)
	select {
	case <-s.Exited():
	case <-time.After(2 * time.Second):
		s.Kill()
	}
}

// Kill ends the process with SIGKILL, as a crash or a pulled plug would (no
// clean shutdown, no goodbye to its clients or peers), and waits for it.
func (s *Server) Kill() {
	if !s.Running() {
		return
	}
	_ = s.Signal(syscall.SIGKILL)
	<-s.Exited()
}

// Restart stops the server if it runs (SIGTERM, at most 5 s) and starts it
// again with the same ports, dirs and arguments. A restart keeps its ports
// (a cluster node is known by its bus address), and after a kill another
// process's outgoing connection may hold one for a moment: such a start is
// tried again, up to 5 times, 500 ms apart. ok is false when the stop
// needed more than SIGTERM.
func (s *Server) Restart() (ok bool, err error) {
	ok = true
	if s.Running() {
		_, ok = s.Stop(5 * time.Second)
	}
	for try := 1; ; try++ {
		err := s.Start()
		if err == nil || try == 5 || !errors.Is(err, ErrPortTaken) {
			return ok, err
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// StartFresh starts a server made by mk on n ports taken from p, and on new
// ones when another process bound one between Take and the server's bind (3
// tries). On error it returns the last server made, stopped, with its
// output, when there is one.
func StartFresh[S interface{ Start() error }](p *Ports, n int, mk func(ports []int) S) (S, error) {
	var last S
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		ports := make([]int, n)
		for i := range ports {
			if ports[i], err = p.Local(); err != nil {
				return last, err
			}
		}
		last = mk(ports)
		if err = last.Start(); err == nil || !errors.Is(err, ErrPortTaken) {
			return last, err
		}
	}
	return last, err
}
