package web

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/rs/zerolog"

	"github.com/delayd/delayd/commands"
	"github.com/delayd/delayd/engine"
)

// newTestServer is a Server over a real engine (no log) and dispatcher.
func newTestServer(t *testing.T, o Options) *Server {
	t.Helper()
	eng, err := engine.New(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	o.Dispatcher = commands.New(commands.Options{Engine: eng, RequirePass: o.Password, Log: zerolog.Nop()})
	return New(o)
}

func TestDoRunsCommandsThroughTheTable(t *testing.T) {
	s := newTestServer(t, Options{})
	ctx := context.Background()
	id, err := s.Do(ctx, "DELAY.ADD", "q", "0", "hello", "ID", "j1")
	if err != nil || string(id.([]byte)) != "j1" {
		t.Fatalf("DELAY.ADD: %v %v", id, err)
	}
	got, err := s.Do(ctx, "DELAY.GET", "q", "j1")
	if err != nil {
		t.Fatal(err)
	}
	m, ok := got.(Map)
	if !ok || len(m) < 4 || string(m[0].([]byte)) != "id" {
		t.Fatalf("DELAY.GET: got %#v, want a map", got)
	}
	if v, err := s.Do(ctx, "LRANGE", "q", "0", "-1"); err != nil || !reflect.DeepEqual(v, []any{[]byte("hello")}) {
		t.Fatalf("LRANGE: %#v %v", v, err)
	}
	if v, err := s.Do(ctx, "PING"); err != nil || v != Status("PONG") {
		t.Fatalf("PING: %#v %v", v, err)
	}
	if _, err := s.Do(ctx, "DELAY.ADD", "q"); err == nil || err.Error() != "ERR wrong number of arguments for 'delay.add' command" {
		t.Fatalf("bad arity: %v", err)
	}
	if v, err := s.Do(ctx, "DELAY.GET", "q", "nope"); err != nil || v != nil {
		t.Fatalf("DELAY.GET of nothing: %#v %v", v, err)
	}
}

func TestHealthAndAuth(t *testing.T) {
	s := newTestServer(t, Options{Password: "s3cret", Ready: func() (bool, string) { return false, "loading" }})
	get := func(path, pass string) (int, string) {
		r := httptest.NewRequest("GET", path, nil)
		if pass != "" {
			r.SetBasicAuth("default", pass)
		}
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, r)
		body, _ := io.ReadAll(w.Result().Body)
		return w.Code, string(body)
	}
	if code, _ := get("/healthz", ""); code != http.StatusOK {
		t.Fatalf("/healthz without a password: %d, want 200 (probes carry no credentials)", code)
	}
	if code, _ := get("/readyz", ""); code != http.StatusUnauthorized {
		t.Fatalf("/readyz without a password: %d, want 401", code)
	}
	if code, _ := get("/readyz", "wrong"); code != http.StatusUnauthorized {
		t.Fatalf("/readyz with a wrong password: %d, want 401", code)
	}
	if code, body := get("/readyz", "s3cret"); code != http.StatusServiceUnavailable || body != "loading\n" {
		t.Fatalf("/readyz while loading: %d %q, want 503 loading", code, body)
	}
}
