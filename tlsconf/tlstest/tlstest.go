// Package tlstest makes throwaway certificates for tests: a CA, server
// certificates for 127.0.0.1 and localhost, client certificates, each with
// the serial asked for, written as PEM files.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA signs the certificates of one test.
type CA struct {
	Cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	CertPEM []byte
	Pool    *x509.CertPool
}

// NewCA makes a CA.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{Cert: cert, key: key, CertPEM: pemOf("CERTIFICATE", der), Pool: pool}
}

// Pair is a certificate and its key, PEM-encoded and ready for crypto/tls.
type Pair struct {
	CertPEM, KeyPEM []byte
	TLS             tls.Certificate
}

// Server issues a server certificate for 127.0.0.1 and localhost.
func (ca *CA) Server(t testing.TB, serial int64) Pair {
	t.Helper()
	return ca.issue(t, serial, "delayd test server", x509.ExtKeyUsageServerAuth)
}

// Client issues a client certificate.
func (ca *CA) Client(t testing.TB, serial int64) Pair {
	t.Helper()
	return ca.issue(t, serial, "delayd test client", x509.ExtKeyUsageClientAuth)
}

// Node issues a cluster node's certificate: it serves (its listeners) and
// is a client (its dials to other nodes), for 127.0.0.1 and localhost.
func (ca *CA) Node(t testing.TB, serial int64) Pair {
	t.Helper()
	return ca.issue(t, serial, "delayd test node", x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
}

func (ca *CA) issue(t testing.TB, serial int64, cn string, usage ...x509.ExtKeyUsage) Pair {
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p := Pair{CertPEM: pemOf("CERTIFICATE", der), KeyPEM: pemOf("EC PRIVATE KEY", kder)}
	if p.TLS, err = tls.X509KeyPair(p.CertPEM, p.KeyPEM); err != nil {
		t.Fatal(err)
	}
	return p
}

// Write puts the pair in dir as name.crt and name.key and returns the paths.
func (p Pair) Write(t testing.TB, dir, name string) (cert, key string) {
	t.Helper()
	cert, key = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	WriteFile(t, cert, p.CertPEM)
	WriteFile(t, key, p.KeyPEM)
	return cert, key
}

// WriteCA puts the CA certificate in dir as name.crt and returns the path.
func (ca *CA) WriteCA(t testing.TB, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name+".crt")
	WriteFile(t, path, ca.CertPEM)
	return path
}

// WriteFile replaces a file whole (a rename), as a certificate rotation
// tool does, so a reader never sees half of it.
func WriteFile(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func pemOf(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
