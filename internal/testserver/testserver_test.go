package testserver

import (
	"bufio"
	"net"
	"strings"
	"sync/atomic"
	"testing"
)

// Ports never hands a port out twice and stays in its range.
func TestPortsOnceInRange(t *testing.T) {
	p := NewPorts(Range{40100, 40109}) // ten ports; some may be busy on this machine
	seen := map[int]bool{}
	for {
		port, err := p.Local()
		if err != nil {
			break
		}
		if port < 40100 || port > 40109 {
			t.Fatalf("port %d outside 40100-40109", port)
		}
		if seen[port] {
			t.Fatalf("port %d handed out twice", port)
		}
		seen[port] = true
	}
	if len(seen) == 0 || len(seen) > 10 {
		t.Fatalf("%d ports handed out of a range of 10", len(seen))
	}
}

// The password is the last one given, a flag beating the environment.
func TestPassword(t *testing.T) {
	s := New("delayd", 1, "", "--requirepass", "a", "--requirepass=b")
	s.Env = []string{"DELAYD_REQUIREPASS=env"}
	if got := s.Password(); got != "b" {
		t.Fatalf("Password() = %q, want b", got)
	}
	s.Args = nil
	if got := s.Password(); got != "env" {
		t.Fatalf("Password() = %q, want env", got)
	}
}

// Do authenticates, and reads status, integer, bulk and error replies;
// readiness counts -NOAUTH as up and -LOADING as not yet.
func TestDoAndPing(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var loading atomic.Bool
	loading.Store(true)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			r := bufio.NewReader(c)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					break
				}
				if !strings.HasPrefix(line, "*") {
					continue
				}
				var args []string
				for n := int(line[1] - '0'); n > 0; n-- {
					_, _ = r.ReadString('\n')
					a, _ := r.ReadString('\n')
					args = append(args, strings.TrimSpace(a))
				}
				switch strings.Join(args, " ") {
				case "AUTH pw":
					_, _ = c.Write([]byte("+OK\r\n"))
				case "PING":
					if loading.Load() {
						_, _ = c.Write([]byte("-LOADING loading the dataset\r\n"))
					} else {
						_, _ = c.Write([]byte("-NOAUTH Authentication required.\r\n"))
					}
				case "INFO replication":
					_, _ = c.Write([]byte("$23\r\n# Replication\r\nrole:x\r\n\r\n"))
				case "DBSIZE":
					_, _ = c.Write([]byte(":7\r\n"))
				default:
					_, _ = c.Write([]byte("-ERR unknown\r\n"))
				}
			}
			c.Close()
		}
	}()
	addr := l.Addr().(*net.TCPAddr)
	if PingAuth(addr.String(), nil, "pw") {
		t.Fatal("-LOADING counted as ready")
	}
	loading.Store(false)
	if !Ping(addr.String()) {
		t.Fatal("-NOAUTH not counted as up")
	}
	s := New("delayd", addr.Port, "", "--requirepass", "pw")
	info, err := s.Do("INFO", "replication")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := InfoField(info, "role"); !ok || v != "x" {
		t.Fatalf("INFO role: %q %v in %q", v, ok, info)
	}
	if n, err := s.Do("DBSIZE"); err != nil || n != "7" {
		t.Fatalf("DBSIZE: %q %v", n, err)
	}
	if _, err := s.Do("NOPE"); err == nil || err.Error() != "ERR unknown" {
		t.Fatalf("an error reply: %v", err)
	}
}
