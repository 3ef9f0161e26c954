package cluster

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// TLS secures what nodes say to one another. On the bus every connection
// is mutual TLS whatever tls-auth-clients says: only nodes connect there,
// and a node is whoever shows a certificate the CA signed.
type TLS struct {
	// Server is the bus listener's config; it must require and verify a
	// client certificate.
	Server *tls.Config
	// Client makes a dial's config (the node's certificate, the CA as
	// roots), taken anew for each dial so that a reload reaches it.
	Client func() *tls.Config
	// RESP: other nodes' client ports speak TLS only (their plain port is
	// off), so CLUSTER JOIN and the commands forwarded to the leader go
	// over TLS too.
	RESP bool
}

// busHandshakeTimeout bounds a bus handshake, so a peer that connects and
// says nothing cannot hold a goroutine for ever.
const busHandshakeTimeout = 10 * time.Second

// tlsListener hands Raft connections that handshake on their first read,
// on the connection's goroutine, not in Raft's accept loop.
type tlsListener struct {
	net.Listener
	cfg *tls.Config
}

func (l tlsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &busConn{Conn: tls.Server(c, l.cfg)}, nil
}

// busConn bounds its handshake and then has no deadline: Raft keeps pooled
// bus connections idle for as long as it likes.
type busConn struct {
	*tls.Conn
	once sync.Once
	err  error
}

func (c *busConn) handshake() error {
	c.once.Do(func() {
		c.Conn.SetDeadline(time.Now().Add(busHandshakeTimeout))
		c.err = c.Conn.Handshake()
		c.Conn.SetDeadline(time.Time{})
	})
	return c.err
}

func (c *busConn) Read(p []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

func (c *busConn) Write(p []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// dialTLS completes the handshake before Raft sees the connection, so a
// peer with a certificate the CA did not sign is a failed dial.
func dialTLS(d *net.Dialer, addr raft.ServerAddress, timeout time.Duration, cfg *tls.Config) (net.Conn, error) {
	host, _, err := net.SplitHostPort(string(addr))
	if err != nil {
		return nil, err
	}
	if cfg.ServerName == "" {
		cfg.ServerName = host
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	td := tls.Dialer{NetDialer: d, Config: cfg}
	return td.DialContext(ctx, "tcp", string(addr))
}

// respTLS is the go-redis TLS config for a RESP connection to addr; nil
// when other nodes' client ports are plain.
func (c *Cluster) respTLS(addr string) *tls.Config {
	if c.cfg.TLS == nil || !c.cfg.TLS.RESP {
		return nil
	}
	cfg := c.cfg.TLS.Client()
	if host, _, err := net.SplitHostPort(addr); err == nil && cfg.ServerName == "" {
		cfg.ServerName = host
	}
	return cfg
}
