package testserver

import (
	"strings"
	"testing"
	"time"
)

// Watch ties s to the test t: when t ends, s is stopped (SIGTERM; a server
// still running 5 s later fails t, and its goroutine dump from SIGQUIT is in
// the output), a data race the server (built with -race) reported fails t,
// and s's output is logged when t failed, or always when verbose.
func Watch(t testing.TB, s *Server, verbose bool) {
	t.Cleanup(func() {
		if _, ok := s.Stop(5 * time.Second); !ok {
			t.Errorf("server did not exit within 5s of SIGTERM; sent SIGQUIT (goroutine dump below) and killed it")
		}
		if strings.Contains(s.Output(), "WARNING: DATA RACE") {
			t.Errorf("the server (built with -race) reported a data race")
		}
		if t.Failed() || verbose {
			t.Logf("server %s (args %q) output:\n%s", s.Addr(), s.Args, s.Output())
		}
	})
}
