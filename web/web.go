// Package web is delayd's HTTP side: /metrics for Prometheus, /healthz and
// /readyz for orchestrators, and the dashboard for people. It sits beside
// resp, not in front of the engine: every action it offers is a RESP
// command run through the same command table (Server.Do), so a screen is a
// view of the protocol and a button is a command.
package web

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/delayd/delayd/commands"
)

// Options configure a Server. Only main knows where the values come from.
type Options struct {
	// Addr is host:port to listen on ("127.0.0.1:6381" by default in main;
	// main does not start a Server when it is empty).
	Addr       string
	Dispatcher *commands.Dispatcher
	// Password, when set, is asked for with HTTP basic auth on every path
	// but /healthz (any user name, as AUTH with one argument), the same
	// secret RESP clients AUTH with.
	Password string
	// Ready says whether the server takes traffic (/readyz): the log has
	// been replayed and, in a cluster, a leader is known.
	Ready func() (bool, string)
	// MaxQueues caps the queues that get their own label in /metrics; the
	// rest are summed as queue="_other".
	MaxQueues int
	Version   string
	Log       zerolog.Logger
	// TLS, when set, makes the side HTTPS with the RESP TLS port's
	// certificate, CA and client-certificate rule (main sets it with
	// tls-port).
	TLS *tls.Config
}

// Server serves the HTTP side.
type Server struct {
	opts Options
	mux  *http.ServeMux
	srv  *http.Server
	ln   net.Listener
}

// New makes a Server; Listen starts it.
func New(o Options) *Server {
	s := &Server{opts: o, mux: http.NewServeMux()}
	s.routes()
	s.srv = &http.Server{
		Handler:           s.auth(s.mux),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          nil,
	}
	return s
}

// routes registers every path. Each part of the HTTP side registers its
// own in its own file.
func (s *Server) routes() {
	s.healthRoutes()
	s.metricsRoutes()
	s.dashboardRoutes()
}

// Handler is the server's whole handler, auth included (for tests).
func (s *Server) Handler() http.Handler { return s.srv.Handler }

// Listen binds the address and serves in the background.
func (s *Server) Listen() error {
	ln, err := net.Listen("tcp", s.opts.Addr)
	if err != nil {
		return err
	}
	if s.opts.TLS != nil {
		ln = tls.NewListener(ln, s.opts.TLS)
	}
	s.ln = ln
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.opts.Log.Error().Err(err).Msg("http serve")
		}
	}()
	return nil
}

// Addr is the address the server listens on, once Listen returned.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops accepting and waits up to timeout for requests in flight.
func (s *Server) Close(timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		s.srv.Close()
	}
}

// auth asks for the password with HTTP basic auth when one is set. /healthz
// stays open: it says only that the process answers, and probes seldom
// carry credentials.
func (s *Server) auth(next http.Handler) http.Handler {
	if s.opts.Password == "" {
		return next
	}
	want := []byte(s.opts.Password)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			next.ServeHTTP(w, r)
			return
		}
		_, pass, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(pass), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="delayd", charset="UTF-8"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
