package web

import (
	"fmt"
	"net/http"
)

// healthRoutes: /healthz says the process answers; /readyz that it takes
// traffic (the log replayed; in a cluster, a leader known).
func (s *Server) healthRoutes() {
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	s.mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		ready, why := true, "ready"
		if s.opts.Ready != nil {
			ready, why = s.opts.Ready()
		}
		if !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprintln(w, why)
	})
}
