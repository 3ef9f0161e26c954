// Package tlsconf owns delayd's TLS settings as Redis 6 names them: it loads
// the certificate, key and CA files, makes the one tls.Config the RESP and
// HTTP listeners share, and reloads the files on request (main does it on
// SIGHUP). A reload changes what new connections get; a connection already
// made keeps the session it negotiated, so nothing is dropped.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
)

// Auth is tls-auth-clients: whether clients must show a certificate.
type Auth string

const (
	// AuthYes requires a client certificate signed by the CA (Redis's default).
	AuthYes Auth = "yes"
	// AuthOptional verifies a certificate a client shows, but lets a client
	// without one in.
	AuthOptional Auth = "optional"
	// AuthNo asks for no client certificate.
	AuthNo Auth = "no"
)

// Files are the settings: paths, read at New and at every Reload.
type Files struct {
	Cert, Key string // PEM server certificate (chain) and its private key
	CA        string // PEM CA bundle client certificates are verified against
	Auth      Auth
}

// Store holds the loaded files. Handshakes read it through an atomic
// pointer, so a reload never waits for a handshake nor a handshake for a
// reload.
type Store struct {
	files Files
	cur   atomic.Pointer[tls.Config]
}

// New loads the files; an error says which one is wrong.
func New(f Files) (*Store, error) {
	if f.Cert == "" || f.Key == "" {
		return nil, errors.New("tls-cert-file and tls-key-file are both needed")
	}
	switch f.Auth {
	case AuthYes, AuthOptional, AuthNo:
	default:
		return nil, fmt.Errorf("tls-auth-clients: %q is not yes, no or optional", f.Auth)
	}
	if f.Auth != AuthNo && f.CA == "" {
		return nil, fmt.Errorf("tls-ca-cert-file is needed when tls-auth-clients is %s (client certificates are verified against it)", f.Auth)
	}
	s := &Store{files: f}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Reload reads the files again. On an error the certificates in use stay.
func (s *Store) Reload() error {
	f := s.files
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return fmt.Errorf("tls-cert-file %s, tls-key-file %s: %w", f.Cert, f.Key, err)
	}
	c := &tls.Config{
		Certificates: []tls.Certificate{cert},
		// Redis's default tls-protocols: "TLSv1.2 TLSv1.3".
		MinVersion: tls.VersionTLS12,
	}
	if f.CA != "" {
		pem, err := os.ReadFile(f.CA)
		if err != nil {
			return fmt.Errorf("tls-ca-cert-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("tls-ca-cert-file %s: no PEM certificate in it", f.CA)
		}
		c.ClientCAs = pool
	}
	switch f.Auth {
	case AuthYes:
		c.ClientAuth = tls.RequireAndVerifyClientCert
	case AuthOptional:
		c.ClientAuth = tls.VerifyClientCertIfGiven
	default:
		c.ClientAuth = tls.NoClientCert
	}
	s.cur.Store(c)
	return nil
}

// Config is the listeners' tls.Config: each handshake takes the files loaded
// last (certificate, CA pool and client-auth mode together), so a reload
// reaches the CA too, which GetCertificate alone would not.
func (s *Store) Config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.cur.Load(), nil
		},
	}
}

// Leaf is the server certificate in use, for the log.
func (s *Store) Leaf() *x509.Certificate {
	return s.cur.Load().Certificates[0].Leaf
}
