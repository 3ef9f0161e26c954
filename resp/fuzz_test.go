package resp

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/delayd/delayd/commands"
	"github.com/delayd/delayd/engine"
)

// serveOnce runs the real connection loop on one loopback connection, sends
// input in the given pieces, half-closes, and returns every byte the server
// wrote until it closed the connection.
func serveOnce(t testing.TB, pieces ...[]byte) []byte {
	t.Helper()
	eng, err := engine.New(engine.Options{MaxPayload: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	d := commands.New(commands.Options{Engine: eng, Version: "test", Config: map[string]string{"max-payload-bytes": "65536", "max-jobs": "0"}})
	srv, err := Listen(Options{Addr: "127.0.0.1:0", MaxClients: 10, Dispatcher: d, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	defer srv.Close(time.Second)
	c, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	go func() {
		for _, p := range pieces {
			c.Write(p)
			time.Sleep(time.Millisecond) // let the server read each piece on its own
		}
		c.(*net.TCPConn).CloseWrite()
	}()
	out, _ := io.ReadAll(c)
	return out
}

// FuzzConn feeds arbitrary bytes to a real connection, whole and split in
// two, as nats-server's parser fuzz does: the server must not panic or hang,
// and the replies must not depend on how the bytes were split. Commands that
// read the clock or ids are answered the same way both times only if they
// are deterministic, so the corpus sticks to those.
func FuzzConn(f *testing.F) {
	for _, s := range []string{
		"PING\r\n",
		"*1\r\n$4\r\nPING\r\n",
		"*3\r\n$4\r\nECHO\r\n$5\r\nhello\r\n$4\r\nPING\r\n",
		"*2\r\n$abc\r\n",
		"*-5\r\n",
		"ECHO \"a b\" 'c'\r\nPING\r\n",
		"*4\r\n$9\r\nDELAY.ADD\r\n$1\r\nq\r\n$2\r\n-1\r\n$1\r\np\r\n",
		"*3\r\n$9\r\nDELAY.GET\r\n$1\r\nq\r\n$1\r\nx\r\n",
		"HELLO 3\r\nDELAY.STATS q\r\nHELLO 2\r\nDELAY.STATS q\r\n",
		"FOO bar\r\nSELECT 1\r\nLLEN q\r\nTYPE q\r\n",
		"DELAY.POP q abc\r\nDELAY.POP q -1\r\n",
	} {
		f.Add([]byte(s), uint16(len(s)/2))
	}
	f.Fuzz(func(t *testing.T, in []byte, cut uint16) {
		if len(in) > 4096 || bytes.Contains(bytes.ToUpper(in), []byte("SHUTDOWN")) ||
			bytes.Contains(bytes.ToUpper(in), []byte("ADD")) || bytes.Contains(bytes.ToUpper(in), []byte("PUSH")) ||
			bytes.Contains(bytes.ToUpper(in), []byte("TIME")) || bytes.Contains(bytes.ToUpper(in), []byte("INFO")) ||
			bytes.Contains(bytes.ToUpper(in), []byte("CLIENT")) || bytes.Contains(bytes.ToUpper(in), []byte("HELLO")) {
			return // replies that carry ids, times or counters differ between runs
		}
		i := int(cut) % (len(in) + 1)
		whole := serveOnce(t, in)
		split := serveOnce(t, in[:i], in[i:])
		if !bytes.Equal(whole, split) {
			t.Fatalf("input %q split at %d:\nwhole: %q\nsplit: %q", in, i, whole, split)
		}
	})
}

func TestWriterEncodesRESP2AndRESP3(t *testing.T) {
	for _, tc := range []struct {
		proto int
		write func(w *writer)
		want  string
	}{
		{2, func(w *writer) { w.Null() }, "$-1\r\n"},
		{3, func(w *writer) { w.Null() }, "_\r\n"},
		{2, func(w *writer) { w.NullArray() }, "*-1\r\n"},
		{3, func(w *writer) { w.NullArray() }, "_\r\n"},
		{2, func(w *writer) { w.Map(2) }, "*4\r\n"},
		{3, func(w *writer) { w.Map(2) }, "%2\r\n"},
		{2, func(w *writer) { w.Bulk([]byte("a\r\nb")) }, "$4\r\na\r\nb\r\n"},
		{2, func(w *writer) { w.Bulk(nil) }, "$0\r\n\r\n"},
		{2, func(w *writer) { w.Int(-7) }, ":-7\r\n"},
		{2, func(w *writer) { w.Status("OK"); w.Error("ERR x") }, "+OK\r\n-ERR x\r\n"},
	} {
		w := &writer{proto: tc.proto}
		tc.write(w)
		if string(w.buf) != tc.want {
			t.Errorf("proto %d: got %q, want %q", tc.proto, w.buf, tc.want)
		}
	}
}

func TestProtocolErrorAnswersWhatCameBeforeThenCloses(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"PING\r\n*2\r\n$abc\r\nPING\r\n", "+PONG\r\n-ERR Protocol error: invalid bulk length\r\n"},
		{"*1\r\n$4\r\nPING\r\n*x\r\n", "+PONG\r\n-ERR Protocol error: invalid multibulk length\r\n"},
		{"*1\r\n+PING\r\n", "-ERR Protocol error: expected '$', got '+'\r\n"},
		{"ECHO \"a\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n"},
		{"*-1\r\n*0\r\n\r\nPING\r\n", "+PONG\r\n"},
		{"*1\n$4\r\nPING\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
	} {
		if out := serveOnce(t, []byte(tc.in)); string(out) != tc.want {
			t.Errorf("%q: got %q, want %q", tc.in, out, tc.want)
		}
	}
}

func TestUnauthenticatedClientsCannotSendBigFrames(t *testing.T) {
	eng, _ := engine.New(engine.Options{})
	defer eng.Close()
	d := commands.New(commands.Options{Engine: eng, RequirePass: "s", Config: map[string]string{}})
	srv, err := Listen(Options{Addr: "127.0.0.1:0", Dispatcher: d, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	defer srv.Close(time.Second)
	c, _ := net.Dial("tcp", srv.Addr().String())
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write([]byte("*2\r\n$4\r\nECHO\r\n$100000\r\n"))
	out, _ := io.ReadAll(c)
	if want := "-ERR Protocol error: unauthenticated bulk length\r\n"; string(out) != want {
		t.Fatalf("got %q, want %q", out, want)
	}
}
