package chaos

import (
	"bytes"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// Nodes in these tests: "a" dials from 127.0.0.11, "b" from 127.0.0.12;
// "b" runs the echo server behind the proxy's listener for "b".
const ipA, ipB = "127.0.0.11", "127.0.0.12"

// peer is a plain TCP server standing in for a node's bus: it echoes what
// it reads, records it, and can push bytes of its own to every client.
type peer struct {
	ln    net.Listener
	mu    sync.Mutex
	got   bytes.Buffer
	conns []net.Conn
	wg    sync.WaitGroup
	echo  bool
}

func newPeer(t *testing.T, echo bool) *peer {
	t.Helper()
	ln, err := net.Listen("tcp", ipB+":0")
	if err != nil {
		t.Fatal(err)
	}
	s := &peer{ln: ln, echo: echo}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						s.mu.Lock()
						s.got.Write(buf[:n])
						s.mu.Unlock()
						if s.echo {
							if _, err := c.Write(buf[:n]); err != nil {
								return
							}
						}
					}
					if err != nil {
						if errors.Is(err, io.EOF) {
							// half-close from the client: answer, then close
							_, _ = c.Write([]byte("bye"))
						}
						c.Close()
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *peer) addr() string { return s.ln.Addr().String() }

func (s *peer) received() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got.String()
}

func (s *peer) accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// push writes msg to every connection the server holds.
func (s *peer) push(t *testing.T, msg string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatalf("push: %v", err)
		}
	}
}

func (s *peer) close() {
	s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// setup starts a server for node b and a proxy in front of it, and returns
// the proxy and the address a dials.
func setup(t *testing.T, echo bool, opts ProxyOptions) (*Proxy, *peer, string) {
	t.Helper()
	srv := newPeer(t, echo)
	opts.Logf = t.Logf
	p := NewProxy(opts)
	t.Cleanup(func() { p.Close() })
	addr, err := p.Listen("b", "127.0.0.1:0", srv.addr())
	if err != nil {
		t.Fatal(err)
	}
	p.MapIP(ipA, "a")
	p.MapIP(ipB, "b")
	return p, srv, addr
}

// dialFrom dials addr from the given local IP, as a node dials from its bus host.
func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 2 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func write(t *testing.T, c net.Conn, s string) {
	t.Helper()
	if _, err := c.Write([]byte(s)); err != nil {
		t.Fatalf("write %q: %v", s, err)
	}
}

// readN reads exactly len(want) bytes within limit and compares.
func readN(t *testing.T, c net.Conn, want string, limit time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(limit))
	buf := make([]byte, len(want))
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatalf("read %q: got %q, %v", want, buf, err)
	}
	if string(buf) != want {
		t.Fatalf("read %q, got %q", want, buf)
	}
}

// nothing asserts that no byte arrives within d: the one place these tests
// must wait, since the claim is that something does not happen.
func nothing(t *testing.T, c net.Conn, d time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	var ne net.Error
	if n > 0 || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("expected silence for %v, got %q, %v", d, buf[:n], err)
	}
}

// eventually polls cond for up to 2 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func TestProxyForwardsAndTellsNodesApart(t *testing.T) {
	p, srv, addr := setup(t, true, ProxyOptions{})
	c := dialFrom(t, ipA, addr)
	write(t, c, "ping")
	readN(t, c, "ping", 2*time.Second)
	if srv.received() != "ping" {
		t.Fatalf("server got %q", srv.received())
	}
	// A fault between b and some other node leaves a's connection alone:
	// the proxy knows it comes from a by its source IP.
	p.Drop("b", "c")
	write(t, c, "pong")
	readN(t, c, "pong", 2*time.Second)
	// The same fault for a stops it.
	p.Drop("a", "b")
	write(t, c, "lost?")
	nothing(t, c, 100*time.Millisecond)
	if st := p.Stats(); st.Conns != 1 || st.Accepted != 1 || st.Bytes != 16 {
		t.Fatalf("stats %+v, want 1 conn, 1 accepted, 16 bytes", st)
	}
}

func TestProxyDropHoldsBothWaysAndHealResumesInOrder(t *testing.T) {
	p, srv, addr := setup(t, false, ProxyOptions{})
	c := dialFrom(t, ipA, addr)
	write(t, c, "1")
	eventually(t, "first byte", func() bool { return srv.received() == "1" })

	p.Drop("a", "b")
	if !p.Blocked("a", "b") || !p.Blocked("b", "a") {
		t.Fatalf("drop is not both ways: %s", p.Faults())
	}
	write(t, c, "2")
	write(t, c, "3")
	srv.push(t, "x")
	nothing(t, c, 100*time.Millisecond)
	if got := srv.received(); got != "1" {
		t.Fatalf("server got %q through a partition", got)
	}

	p.Heal("a", "b")
	if p.Faults() != "none" {
		t.Fatalf("faults after heal: %s", p.Faults())
	}
	eventually(t, "held bytes", func() bool { return srv.received() == "123" })
	readN(t, c, "x", 2*time.Second)
	write(t, c, "4")
	eventually(t, "bytes after heal", func() bool { return srv.received() == "1234" })
}

func TestProxyNewConnectionDuringDropIsBlackholed(t *testing.T) {
	p, srv, addr := setup(t, true, ProxyOptions{})
	p.Isolate("b")
	// The dial succeeds (the kernel accepts for the proxy), but nothing
	// reaches the node: it is not even dialed.
	c := dialFrom(t, ipA, addr)
	write(t, c, "hello")
	nothing(t, c, 150*time.Millisecond)
	if n := srv.accepted(); n != 0 {
		t.Fatalf("node saw %d connections during the partition", n)
	}
	p.HealAll()
	readN(t, c, "hello", 2*time.Second)
	if n := srv.accepted(); n != 1 {
		t.Fatalf("node saw %d connections after heal, want 1", n)
	}
}

func TestProxyOneWay(t *testing.T) {
	p, srv, addr := setup(t, false, ProxyOptions{})
	c := dialFrom(t, ipA, addr)
	write(t, c, "hi")
	eventually(t, "hi", func() bool { return srv.received() == "hi" })

	// a's bytes stop; b's still arrive.
	p.OneWay("a", "b")
	write(t, c, "stuck")
	srv.push(t, "from-b")
	readN(t, c, "from-b", 2*time.Second)
	time.Sleep(50 * time.Millisecond)
	if got := srv.received(); got != "hi" {
		t.Fatalf("a's bytes crossed a one-way partition: %q", got)
	}
	p.Heal("a", "b")
	eventually(t, "held bytes", func() bool { return srv.received() == "histuck" })

	// The other way round: b's bytes stop; a's still arrive.
	p.OneWay("b", "a")
	srv.push(t, "held")
	write(t, c, "!")
	eventually(t, "a's byte", func() bool { return srv.received() == "histuck!" })
	nothing(t, c, 100*time.Millisecond)
	p.HealAll()
	readN(t, c, "held", 2*time.Second)
}

func TestProxyDelay(t *testing.T) {
	p, _, addr := setup(t, true, ProxyOptions{})
	c := dialFrom(t, ipA, addr)
	const d = 60 * time.Millisecond
	p.Delay("a", "b", d)
	p.Delay("b", "a", d)
	start := time.Now()
	write(t, c, "x")
	readN(t, c, "x", 2*time.Second)
	if rtt := time.Since(start); rtt < 2*d {
		t.Fatalf("round trip %v with %v each way", rtt, d)
	}
	// Delay is latency, not a throughput cap: ten chunks sent in a row
	// arrive about one delay each way later, not ten.
	start = time.Now()
	for i := 0; i < 10; i++ {
		write(t, c, "y")
		time.Sleep(2 * time.Millisecond) // separate chunks
	}
	readN(t, c, strings.Repeat("y", 10), 2*time.Second)
	if took := time.Since(start); took > 6*d {
		t.Fatalf("10 chunks took %v with %v each way: delays add up", took, d)
	}
	p.Delay("a", "b", 0)
	p.Delay("b", "a", 0)
	if p.Faults() != "none" {
		t.Fatalf("faults after removing delays: %s", p.Faults())
	}
}

func TestProxyPartitionAndIsolateSetEveryPair(t *testing.T) {
	p := NewProxy(ProxyOptions{})
	defer p.Close()
	for i, n := range []string{"n1", "n2", "n3", "n4", "n5"} {
		p.MapIP("127.0.0.2"+string(rune('0'+i)), n)
	}
	p.Partition([]string{"n1", "n2"}, []string{"n3", "n4", "n5"})
	for _, a := range []string{"n1", "n2"} {
		for _, b := range []string{"n3", "n4", "n5"} {
			if !p.Blocked(a, b) || !p.Blocked(b, a) {
				t.Fatalf("%s and %s not partitioned", a, b)
			}
		}
	}
	if p.Blocked("n1", "n2") || p.Blocked("n3", "n5") {
		t.Fatal("a partition cut a side in two")
	}
	p.HealAll()
	p.Isolate("n3")
	for _, n := range []string{"n1", "n2", "n4", "n5"} {
		if !p.Blocked("n3", n) || !p.Blocked(n, "n3") {
			t.Fatalf("n3 not isolated from %s", n)
		}
	}
	if p.Blocked("n1", "n2") {
		t.Fatal("isolating n3 cut n1 from n2")
	}
}

func TestProxyNodeDownClosesTheDialer(t *testing.T) {
	p := NewProxy(ProxyOptions{Logf: t.Logf})
	defer p.Close()
	dead := func() string { // a port nobody listens on
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}()
	addr, err := p.Listen("b", "127.0.0.1:0", dead)
	if err != nil {
		t.Fatal(err)
	}
	c := dialFrom(t, ipA, addr)
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("read through a proxy to a dead node succeeded")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the dialer was held, not closed, when the node was down")
	}
	eventually(t, "refused count", func() bool { return p.Stats().Refused == 1 })
}

func TestProxyHalfClosePassesThrough(t *testing.T) {
	_, _, addr := setup(t, true, ProxyOptions{})
	c := dialFrom(t, ipA, addr)
	write(t, c, "abc")
	readN(t, c, "abc", 2*time.Second)
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	// The server saw EOF and answered on its still-open side.
	readN(t, c, "bye", 2*time.Second)
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("after the server closed: %v, want EOF", err)
	}
}

func TestProxyMaxConnsAndSever(t *testing.T) {
	p, _, addr := setup(t, true, ProxyOptions{MaxConns: 2})
	c1 := dialFrom(t, ipA, addr)
	c2 := dialFrom(t, ipA, addr)
	write(t, c1, "1")
	readN(t, c1, "1", 2*time.Second)
	write(t, c2, "2")
	readN(t, c2, "2", 2*time.Second)
	c3 := dialFrom(t, ipA, addr)
	_ = c3.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c3.Read(make([]byte, 1)); err == nil {
		t.Fatal("a third connection over MaxConns 2 was served")
	}
	p.Sever("b", "a")
	for _, c := range []net.Conn{c1, c2} {
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("a severed connection still reads")
		}
	}
	eventually(t, "no connection held", func() bool { return p.Stats().Conns == 0 })
	c4 := dialFrom(t, ipA, addr)
	write(t, c4, "4")
	readN(t, c4, "4", 2*time.Second)
}

// TestProxyCloseLeaksNothing holds connections in every state (forwarding,
// stalled mid-stream, blackholed before dialing, delayed) and checks that
// Close returns with every goroutine of the proxy gone.
func TestProxyCloseLeaksNothing(t *testing.T) {
	before := runtime.NumGoroutine()
	srv := newPeer(t, true)
	p := NewProxy(ProxyOptions{})
	addr, err := p.Listen("b", "127.0.0.1:0", srv.addr())
	if err != nil {
		t.Fatal(err)
	}
	p.MapIP(ipA, "a")
	p.MapIP("127.0.0.13", "c")
	p.MapIP("127.0.0.14", "d")
	var clients []net.Conn
	dial := func(ip string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
		return c
	}
	live := dial(ipA)
	write(t, live, "x")
	readN(t, live, "x", 2*time.Second)
	stalled := dial("127.0.0.13")
	write(t, stalled, "y")
	readN(t, stalled, "y", 2*time.Second)
	p.Drop("c", "b")
	write(t, stalled, "held")
	p.Isolate("d")
	dial("127.0.0.14") // blackholed
	p.Delay("a", "b", time.Hour)
	write(t, live, "late")
	eventually(t, "3 connections held", func() bool { return p.Stats().Conns == 3 })
	if runtime.NumGoroutine() <= before {
		t.Fatal("the proxy started no goroutines?")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Conns != 0 {
		t.Fatalf("%d connections held after Close", st.Conns)
	}
	for _, c := range clients {
		c.Close()
	}
	srv.close()
	eventually(t, "goroutines back to the count before the test", func() bool {
		return runtime.NumGoroutine() <= before
	})
}
