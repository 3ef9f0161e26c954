package tlsconf

import "crypto/tls"

// PeerServer is the config of a listener only other nodes connect to (the
// cluster bus): the files loaded last, with a client certificate required
// and verified against the CA whatever tls-auth-clients says, since a
// peer is whoever shows one the CA signed. The store needs a CA.
func (s *Store) PeerServer() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			c := s.cur.Load().Clone()
			c.ClientAuth = tls.RequireAndVerifyClientCert
			return c, nil
		},
	}
}

// PeerClient is a node's config for dialing another node: its own
// certificate as the client one and the CA as the roots, from the files
// loaded last. The caller sets ServerName. The certificate must allow
// client authentication as well as server authentication (extended key
// usage clientAuth and serverAuth), as for Redis's tls-cluster without a
// tls-client-cert-file.
func (s *Store) PeerClient() *tls.Config {
	cur := s.cur.Load()
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: cur.Certificates,
		RootCAs:      cur.ClientCAs,
	}
}
