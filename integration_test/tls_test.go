package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayd/delayd/tlsconf/tlstest"
)

// SPEC "Security": TLS as Redis 6 does it. Every test makes its own CA,
// server and client certificates (tlstest) and starts the binary with a TLS
// port beside the plain one the harness pings.

type tlsEnv struct {
	dir        string
	ca         *tlstest.CA
	caFile     string
	certFile   string
	keyFile    string
	client     tlstest.Pair
	clientCert string
	clientKey  string
	port       int // the TLS port
	s          *server
}

// startTLS starts a server with --tls-port and tls-auth-clients auth.
func startTLS(t *testing.T, auth string, extra ...string) *tlsEnv {
	t.Helper()
	e := &tlsEnv{dir: t.TempDir(), ca: tlstest.NewCA(t, "delayd test CA")}
	e.caFile = e.ca.WriteCA(t, e.dir, "ca")
	e.certFile, e.keyFile = e.ca.Server(t, 100).Write(t, e.dir, "server")
	e.client = e.ca.Client(t, 200)
	e.clientCert, e.clientKey = e.client.Write(t, e.dir, "client")
	e.port = freePort(t)
	args := append([]string{
		"--tls-port", strconv.Itoa(e.port),
		"--tls-cert-file", e.certFile, "--tls-key-file", e.keyFile,
		"--tls-ca-cert-file", e.caFile, "--tls-auth-clients", auth,
	}, extra...)
	e.s = startServer(t, args...)
	return e
}

func (e *tlsEnv) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(e.port)) }

// config is a client's TLS config; withCert adds the client certificate.
func (e *tlsEnv) config(withCert bool) *tls.Config {
	c := &tls.Config{RootCAs: e.ca.Pool, ServerName: "127.0.0.1"}
	if withCert {
		c.Certificates = []tls.Certificate{e.client.TLS}
	}
	return c
}

// goRedis is the harness's one-connection client, over TLS.
func (e *tlsEnv) goRedis(withCert bool) *redis.Client {
	return e.s.Client(func(o *redis.Options) {
		o.Addr = e.addr()
		o.TLSConfig = e.config(withCert)
	})
}

// dial opens a raw TLS connection and returns the server certificate's
// serial it saw.
func (e *tlsEnv) dial(t *testing.T) (*tls.Conn, int64) {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", e.addr(), e.config(true))
	if err != nil {
		t.Fatalf("tls dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c, c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// rawPing sends PING on a raw connection and says whether +PONG came back.
func rawPing(c net.Conn) error {
	c.SetDeadline(time.Now().Add(3 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	var buf [7]byte
	if _, err := io.ReadFull(c, buf[:]); err != nil {
		return err
	}
	if string(buf[:]) != "+PONG\r\n" {
		return &net.OpError{Op: "ping", Err: io.ErrUnexpectedEOF}
	}
	return nil
}

func TestTLSGoRedis(t *testing.T) {
	e := startTLS(t, "yes")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := e.goRedis(true)
	if v, err := c.Ping(ctx).Result(); err != nil || v != "PONG" {
		t.Fatalf("PING over TLS: %q, %v", v, err)
	}
	id, err := c.Do(ctx, "DELAY.ADD", "jobs", 0, "over-tls").Text()
	if err != nil || id == "" {
		t.Fatalf("DELAY.ADD over TLS: %q, %v", id, err)
	}
	got, err := c.Do(ctx, "DELAY.POP", "jobs", 1).StringSlice()
	if err != nil || len(got) != 3 || got[0] != "jobs" || got[1] != id || got[2] != "over-tls" {
		t.Fatalf("DELAY.POP over TLS: %q, %v; want [jobs %s over-tls]", got, err, id)
	}
	// The same server on its plain port sees the same data: one engine.
	plain := e.s.Client()
	if _, err := c.Do(ctx, "DELAY.ADD", "jobs", 0, "x").Text(); err != nil {
		t.Fatal(err)
	}
	if got, err := plain.Do(ctx, "DELAY.POP", "jobs", 1).StringSlice(); err != nil || len(got) != 3 || got[2] != "x" {
		t.Fatalf("DELAY.POP on the plain port after an add over TLS: %q, %v", got, err)
	}
}

func TestTLSRedisCli(t *testing.T) {
	e := startTLS(t, "yes")
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		all := append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(e.port),
			"--tls", "--cert", e.clientCert, "--key", e.clientKey, "--cacert", e.caFile}, args...)
		var out, errb bytes.Buffer
		cmd := exec.CommandContext(ctx, cliPath(t), all...)
		cmd.Stdout, cmd.Stderr = &out, &errb
		_ = cmd.Run() // the output says; redis-cli exits 1 after an error reply
		if errb.Len() > 0 {
			t.Logf("redis-cli %q stderr: %s", args, errb.String())
		}
		return strings.TrimSpace(out.String())
	}
	if got := run("PING"); got != "PONG" {
		t.Fatalf("redis-cli --tls PING: %q", got)
	}
	id := run("DELAY.ADD", "jobs", "0", "from-cli")
	if id == "" || strings.Contains(id, "ERR") {
		t.Fatalf("redis-cli --tls DELAY.ADD: %q", id)
	}
	if got := run("DELAY.POP", "jobs", "1"); got != "jobs\n"+id+"\nfrom-cli" {
		t.Fatalf("redis-cli --tls DELAY.POP: %q", got)
	}
}

func TestTLSAuthClients(t *testing.T) {
	t.Run("yes", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e := startTLS(t, "yes")
		if err := e.goRedis(false).Ping(ctx).Err(); err == nil {
			t.Fatal("tls-auth-clients yes: a client without a certificate got PONG")
		}
		if err := e.goRedis(true).Ping(ctx).Err(); err != nil {
			t.Fatalf("with a certificate: %v", err)
		}
	})
	for _, auth := range []string{"no", "optional"} {
		t.Run(auth, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			e := startTLS(t, auth)
			if err := e.goRedis(false).Ping(ctx).Err(); err != nil {
				t.Fatalf("tls-auth-clients %s: a client without a certificate: %v", auth, err)
			}
			if err := e.goRedis(true).Ping(ctx).Err(); err != nil {
				t.Fatalf("tls-auth-clients %s: with a certificate: %v", auth, err)
			}
		})
	}
}

// A client speaking plain RESP to the TLS port is closed; the TLS client
// already connected, and the next one, go on.
func TestTLSPlainClientOnTLSPort(t *testing.T) {
	e := startTLS(t, "yes")
	before, _ := e.dial(t)
	if err := rawPing(before); err != nil {
		t.Fatal(err)
	}
	nc, err := net.DialTimeout("tcp", e.addr(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := rawPing(nc); err == nil {
		t.Fatal("plain PING on the TLS port got +PONG")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("plain PING on the TLS port: no answer and no close within 3s (%v)", err)
	}
	if err := rawPing(before); err != nil {
		t.Fatalf("the TLS client connected before: %v", err)
	}
	after, _ := e.dial(t)
	if err := rawPing(after); err != nil {
		t.Fatalf("a TLS client connected after: %v", err)
	}
}

// SIGHUP reloads the files: new connections get the new certificate while
// one made before keeps working on the old.
func TestTLSReloadOnSIGHUP(t *testing.T) {
	e := startTLS(t, "yes", "--log-level", "info") // the reload is logged at info
	old, serial := e.dial(t)
	if serial != 100 || rawPing(old) != nil {
		t.Fatalf("first connection: serial %d", serial)
	}
	// A broken file first: the reload fails, the server keeps serving the
	// certificate it has.
	tlstest.WriteFile(t, e.certFile, []byte("garbage"))
	e.s.Signal(syscall.SIGHUP)
	if !e.s.outputHas("reloading the TLS files failed", 5*time.Second) {
		t.Fatal("no log line about the failed reload")
	}
	if c, serial := e.dial(t); serial != 100 || rawPing(c) != nil {
		t.Fatalf("after a failed reload: serial %d, want 100", serial)
	}

	e.ca.Server(t, 101).Write(t, e.dir, "server")
	e.s.Signal(syscall.SIGHUP)
	if !e.s.outputHas("TLS files reloaded", 5*time.Second) {
		t.Fatal("no log line about the reload")
	}
	c, serial := e.dial(t)
	if serial != 101 {
		t.Fatalf("a connection after SIGHUP got serial %d, want 101", serial)
	}
	if err := rawPing(c); err != nil {
		t.Fatal(err)
	}
	if err := rawPing(old); err != nil {
		t.Fatalf("the connection made before SIGHUP: %v", err)
	}
	if s := old.ConnectionState().PeerCertificates[0].SerialNumber.Int64(); s != 100 {
		t.Fatalf("old connection's serial %d", s)
	}
	if !e.s.Running() {
		t.Fatal("SIGHUP stopped the server")
	}
}

// With tls-port set, the HTTP side is HTTPS with the same files.
func TestTLSHTTPS(t *testing.T) {
	hp := freePort(t)
	e := startTLS(t, "yes", "--http-addr", net.JoinHostPort("127.0.0.1", strconv.Itoa(hp)))
	url := "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(hp)) + "/healthz"
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: e.config(true)}}
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	if resp.TLS == nil || resp.TLS.PeerCertificates[0].SerialNumber.Int64() != 100 {
		t.Fatalf("GET %s: not the server certificate", url)
	}
	// No client certificate under tls-auth-clients yes: refused.
	hc2 := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: e.config(false)}}
	if resp, err := hc2.Get(url); err == nil {
		resp.Body.Close()
		t.Fatalf("GET %s without a client certificate: %d", url, resp.StatusCode)
	}
}

// Only a TLS port (--port 0); and a TLS port with no certificate is a
// start-up error that says so.
func TestTLSOnlyAndStartErrors(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "ca")
	caFile := ca.WriteCA(t, dir, "ca")
	cert, key := ca.Server(t, 7).Write(t, dir, "server")
	port := freePort(t)
	s := newServer(t, port, nil, "--bind", "127.0.0.1", "--http-addr", "", "--appendonly", "no",
		"--dir", t.TempDir(), "--port", "0", "--tls-port", strconv.Itoa(port),
		"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", caFile, "--tls-auth-clients", "no")
	if err := s.Spawn(); err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1"}
	var c *tls.Conn
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err = tls.Dial("tcp", s.Addr(), cfg); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("TLS-only server did not answer: %v", err)
		}
	}
	defer c.Close()
	if err := rawPing(c); err != nil {
		t.Fatalf("PING on a TLS-only server: %v", err)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-port", "16999"}, "tls-cert-file or tls-key-file is not"},
		{[]string{"--tls-port", "16999", "--tls-cert-file", cert, "--tls-key-file", key}, "tls-ca-cert-file is needed"},
		{[]string{"--port", "0"}, "not listen anywhere"},
		{[]string{"--tls-port", "16999", "--tls-cert-file", cert + ".missing", "--tls-key-file", key, "--tls-auth-clients", "no"}, "tls-cert-file"},
	} {
		out, err := exec.Command(binPath, append([]string{"--http-addr", "", "--appendonly", "no", "--dir", t.TempDir()}, c.args...)...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("delayd %q: %v, output %q; want a start-up error with %q", c.args, err, out, c.want)
		}
	}
}
