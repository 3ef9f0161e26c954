package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// server is one fresh redis-server or delayd process, pinned to the server
// CPU, with its own data directory, on a free loopback port.
type server struct {
	kind string // "delayd" or "redis"
	addr string
	cmd  *exec.Cmd
	dir  string
}

// freePort asks the kernel for a free loopback port. Another process could
// take it before the server binds; startServer then fails to become ready
// and the run stops with that error rather than measuring the wrong thing.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startServer starts a fresh server of kind under `taskset -c cpu`.
// Both sides log with appendfsync everysec; everything else is each
// server's default, as a user would run it.
func startServer(kind string, cfg *config) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(cfg.work, kind+"-")
	if err != nil {
		return nil, err
	}
	var args []string
	switch kind {
	case "delayd":
		args = []string{cfg.delayd, "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir,
			"--appendonly", "yes", "--appendfsync", "everysec", "--http-addr", "", "--log-level", "warn"}
	case "redis":
		args = []string{cfg.redis, "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir,
			"--save", "", "--appendonly", "yes", "--appendfsync", "everysec", "--daemonize", "no",
			"--logfile", filepath.Join(dir, "redis.log")}
	default:
		return nil, fmt.Errorf("unknown server kind %q", kind)
	}
	// taskset execs the server, so the pid we get is the server's own.
	cmd := exec.Command("taskset", append([]string{"-c", cfg.serverCPU}, args...)...)
	logf, err := os.Create(filepath.Join(dir, "stdout.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// If the harness dies, so does the server: nothing outlives a run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{kind: kind, addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: cmd, dir: dir}
	if err := s.waitReady(10 * time.Second); err != nil {
		s.stop()
		return nil, fmt.Errorf("%s on %s: %w (see %s)", kind, s.addr, err, logf.Name())
	}
	return s, nil
}

func (s *server) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	// Wait for the port first: go-redis logs every refused dial.
	for {
		nc, err := net.DialTimeout("tcp", s.addr, time.Second)
		if err == nil {
			nc.Close()
			break
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
	c := redis.NewClient(&redis.Options{Addr: s.addr, PoolSize: 1, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop ends the server (SIGTERM, then SIGKILL after 5 s) and removes its data.
func (s *server) stop() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = s.cmd.Process.Kill()
			<-done
		}
	}
	_ = os.RemoveAll(s.dir)
}

// cpu is the server's CPU time so far: utime+stime of every thread, plus
// cutime+cstime of children it waited for (Redis's AOF rewrite fork).
func (s *server) cpu() (time.Duration, error) { return procCPU(s.cmd.Process.Pid) }

// clkTck is USER_HZ; it is 100 on every Linux ABI Go supports.
const clkTck = 100

func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces; fields are counted after its ")".
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	// After ")": f[0] is field 3 (state); utime is field 14 -> f[11].
	var ticks int64
	for _, k := range []int{11, 12, 13, 14} {
		v, err := strconv.ParseInt(f[k], 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / clkTck, nil
}

// cpuModel reads the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "?"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}
