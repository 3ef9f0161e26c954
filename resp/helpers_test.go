package resp

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/delayd/delayd/commands"
	"github.com/delayd/delayd/engine"
)

// inProcess starts a server with its own engine in this process, on a free
// loopback port, and returns the engine and a dial function: each call opens a client
// connection (read through a bufio.Reader of bufSize bytes) with a 60 s
// deadline, room for -race on a busy machine. Everything closes when the
// test ends.
func inProcess(tb testing.TB, opts engine.Options, bufSize int) (*engine.Engine, func() (net.Conn, *bufio.Reader)) {
	tb.Helper()
	eng, err := engine.New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { eng.Close() })
	d := commands.New(commands.Options{Engine: eng, Version: "test", Config: map[string]string{}, Log: zerolog.Nop()})
	srv, err := Listen(Options{Addr: "127.0.0.1:0", MaxClients: 10, Dispatcher: d, Log: zerolog.Nop()})
	if err != nil {
		tb.Fatal(err)
	}
	go srv.Serve()
	tb.Cleanup(func() { srv.Close(time.Second) })
	return eng, func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", srv.Addr().String())
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(60 * time.Second))
		return c, bufio.NewReaderSize(c, bufSize)
	}
}

// ping sends PING on c and expects +PONG.
func ping(t *testing.T, c net.Conn, r *bufio.Reader) {
	t.Helper()
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "+PONG\r\n" {
		t.Fatalf("PING: %q, %v", line, err)
	}
}
