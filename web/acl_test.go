package web

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rs/zerolog"

	"github.com/delayd/delayd/commands"
	"github.com/delayd/delayd/engine"
)

// TestACLUsersOverHTTP: basic auth checks the RESP users once one has a
// password, and the request's commands run as its user.
func TestACLUsersOverHTTP(t *testing.T) {
	s := newTestServer(t, Options{})
	ctx := context.Background()
	code := func(user, pass string) int {
		r := httptest.NewRequest("GET", "/metrics", nil)
		if user != "" || pass != "" {
			r.SetBasicAuth(user, pass)
		}
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, r)
		return w.Code
	}
	if c := code("", ""); c != http.StatusOK {
		t.Fatalf("no user has a password: %d", c)
	}
	if _, err := s.Do(ctx, "ACL", "SETUSER", "worker", "on", ">wp", "~jobs:*", "+delay.pop", "+delay.ack"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		user, pass string
		want       int
	}{
		{"", "", http.StatusUnauthorized},
		{"worker", "bad", http.StatusUnauthorized},
		{"worker", "wp", http.StatusOK},
	} {
		if got := code(c.user, c.pass); got != c.want {
			t.Errorf("%s:%s: %d, want %d", c.user, c.pass, got, c.want)
		}
	}
	as := context.WithValue(ctx, userKey{}, "worker")
	if _, err := s.Do(as, "DELAY.ADD", "jobs:a", "0", "x"); err == nil || err.Error() != "NOPERM User worker has no permissions to run the 'delay.add' command" {
		t.Fatalf("worker's DELAY.ADD over HTTP: %v", err)
	}
	if v, err := s.Do(as, "DELAY.ACK", "jobs:a", "nope"); err != nil || v != int64(0) {
		t.Fatalf("worker's DELAY.ACK over HTTP: %#v %v", v, err)
	}
	// requirepass: the default user's password, under any other name too.
	if _, err := s.Do(ctx, "ACL", "SETUSER", "default", "resetpass", ">dp"); err != nil {
		t.Fatal(err)
	}
	if code("admin", "dp") != http.StatusOK || code("admin", "wp") != http.StatusUnauthorized {
		t.Error("default user's password under another name")
	}
}

// TestMonitoringAfterRunTimeUser: a user added at run time turns HTTP auth
// on; by default /metrics and /readyz then answer 401 like the dashboard,
// and with OpenMonitoring they stay 200 while the dashboard asks.
func TestMonitoringAfterRunTimeUser(t *testing.T) {
	for _, open := range []bool{false, true} {
		s := newTestServer(t, Options{OpenMonitoring: open})
		code := func(path string) int {
			w := httptest.NewRecorder()
			s.Handler().ServeHTTP(w, httptest.NewRequest("GET", path, nil))
			return w.Code
		}
		if _, err := s.Do(context.Background(), "ACL", "SETUSER", "bob", "on", ">bp", "+@all", "~*"); err != nil {
			t.Fatal(err)
		}
		monitoring := http.StatusUnauthorized
		if open {
			monitoring = http.StatusOK
		}
		for path, want := range map[string]int{
			"/healthz":   http.StatusOK,
			"/readyz":    monitoring,
			"/metrics":   monitoring,
			"/":          http.StatusUnauthorized,
			"/queues":    http.StatusUnauthorized,
			"/./metrics": http.StatusUnauthorized, // not the exact path: auth first
		} {
			if got := code(path); got != want {
				t.Errorf("OpenMonitoring %v: %s after ACL SETUSER: %d, want %d", open, path, got, want)
			}
		}
	}
}

// TestOpenMonitoringUnderProtectedMode: with OpenMonitoring, Prometheus
// scraping from another host gets /metrics under protected mode too (it
// is treated as the probes are); the dashboard is still refused.
func TestOpenMonitoringUnderProtectedMode(t *testing.T) {
	eng, err := engine.New(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	for _, open := range []bool{false, true} {
		d := commands.New(commands.Options{Engine: eng, ProtectedMode: true, Log: zerolog.Nop()})
		s := New(Options{Dispatcher: d, OpenMonitoring: open})
		get := func(path string) int {
			r := httptest.NewRequest("GET", path, nil)
			r.RemoteAddr = "192.0.2.1:1234"
			w := httptest.NewRecorder()
			s.Handler().ServeHTTP(w, r)
			return w.Code
		}
		metrics := http.StatusForbidden
		if open {
			metrics = http.StatusOK
		}
		if got := get("/metrics"); got != metrics {
			t.Errorf("OpenMonitoring %v: /metrics from another host: %d, want %d", open, got, metrics)
		}
		if got := get("/queues"); got != http.StatusForbidden {
			t.Errorf("OpenMonitoring %v: /queues from another host: %d, want 403", open, got)
		}
	}
}
