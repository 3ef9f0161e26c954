package compat

import (
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/delayd/delayd/internal/testserver"
	"github.com/delayd/delayd/tlsconf/tlstest"
)

// The TLS column: a server with a TLS port beside its plain one (which the
// harness pings), tls-auth-clients yes, and certificates made fresh for each
// check by tlstest. Each client connects to the TLS port with its library's
// TLS options and a client certificate, and without one where it can try.

// tlsFiles are the PEM files of one TLS check, and the client's certificate
// for the Go clients.
type tlsFiles struct {
	ca, cert, key string
	caPool        *tls.Config // RootCAs and ServerName, without a certificate
	client        tls.Certificate
}

// config is the Go clients' TLS config; withCert adds the client
// certificate.
func (f *tlsFiles) config(withCert bool) *tls.Config {
	c := f.caPool.Clone()
	if withCert {
		c.Certificates = []tls.Certificate{f.client}
	}
	return c
}

// scriptEnv passes the files to the Python and Node scripts.
func (f *tlsFiles) scriptEnv() []string {
	if f == nil {
		return nil
	}
	return []string{"DELAYD_COMPAT_TLS_CA=" + f.ca, "DELAYD_COMPAT_TLS_CERT=" + f.cert, "DELAYD_COMPAT_TLS_KEY=" + f.key}
}

// startTLSEnv starts a server with --tls-port and mutual TLS; the check's
// address is the TLS port.
func startTLSEnv(t *testing.T) (*env, error) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "delayd compat CA")
	files := &tlsFiles{ca: ca.WriteCA(t, dir, "ca")}
	serverCert, serverKey := ca.Server(t, 100).Write(t, dir, "server")
	client := ca.Client(t, 200)
	files.cert, files.key = client.Write(t, dir, "client")
	files.client = client.TLS
	files.caPool = &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1"}
	var tlsPort int
	s, err := testserver.StartFresh(ports, 2, func(p []int) *server {
		tlsPort = p[1]
		return newServer(p[0], dir, "",
			"--tls-port", strconv.Itoa(tlsPort),
			"--tls-cert-file", serverCert, "--tls-key-file", serverKey,
			"--tls-ca-cert-file", files.ca, "--tls-auth-clients", "yes")
	})
	if err != nil {
		if s != nil {
			t.Logf("server output:\n%s", s.Output())
		}
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(tlsPort))
	return &env{srv: s, addr: addr, addrs: []string{addr}, tls: files, log: &testserver.Buffer{}}, nil
}

func goRedisTLS(e *env) error {
	ctx, cancel := ctx10()
	defer cancel()
	c := goRedis(e, func(o *redis.Options) { o.TLSConfig = e.tls.config(true) })
	defer c.Close()
	if err := eq("PING", c.Ping(ctx).Val(), "PONG"); err != nil {
		return fmt.Errorf("%w (error: %v)", err, c.Ping(ctx).Err())
	}
	id, err := c.Do(ctx, "DELAY.ADD", "q", "0", "over-tls", "ID", "tls-1").Text()
	if err := first(noErr("DELAY.ADD", err), eq("DELAY.ADD", id, "tls-1")); err != nil {
		return err
	}
	popped, err := c.Do(ctx, "DELAY.POP", "q", "1").StringSlice()
	if err := first(noErr("DELAY.POP", err), eq("DELAY.POP", popped, []string{"q", "tls-1", "over-tls"})); err != nil {
		return err
	}
	bare := goRedis(e, func(o *redis.Options) { o.TLSConfig = e.tls.config(false); o.MaxRetries = -1 })
	defer bare.Close()
	return refused(e, bare.Ping(ctx).Err())
}

func rueidisTLS(e *env) error {
	ctx, cancel := ctx10()
	defer cancel()
	c, err := newRueidisNoCache(e, func(o *rueidis.ClientOption) { o.TLSConfig = e.tls.config(true) })
	if err != nil {
		return err
	}
	defer c.Close()
	pong, err := c.Do(ctx, c.B().Ping().Build()).ToString()
	if err := first(noErr("PING", err), eq("PING", pong, "PONG")); err != nil {
		return err
	}
	add := c.B().Arbitrary("DELAY.ADD").Keys("q").Args("0", "over-tls", "ID", "tls-1").Build()
	id, err := c.Do(ctx, add).ToString()
	if err := first(noErr("DELAY.ADD", err), eq("DELAY.ADD", id, "tls-1")); err != nil {
		return err
	}
	popped, err := c.Do(ctx, c.B().Arbitrary("DELAY.POP").Keys("q").Args("1").Build()).AsStrSlice()
	if err := first(noErr("DELAY.POP", err), eq("DELAY.POP", popped, []string{"q", "tls-1", "over-tls"})); err != nil {
		return err
	}
	// NewClient connects and says HELLO, so a refused handshake fails it.
	bare, err := newRueidisNoCache(e, func(o *rueidis.ClientOption) {
		o.TLSConfig = e.tls.config(false)
		o.Dialer.Timeout = 2 * time.Second
	})
	if err == nil {
		err = bare.Do(ctx, bare.B().Ping().Build()).Error()
		bare.Close()
	}
	return refused(e, err)
}

// refused checks that a Go client without a certificate got TLS 1.3's
// certificate_required alert.
func refused(e *env, err error) error {
	e.logf("without a client certificate: %v", err)
	return errStarts("PING without a client certificate", err, "certificate required")
}

// redisCLITLS runs redis-cli with --tls and the files; withCert false
// leaves out --cert and --key.
func redisCLITLS(e *env, withCert bool, args ...string) (string, error) {
	flags := []string{"--tls", "--cacert", e.tls.ca}
	if withCert {
		flags = append(flags, "--cert", e.tls.cert, "--key", e.tls.key)
	}
	return redisCLI(e, e.addr, append(flags, args...)...)
}

func redisCLITLSCheck(e *env) error {
	if _, err := redisCLIBin(); err != nil {
		return err
	}
	out, err := redisCLITLS(e, true, "PING")
	if err := first(noErr("PING", err), eq("PING", out, "PONG")); err != nil {
		return err
	}
	out, err = redisCLITLS(e, true, "DELAY.ADD", "q", "0", "over-tls", "ID", "tls-1")
	if err := first(noErr("DELAY.ADD", err), eq("DELAY.ADD", out, "tls-1")); err != nil {
		return err
	}
	out, err = redisCLITLS(e, true, "DELAY.POP", "q", "1")
	if err := first(noErr("DELAY.POP", err), eq("DELAY.POP", out, "q\ntls-1\nover-tls")); err != nil {
		return err
	}
	// redis-cli prints a refused connection and exits non-zero.
	out, err = redisCLITLS(e, false, "PING")
	if err == nil || out == "PONG" {
		return fmt.Errorf("redis-cli PING without a client certificate: %q (%v), want the connection refused", out, err)
	}
	return nil
}
