package resp

import (
	"crypto/tls"
	"net"
	"time"
)

// handshakeTimeout bounds a TLS handshake, so a client that connects and
// says nothing cannot hold a goroutine and a descriptor for ever.
const handshakeTimeout = 10 * time.Second

// listenTLS binds Options.TLSAddr. Its connections are *tls.Conn, which the
// connection loop reads and writes as any net.Conn: the parser and the reply
// path are the plain ones, and a plain connection never goes through crypto/tls.
func (s *Server) listenTLS() error {
	if s.opts.TLSAddr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", s.opts.TLSAddr)
	if err != nil {
		return err
	}
	s.tln = tls.NewListener(ln, s.opts.TLS)
	return nil
}

// TLSAddr is the TLS listener's address; nil without one.
func (s *Server) TLSAddr() net.Addr {
	if s.tln == nil {
		return nil
	}
	return s.tln.Addr()
}

// handshake completes the TLS handshake on the connection's own goroutine
// (not in the accept loop, where one slow client would stall the others)
// before the client counts as connected to the dispatcher. A client that
// speaks plain RESP to the TLS port, or shows no valid certificate when one
// is required, fails here and is closed; Redis logs these at its verbose
// level, and so does this at debug.
func (s *Server) handshake(tc *tls.Conn) bool {
	tc.SetDeadline(time.Now().Add(handshakeTimeout))
	if err := tc.Handshake(); err != nil {
		s.log.Debug().Err(err).Str("addr", tc.RemoteAddr().String()).Msg("tls handshake failed")
		return false
	}
	tc.SetDeadline(time.Time{})
	return !s.closing.Load()
}
