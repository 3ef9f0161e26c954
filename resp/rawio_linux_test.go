package resp

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// rawPair is a connected TCP pair whose server side is wrapped by fastIO.
func rawPair(t *testing.T) (srv net.Conn, cli net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cli, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	srv = fastIO(nc)
	if _, ok := srv.(*rawConn); !ok {
		t.Fatalf("fastIO did not wrap a TCP connection: %T", srv)
	}
	t.Cleanup(func() { srv.Close(); cli.Close() })
	return srv, cli
}

func TestRawConnReadsUntilEOF(t *testing.T) {
	srv, cli := rawPair(t)
	go func() {
		cli.Write([]byte("*1\r\n$4\r\nPING\r\n"))
		cli.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(srv)
	if err != nil || string(got) != "*1\r\n$4\r\nPING\r\n" {
		t.Fatalf("read %q, %v", got, err)
	}
	if n, err := srv.Read(make([]byte, 8)); n != 0 || err != io.EOF {
		t.Fatalf("after EOF: %d, %v", n, err)
	}
}

// A read deadline (Server.Close, CLIENT KILL, --timeout) ends a read; its
// error must take isTimeout's fast path, as net.Conn's does.
func TestRawConnDeadlineIsTimeout(t *testing.T) {
	srv, _ := rawPair(t)
	srv.SetReadDeadline(time.Now())
	_, err := srv.Read(make([]byte, 8))
	oe, ok := err.(*net.OpError)
	if !ok || oe.Err != os.ErrDeadlineExceeded || oe.Op != "read" || !isTimeout(err) {
		t.Fatalf("deadline: %#v", err)
	}
	// A blocked Read is woken by a deadline set from another goroutine.
	srv.SetReadDeadline(time.Time{})
	done := make(chan error, 1)
	go func() { _, err := srv.Read(make([]byte, 8)); done <- err }()
	srv.SetReadDeadline(time.Now()) // before or during the Read: either must end it
	if err := <-done; !isTimeout(err) {
		t.Fatalf("woken read: %v", err)
	}
}

// A write larger than the socket buffers waits on the poller (EAGAIN) and
// delivers every byte in order.
func TestRawConnLargeWrite(t *testing.T) {
	srv, cli := rawPair(t)
	want := make([]byte, 8<<20)
	for i := range want {
		want[i] = byte(i * 7)
	}
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(cli, int64(len(want))))
		got <- b
	}()
	n, err := srv.Write(want)
	if n != len(want) || err != nil {
		t.Fatalf("write: %d, %v", n, err)
	}
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatalf("peer got %d bytes, not the %d written", len(b), len(want))
	}
}

func TestRawConnClosed(t *testing.T) {
	srv, _ := rawPair(t)
	srv.Close()
	if _, err := srv.Read(make([]byte, 8)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
	if _, err := srv.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after close: %v", err)
	}
	// A peer that reset the connection gives an error, not a hang.
	srv2, cli2 := rawPair(t)
	cli2.(*net.TCPConn).SetLinger(0)
	cli2.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := srv2.Write(bytes.Repeat([]byte("y"), 64<<10))
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("writes to a reset connection kept succeeding")
		}
	}
}
