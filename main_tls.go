package main

import (
	"crypto/tls"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/delayd/delayd/cluster"
	"github.com/delayd/delayd/tlsconf"
)

// loadTLS reads the TLS files when tls-port is set; nil, nil when it is not.
func loadTLS(cfg config) (*tlsconf.Store, error) {
	if cfg.TLSPort == 0 {
		return nil, nil
	}
	return tlsconf.New(tlsconf.Files{
		Cert: cfg.TLSCertFile,
		Key:  cfg.TLSKeyFile,
		CA:   cfg.TLSCACertFile,
		Auth: tlsconf.Auth(cfg.TLSAuthClients),
	})
}

// tlsOf is the listeners' config; nil without TLS.
func tlsOf(st *tlsconf.Store) *tls.Config {
	if st == nil {
		return nil
	}
	return st.Config()
}

// clusterTLS secures the cluster with the listeners' files when tls-port is
// set: the bus is mutual TLS (checkTLS made sure of a CA), and with no
// plain port the RESP connections nodes make to each other are TLS too.
func clusterTLS(cfg config, st *tlsconf.Store) *cluster.TLS {
	if st == nil {
		return nil
	}
	return &cluster.TLS{Server: st.PeerServer(), Client: st.PeerClient, RESP: cfg.Port == 0}
}

// listenAddrs are the plain and TLS host:port; "" for a port that is 0.
func listenAddrs(cfg config) (plain, secure string) {
	if cfg.Port != 0 {
		plain = net.JoinHostPort(cfg.Bind, strconv.Itoa(cfg.Port))
	}
	if cfg.TLSPort != 0 {
		secure = net.JoinHostPort(cfg.Bind, strconv.Itoa(cfg.TLSPort))
	}
	return plain, secure
}

// handleSIGHUP reloads the TLS files on SIGHUP, for new connections; open
// ones keep theirs. A reload that fails keeps the certificates in use. As
// Redis does, SIGHUP never stops the server, TLS or not. It returns the
// function that stops listening for it.
func handleSIGHUP(log zerolog.Logger, st *tlsconf.Store) func() {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-hup:
			case <-done:
				return
			}
			if st == nil {
				log.Info().Msg("SIGHUP: no TLS files to reload")
				continue
			}
			if err := st.Reload(); err != nil {
				log.Error().Err(err).Msg("SIGHUP: reloading the TLS files failed; the certificates in use stay")
				continue
			}
			leaf := st.Leaf()
			log.Info().Str("serial", leaf.SerialNumber.String()).Str("subject", leaf.Subject.String()).
				Time("not_after", leaf.NotAfter).Msg("SIGHUP: TLS files reloaded; new connections get them")
		}
	}()
	return func() { signal.Stop(hup); close(done) }
}
