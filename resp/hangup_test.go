package resp

import (
	"bufio"
	"crypto/tls"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/delayd/delayd/commands"
	"github.com/delayd/delayd/engine"
	"github.com/delayd/delayd/tlsconf"
	"github.com/delayd/delayd/tlsconf/tlstest"
)

// waitFor waits until cond holds. The server notices a hang-up on its
// own goroutines, so this polls, yielding, up to a bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s", what)
		}
		runtime.Gosched()
	}
}

// hangupServer is a server on loopback, plain or (with st) TLS only.
func hangupServer(t *testing.T, st *tls.Config) (*engine.Engine, *commands.Dispatcher, string) {
	t.Helper()
	eng, err := engine.New(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	d := commands.New(commands.Options{Engine: eng, Version: "test", Config: map[string]string{}, Log: zerolog.Nop()})
	opts := Options{Addr: "127.0.0.1:0", MaxClients: 100, Dispatcher: d, Log: zerolog.Nop()}
	if st != nil {
		opts.Addr, opts.TLSAddr, opts.TLS = "", "127.0.0.1:0", st
	}
	srv, err := Listen(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	t.Cleanup(func() { srv.Close(time.Second) })
	return eng, d, srv.Addr().String()
}

// plainClient dials the server over TCP, closed at the test's end.
func plainClient(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	return c, bufio.NewReader(c)
}

// popsRightAfter proves a job added now goes to a live client, not to a
// waiter that has left.
func popsRightAfter(t *testing.T, live net.Conn, lr *bufio.Reader, add net.Conn, ar *bufio.Reader) {
	t.Helper()
	if _, err := add.Write([]byte("*4\r\n$9\r\nDELAY.ADD\r\n$1\r\nq\r\n$1\r\n0\r\n$3\r\njob\r\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := ar.ReadSlice('\n'); err != nil {
		t.Fatal(err)
	}
	if _, err := live.Write([]byte("*3\r\n$9\r\nDELAY.POP\r\n$1\r\nq\r\n$1\r\n5\r\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := lr.ReadString('\n'); err != nil || line != "*3\r\n" {
		t.Fatalf("the live client's DELAY.POP: %q, %v; want the job", line, err)
	}
}

// A client that sends a blocking pop and hangs up at once, possibly before
// the server has parked it, or that resets the connection, is noticed: its
// connection ends and it leaves no waiter behind to take a job.
func TestHangUpBeforeOrWhileBlocked(t *testing.T) {
	eng, d, addr := hangupServer(t, nil)
	dial := func() (net.Conn, *bufio.Reader) { return plainClient(t, addr) }
	var total int64
	for _, reset := range []bool{false, true} {
		for range 20 {
			dead, _ := dial()
			if reset {
				dead.(*net.TCPConn).SetLinger(0)
			}
			if _, err := dead.Write([]byte("*3\r\n$9\r\nDELAY.POP\r\n$1\r\nq\r\n$1\r\n0\r\n")); err != nil {
				t.Fatal(err)
			}
			dead.Close()
		}
		// Accepted (a dial completes before the server takes it) and ended.
		total += 20
		waitFor(t, "the dead clients' connections to end", func() bool {
			return d.TotalConns.Load() == total && d.Connected.Load() == 0
		})
		if n := eng.Metrics(0).Waiters; n != 0 {
			t.Fatalf("%d waiters left by clients that hung up", n)
		}
		live, lr := dial()
		add, ar := dial()
		popsRightAfter(t, live, lr, add, ar)
		live.Close()
		add.Close()
		total += 2
		waitFor(t, "the live clients' connections to end", func() bool {
			return d.TotalConns.Load() == total && d.Connected.Load() == 0
		})
	}
}

// A TLS socket cannot be asked with ppoll past crypto/tls: its watcher's
// read alone notices a blocked TLS client that leaves.
func TestTLSBlockedClientHangsUp(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "hang-up ca")
	cert, key := ca.Server(t, 2).Write(t, dir, "server")
	st, err := tlsconf.New(tlsconf.Files{Cert: cert, Key: key, CA: ca.WriteCA(t, dir, "ca"), Auth: tlsconf.AuthYes})
	if err != nil {
		t.Fatal(err)
	}
	eng, d, addr := hangupServer(t, st.Config())
	cfg := &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{ca.Client(t, 3).TLS}, ServerName: "127.0.0.1"}
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(30 * time.Second))
		return c, bufio.NewReader(c)
	}
	dead, _ := dial()
	if _, err := dead.Write([]byte("*3\r\n$9\r\nDELAY.POP\r\n$1\r\nq\r\n$1\r\n0\r\n")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pop to park", func() bool { return eng.Metrics(0).Waiters == 1 })
	dead.Close()
	waitFor(t, "the dead client's connection to end", func() bool { return d.Connected.Load() == 0 })
	if n := eng.Metrics(0).Waiters; n != 0 {
		t.Fatalf("%d waiters left by a client that hung up", n)
	}
	live, lr := dial()
	add, ar := dial()
	popsRightAfter(t, live, lr, add, ar)
}

// Clients parked ahead of a live one hang up and the job comes at once,
// perhaps before the server has noticed: the job is handed back from each
// dead waiter it reaches and gets to the live one. Only the poll before the
// reply makes this hold: with a watcher alone (stopped by a read deadline
// before it read the hang-up) it failed 1 to 3 runs in 30.
func TestJobServedAsClientsHangUp(t *testing.T) {
	eng, _, addr := hangupServer(t, nil)
	dial := func() (net.Conn, *bufio.Reader) { return plainClient(t, addr) }
	pop := []byte("*3\r\n$9\r\nDELAY.POP\r\n$1\r\nq\r\n$1\r\n0\r\n")
	for round := range 10 {
		var dead []net.Conn
		for i := range 8 {
			c, _ := dial()
			if _, err := c.Write(pop); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "a pop to park", func() bool { return eng.Metrics(0).Waiters == i+1 })
			dead = append(dead, c)
		}
		live, lr := dial()
		if _, err := live.Write(pop); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the live pop to park", func() bool { return eng.Metrics(0).Waiters == 9 })
		for _, c := range dead {
			c.Close()
		}
		add, ar := dial()
		if _, err := add.Write([]byte("*4\r\n$9\r\nDELAY.ADD\r\n$1\r\nq\r\n$1\r\n0\r\n$3\r\njob\r\n")); err != nil {
			t.Fatal(err)
		}
		if _, err := ar.ReadSlice('\n'); err != nil {
			t.Fatal(err)
		}
		live.SetReadDeadline(time.Now().Add(5 * time.Second))
		if line, err := lr.ReadString('\n'); err != nil || line != "*3\r\n" {
			t.Fatalf("round %d: the live client's pop: %q, %v; want the job", round, line, err)
		}
		for range 6 { // queue, id, job
			if _, err := lr.ReadString('\n'); err != nil {
				t.Fatal(err)
			}
		}
		live.Close()
		add.Close()
		waitFor(t, "no waiters", func() bool { return eng.Metrics(0).Waiters == 0 })
	}
}
