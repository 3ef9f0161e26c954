package web

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"log"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/delayd/delayd/tlsconf/tlstest"
)

// lockedBuffer is a log destination written by the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestHandshakeErrorsGoToTheLog: a client that fails the HTTPS handshake
// is logged at debug in the server's logger, not on stderr through the
// standard logger as net/http does by default.
func TestHandshakeErrorsGoToTheLog(t *testing.T) {
	var std lockedBuffer
	prev := log.Writer()
	log.SetOutput(&std)
	defer log.SetOutput(prev)

	ca := tlstest.NewCA(t, "web ca")
	cfg := &tls.Config{Certificates: []tls.Certificate{ca.Server(t, 2).TLS}}
	var out lockedBuffer
	s := New(Options{Addr: "127.0.0.1:0", TLS: cfg, Log: zerolog.New(&out).Level(zerolog.DebugLevel)})
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	defer s.Close(time.Second)

	// A client that does not trust the server's CA gives up mid-handshake;
	// plain HTTP on the HTTPS port is no handshake at all.
	if c, err := tls.Dial("tcp", s.Addr().String(), &tls.Config{ServerName: "127.0.0.1"}); err == nil {
		c.Close()
		t.Fatal("a client without the CA completed the handshake")
	}
	if c, err := net.Dial("tcp", s.Addr().String()); err == nil {
		c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		c.Read(make([]byte, 512))
		c.Close()
	}
	var lines []map[string]any
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		lines = lines[:0]
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && strings.HasPrefix(m["message"].(string), "http: TLS handshake error") {
				lines = append(lines, m)
			}
		}
		if len(lines) >= 2 || time.Now().After(deadline) {
			break
		}
	}
	if len(lines) != 2 {
		t.Fatalf("handshake errors in the server's log: %d, want 2:\n%s", len(lines), out.String())
	}
	for _, m := range lines {
		if m["level"] != "debug" || m["component"] != "http" {
			t.Errorf("handshake error logged as %v", m)
		}
	}
	if std.String() != "" {
		t.Errorf("net/http wrote to the standard logger: %q", std.String())
	}
}

// The levels net/http's lines get.
func TestHTTPErrorLevels(t *testing.T) {
	for _, c := range []struct{ line, level, msg, stack string }{
		{"http: TLS handshake error from 10.0.0.1:4000: EOF\n", "debug", "http: TLS handshake error from 10.0.0.1:4000: EOF", ""},
		{"http2: server: error reading preface from client 10.0.0.1:4000: EOF\n", "debug", "http2: server: error reading preface from client 10.0.0.1:4000: EOF", ""},
		{"http: Accept error: accept tcp: too many open files; retrying in 5ms\n", "warn", "http: Accept error: accept tcp: too many open files; retrying in 5ms", ""},
		{"http: superfluous response.WriteHeader call from x\n", "warn", "http: superfluous response.WriteHeader call from x", ""},
		{"http: panic serving 10.0.0.1:4000: boom\ngoroutine 7 [running]:\nmain.f()\n", "error", "http: panic serving 10.0.0.1:4000: boom", "goroutine 7 [running]:\nmain.f()"},
	} {
		var out bytes.Buffer
		errorLog(zerolog.New(&out).Level(zerolog.DebugLevel)).Print(c.line)
		var m map[string]any
		if err := json.Unmarshal(out.Bytes(), &m); err != nil {
			t.Fatalf("%q: %v (%q)", c.line, err, out.String())
		}
		stack, _ := m["stack"].(string)
		if m["level"] != c.level || m["message"] != c.msg || stack != c.stack || m["component"] != "http" {
			t.Errorf("%q logged as %v", c.line, m)
		}
	}
}
