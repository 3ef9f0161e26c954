package resp

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/delayd/delayd/commands"
	"github.com/delayd/delayd/engine"
	"github.com/delayd/delayd/tlsconf"
	"github.com/delayd/delayd/tlsconf/tlstest"
)

var updateTLSSeeds = flag.Bool("update-tls-seeds", false, "rewrite testdata/fuzz/FuzzTLSHandshake from a fresh crypto/tls ClientHello")

// tlsFuzzServer is a server with only a TLS listener, configured through
// tlsconf as main configures it (mutual TLS), and the client config that
// gets through it.
func tlsFuzzServer(t testing.TB, dir string) (*Server, *tls.Config) {
	t.Helper()
	ca := tlstest.NewCA(t, "fuzz ca")
	cert, key := ca.Server(t, 2).Write(t, dir, "server")
	st, err := tlsconf.New(tlsconf.Files{Cert: cert, Key: key, CA: ca.WriteCA(t, dir, "ca"), Auth: tlsconf.AuthYes})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	d := commands.New(commands.Options{Engine: eng, Version: "test", Config: map[string]string{}})
	srv, err := Listen(Options{TLSAddr: "127.0.0.1:0", TLS: st.Config(), MaxClients: 10, Dispatcher: d, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	t.Cleanup(func() { srv.Close(time.Second) })
	client := &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{ca.Client(t, 3).TLS}, ServerName: "127.0.0.1"}
	return srv, client
}

// clientHello is the first flight crypto/tls sends with cfg: one TLS record
// holding a ClientHello, taken off a pipe with no server behind it.
func clientHello(t testing.TB, cfg *tls.Config) []byte {
	t.Helper()
	c, s := net.Pipe()
	defer s.Close()
	go func() { tls.Client(c, cfg).Handshake(); c.Close() }()
	s.SetDeadline(time.Now().Add(5 * time.Second))
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(s, hdr); err != nil {
		t.Fatal(err)
	}
	rec := make([]byte, 5+(int(hdr[3])<<8|int(hdr[4])))
	copy(rec, hdr)
	if _, err := io.ReadFull(s, rec[5:]); err != nil {
		t.Fatal(err)
	}
	return rec
}

// tlsPing is a real client's round trip, the proof that the listener still
// serves after whatever came before.
func tlsPing(t testing.TB, addr string, cfg *tls.Config) {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Fatalf("a real TLS client cannot connect: %v", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "+PONG\r\n" {
		t.Fatalf("PING over TLS: %q, %v", line, err)
	}
}

// FuzzTLSHandshake writes arbitrary bytes to the TLS port as a client's
// first flight, then half-closes. The server must not panic, must end the
// connection's goroutine well before the handshake timeout (the client has
// gone: nothing should wait on it), and must go on serving a real client.
// The corpus holds a real ClientHello, truncated ones and plain RESP.
func FuzzTLSHandshake(f *testing.F) {
	srv, client := tlsFuzzServer(f, f.TempDir())
	addr := srv.TLSAddr().String()
	hello := clientHello(f, client)
	for _, s := range [][]byte{hello, hello[:5], hello[:len(hello)/2], []byte("PING\r\n"), []byte("*1\r\n$4\r\nPING\r\n")} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Write(in)
		c.(*net.TCPConn).CloseWrite()
		reply, rerr := io.ReadAll(c) // an alert, or a ServerHello the server then gives up on
		c.Close()
		if bytes.Equal(in, hello) && (len(reply) == 0 || reply[0] != 0x16) {
			t.Fatalf("a real ClientHello got %q (%v), not a handshake record: the seed does not reach the handshake", reply, rerr)
		}
		// The handshake timeout is 10 s; a goroutine still there after 3
		// waits on a client that has already said all it will.
		for deadline := time.Now().Add(3 * time.Second); srv.d.Connected.Load() != 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("connection goroutine still running 3 s after the client closed (input %q)", in)
			}
		}
		tlsPing(t, addr, client)
		for deadline := time.Now().Add(3 * time.Second); srv.d.Connected.Load() != 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("a closed TLS client's goroutine is still running")
			}
		}
	})
}

// TestTLSFuzzSeeds keeps the checked-in corpus what it says: with
// -update-tls-seeds it rewrites the files from a ClientHello crypto/tls
// makes now; without, it checks they are there.
func TestTLSFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzTLSHandshake")
	if *updateTLSSeeds {
		ca := tlstest.NewCA(t, "seed ca")
		hello := clientHello(t, &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1"})
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, in := range map[string][]byte{
			"clienthello":           hello,
			"clienthello-header":    hello[:5],
			"clienthello-truncated": hello[:len(hello)/2],
			"resp-ping":             []byte("*1\r\n$4\r\nPING\r\n"),
			"inline-ping":           []byte("PING\r\n"),
		} {
			if err := os.WriteFile(filepath.Join(dir, name), fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", in), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, name := range []string{"clienthello", "clienthello-header", "clienthello-truncated", "resp-ping", "inline-ping"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("seed %s: %v (go test ./resp -run TestTLSFuzzSeeds -update-tls-seeds)", name, err)
		}
	}
	// The whole ClientHello is one whole record, as its header says.
	b, err := os.ReadFile(filepath.Join(dir, "clienthello"))
	if err != nil {
		t.Fatal(err)
	}
	lit, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "go test fuzz v1\n[]byte(")
	hello, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
	if !ok || err != nil || len(hello) < 5 || hello[0] != 0x16 || len(hello) != 5+(int(hello[3])<<8|int(hello[4])) {
		t.Fatalf("seed clienthello is not one whole handshake record (%v)", err)
	}
}
