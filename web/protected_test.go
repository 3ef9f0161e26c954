package web

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/delayd/delayd/commands"
	"github.com/delayd/delayd/engine"
)

// TestProtectedModeOverHTTP: the HTTP side refuses what RESP refuses, a
// peer off loopback while the default user needs no password, with a 403
// carrying Redis's DENIED explanation; the probes stay open.
func TestProtectedModeOverHTTP(t *testing.T) {
	eng, err := engine.New(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	newServer := func(protected bool) *Server {
		d := commands.New(commands.Options{Engine: eng, ProtectedMode: protected, Log: zerolog.Nop()})
		return New(Options{Dispatcher: d})
	}
	get := func(s *Server, from, path, user, pass string) (int, string) {
		r := httptest.NewRequest("GET", path, nil)
		r.RemoteAddr = from
		if user != "" {
			r.SetBasicAuth(user, pass)
		}
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, r)
		body, _ := io.ReadAll(w.Result().Body)
		return w.Code, string(body)
	}
	const outside, outside6, local, local6, mapped = "192.0.2.1:1234", "[2001:db8::1]:1234", "127.0.0.1:1234", "[::1]:1234", "[::ffff:127.0.0.1]:1234"

	s := newServer(true)
	for _, from := range []string{outside, outside6} {
		for _, path := range []string{"/metrics", "/", "/queues"} {
			code, body := get(s, from, path, "", "")
			if code != http.StatusForbidden || !strings.HasPrefix(body, "DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user.") ||
				!strings.Contains(body, "'--protected-mode no'") {
				t.Errorf("%s from %s: %d %q, want 403 with the DENIED explanation", path, from, code, body)
			}
		}
		// Basic auth does not help: the default user takes any password.
		if code, _ := get(s, from, "/metrics", "default", "anything"); code != http.StatusForbidden {
			t.Errorf("/metrics from %s with credentials: %d, want 403", from, code)
		}
		for _, path := range []string{"/healthz", "/readyz"} {
			if code, _ := get(s, from, path, "", ""); code != http.StatusOK {
				t.Errorf("%s from %s: %d, want 200 (probes stay open)", path, from, code)
			}
		}
	}
	for _, from := range []string{local, local6, mapped, "@"} {
		if code, _ := get(s, from, "/metrics", "", ""); code != http.StatusOK {
			t.Errorf("/metrics from %s: %d, want 200", from, code)
		}
	}

	// A user with a password, while the default user needs none, does not
	// lift it (Redis 7 asks only about the default user); a password for
	// the default user does.
	ctx := context.Background()
	if _, err := s.Do(ctx, "ACL", "SETUSER", "worker", "on", ">wp", "+@all", "~*"); err != nil {
		t.Fatal(err)
	}
	if code, _ := get(s, outside, "/metrics", "worker", "wp"); code != http.StatusForbidden {
		t.Errorf("worker from outside, default user open: %d, want 403", code)
	}
	if _, err := s.Do(ctx, "ACL", "SETUSER", "default", ">dp"); err != nil {
		t.Fatal(err)
	}
	if code, _ := get(s, outside, "/metrics", "worker", "wp"); code != http.StatusOK {
		t.Errorf("worker from outside, default user has a password: %d, want 200", code)
	}
	if code, _ := get(s, outside, "/metrics", "", ""); code != http.StatusUnauthorized {
		t.Errorf("no credentials from outside, default user has a password: %d, want 401", code)
	}

	// --protected-mode no.
	if code, _ := get(newServer(false), outside, "/metrics", "", ""); code != http.StatusOK {
		t.Errorf("protected mode off, from outside: %d, want 200", code)
	}
}
