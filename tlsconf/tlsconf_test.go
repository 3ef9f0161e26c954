package tlsconf_test

import (
	"crypto/tls"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delayd/delayd/tlsconf"
	"github.com/delayd/delayd/tlsconf/tlstest"
)

// handshake connects a client to a server using cfg over loopback TCP and
// returns the server certificate's serial the client saw, or the error
// either side got. (Not net.Pipe: an alert written to a client that has
// stopped reading would block for ever.)
func handshake(t *testing.T, cfg *tls.Config, client *tls.Config) (int64, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	errc := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			errc <- err
			return
		}
		defer c.Close()
		srv := tls.Server(c, cfg)
		err = srv.Handshake()
		if err == nil {
			_, err = srv.Write([]byte("ok"))
		}
		errc <- err
	}()
	cl, err := tls.Dial("tcp", ln.Addr().String(), client)
	if err != nil {
		<-errc
		return 0, err
	}
	defer cl.Close()
	// Under TLS 1.3 the server judges the client's certificate after the
	// client's side of the handshake is done: read to learn its verdict.
	var buf [2]byte
	_, rerr := io.ReadFull(cl, buf[:])
	if serr := <-errc; serr != nil {
		return 0, serr
	}
	if rerr != nil {
		return 0, rerr
	}
	return cl.ConnectionState().PeerCertificates[0].SerialNumber.Int64(), nil
}

func TestTLSReloadAndAuth(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "ca")
	caFile := ca.WriteCA(t, dir, "ca")
	cert, key := ca.Server(t, 10).Write(t, dir, "server")
	client := ca.Client(t, 20)

	st, err := tlsconf.New(tlsconf.Files{Cert: cert, Key: key, CA: caFile, Auth: tlsconf.AuthYes})
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.Config()
	withCert := &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{client.TLS}}
	noCert := &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1"}

	if serial, err := handshake(t, cfg, withCert); err != nil || serial != 10 {
		t.Fatalf("with a client certificate: serial %d, %v; want 10", serial, err)
	}
	if _, err := handshake(t, cfg, noCert); err == nil {
		t.Fatal("tls-auth-clients yes let a client without a certificate in")
	}

	// A new certificate: handshakes after Reload get it.
	ca.Server(t, 11).Write(t, dir, "server")
	if err := st.Reload(); err != nil {
		t.Fatal(err)
	}
	if serial, err := handshake(t, cfg, withCert); err != nil || serial != 11 {
		t.Fatalf("after reload: serial %d, %v; want 11", serial, err)
	}
	if st.Leaf().SerialNumber.Int64() != 11 {
		t.Fatalf("Leaf serial %v", st.Leaf().SerialNumber)
	}

	// A broken file: Reload fails and the certificate in use stays.
	tlstest.WriteFile(t, cert, []byte("not a certificate"))
	if err := st.Reload(); err == nil || !strings.Contains(err.Error(), cert) {
		t.Fatalf("Reload of a broken file: %v; want an error naming it", err)
	}
	if serial, err := handshake(t, cfg, withCert); err != nil || serial != 11 {
		t.Fatalf("after a failed reload: serial %d, %v; want 11 still", serial, err)
	}

	// optional and no let a client without a certificate in; optional
	// still refuses one the CA did not sign.
	ca.Server(t, 12).Write(t, dir, "server")
	other := tlstest.NewCA(t, "other").Client(t, 30)
	// GetClientCertificate: Go's client would not send a certificate the
	// server's CA list does not name.
	stranger := &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1",
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &other.TLS, nil }}
	for _, auth := range []tlsconf.Auth{tlsconf.AuthOptional, tlsconf.AuthNo} {
		st, err := tlsconf.New(tlsconf.Files{Cert: cert, Key: key, CA: caFile, Auth: auth})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := handshake(t, st.Config(), noCert); err != nil {
			t.Errorf("%s: a client without a certificate: %v", auth, err)
		}
		_, err = handshake(t, st.Config(), stranger)
		if auth == tlsconf.AuthOptional && err == nil {
			t.Errorf("optional: a certificate from another CA was accepted")
		}
	}
}

func TestTLSNewErrors(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "ca")
	caFile := ca.WriteCA(t, dir, "ca")
	cert, key := ca.Server(t, 1).Write(t, dir, "server")
	empty := filepath.Join(dir, "empty.pem")
	os.WriteFile(empty, nil, 0o600)
	for _, c := range []struct {
		f    tlsconf.Files
		want string
	}{
		{tlsconf.Files{Key: key, CA: caFile, Auth: "yes"}, "tls-cert-file and tls-key-file"},
		{tlsconf.Files{Cert: cert, Key: key, Auth: "yes"}, "tls-ca-cert-file is needed"},
		{tlsconf.Files{Cert: cert, Key: key, CA: caFile, Auth: "maybe"}, "tls-auth-clients"},
		{tlsconf.Files{Cert: cert, Key: filepath.Join(dir, "nope"), Auth: "no"}, "tls-key-file"},
		{tlsconf.Files{Cert: cert, Key: key, CA: empty, Auth: "yes"}, "no PEM certificate"},
	} {
		_, err := tlsconf.New(c.f)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v; want an error with %q", c.f, err, c.want)
		}
	}
	if _, err := tlsconf.New(tlsconf.Files{Cert: cert, Key: key, Auth: "no"}); err != nil {
		t.Errorf("no CA with tls-auth-clients no: %v", err)
	}
}
