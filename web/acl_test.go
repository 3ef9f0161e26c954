package web

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
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
