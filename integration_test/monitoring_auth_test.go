package integration

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// SPEC "Observability" with issue 30: a user added at run time turns HTTP
// auth on, so by default /metrics and /readyz answer 401 to a scraper or
// probe without credentials; --http-monitoring-auth no keeps them open
// while the dashboard asks.
func TestMonitoringAuthAfterRunTimeUser(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		flag       string
		monitoring int
	}{
		{"yes", http.StatusUnauthorized},
		{"no", http.StatusOK},
	} {
		t.Run(c.flag, func(t *testing.T) {
			t.Parallel()
			httpAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
			s := startServer(t, "--http-addr", httpAddr, "--http-monitoring-auth", c.flag)
			hc := &http.Client{Timeout: 5 * time.Second}
			get := func(path string) int {
				resp, err := hc.Get("http://" + httpAddr + path)
				if err != nil {
					t.Fatalf("GET %s: %v", path, err)
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			for _, path := range []string{"/metrics", "/readyz", "/healthz", "/"} {
				if got := get(path); got != http.StatusOK {
					t.Fatalf("%s before any user: %d, want 200", path, got)
				}
			}
			expect(t, s.Client(), "OK", "ACL", "SETUSER", "bob", "on", ">bp", "+@all", "~*")
			for path, want := range map[string]int{
				"/metrics": c.monitoring,
				"/readyz":  c.monitoring,
				"/healthz": http.StatusOK,
				"/":        http.StatusUnauthorized,
			} {
				if got := get(path); got != want {
					t.Errorf("--http-monitoring-auth %s: %s after ACL SETUSER: %d, want %d", c.flag, path, got, want)
				}
			}
			// RESP clients of the passwordless default user are unaffected.
			expect(t, s.Client(), "PONG", "PING")
		})
	}
}
