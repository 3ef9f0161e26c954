// Package web is delayd's HTTP side: /metrics for Prometheus, /healthz and
// /readyz for orchestrators, and the dashboard for people. It sits beside
// resp, not in front of the engine: every action it offers is RESP
// commands run through the same command table (Server.Do), so a screen is a
// view of the protocol and a button is a command (one per job of a
// selection at most). The dashboard's charts come from the same commands,
// run every 10 s by a sampler that starts when the dashboard is first
// opened and stops with Close.
package web

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/netip"
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
	// Password (requirepass), when set, makes every path but /healthz (and
	// those OpenMonitoring opens) ask for a user and password with HTTP
	// basic auth, checked against the dispatcher's users (auth); so does
	// any ACL user with a password, one added at run time included.
	Password string
	// OpenMonitoring leaves /metrics and /readyz open as /healthz always
	// is: no credentials and no protected mode, for scrapers and probes that
	// carry none (--http-monitoring-auth no). The dashboard stays behind
	// auth. Off by default: with it on, a user added at run time no longer
	// closes /metrics, so queue names and counts are there for anyone who
	// reaches the address.
	OpenMonitoring bool
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
	dash *dashboard
}

// New makes a Server; Listen starts it.
func New(o Options) *Server {
	s := &Server{opts: o, mux: http.NewServeMux()}
	s.routes()
	s.srv = &http.Server{
		Handler:           s.auth(s.mux),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          errorLog(o.Log), // errorlog.go
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
	s.dash.armSampler() // the dashboard's charts (dashboard_charts.go)
	return nil
}

// Addr is the address the server listens on, once Listen returned.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops accepting and waits up to timeout for requests in flight.
func (s *Server) Close(timeout time.Duration) {
	s.dash.stopSampler()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		s.srv.Close()
	}
}

// auth asks for a user and password with HTTP basic auth when a password
// is set (Password, requirepass) or any ACL user has one, and checks them
// against the RESP users: a user name that names a user logs in as that
// user, any other name as the default user (as AUTH with one argument).
// The request then runs its commands as that user (Server.Do), so the
// dashboard offers a user only what the user may run. /healthz stays open:
// it says only that the process answers, and probes seldom carry
// credentials; so do /metrics and /readyz with OpenMonitoring. Before any
// of that, protected mode turns away other hosts with a 403 and Redis's
// DENIED text (protected).
//
// Auth turns on the moment any user has a password, an ACL SETUSER at run
// time included, while RESP clients of a passwordless default user go on
// without one: the dashboard's buttons are commands, and a password on
// any user says the operator wants them guarded.
func (s *Server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := s.opts.Dispatcher
		if s.protected(r) {
			http.Error(w, commands.DeniedText, http.StatusForbidden)
			return
		}
		if s.open(r.URL.Path) || (s.opts.Password == "" && (d == nil || !d.NeedsAuth())) {
			next.ServeHTTP(w, r)
			return
		}
		name, pass, ok := r.BasicAuth()
		user, ok := s.login(name, pass, ok)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="delayd", charset="UTF-8"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, user)))
	})
}

// open reports whether path needs no credentials: /healthz always, and
// /metrics and /readyz with OpenMonitoring. Exact paths: anything the mux
// would clean or redirect first ("/./metrics") goes through auth.
func (s *Server) open(path string) bool {
	switch path {
	case "/healthz":
		return true
	case "/metrics", "/readyz":
		return s.opts.OpenMonitoring
	}
	return false
}

// protected reports whether protected mode refuses the request's peer, as
// RESP refuses it on accept (the dispatcher decides for both). /healthz and
// /readyz stay open: they say only whether the process answers and takes
// traffic, and an orchestrator's probes come from the node's address, not
// from loopback. /metrics joins them with OpenMonitoring: Prometheus
// scrapes from its own host, and the operator asked for it open.
func (s *Server) protected(r *http.Request) bool {
	d := s.opts.Dispatcher
	if d == nil || r.URL.Path == "/readyz" || s.open(r.URL.Path) {
		return false
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return false // not an IP peer (a Unix socket), as RESP lets those in
	}
	return d.Refuses(ap.Addr())
}

// userKey keys the authenticated user's name in a request's context.
type userKey struct{}

func (s *Server) login(name, pass string, given bool) (string, bool) {
	if !given {
		return "", false
	}
	d := s.opts.Dispatcher
	if d == nil {
		return "default", subtle.ConstantTimeCompare([]byte(pass), []byte(s.opts.Password)) == 1
	}
	if name == "" || !d.HasUser(name) {
		name = "default"
	}
	return name, d.Authenticate(name, pass)
}
