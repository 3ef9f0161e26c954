package integration

import (
	"strings"
	"testing"
	"time"
)

// A follower restarted after a while down sends clients to the leader at
// once. It used to answer CLUSTERDOWN (and show only itself in CLUSTER
// NODES) for up to 10 s while the cluster was healthy: it heard the
// leader's heartbeats at once, but learned where the members' clients
// connect only from its log, which the leader, backing off from a peer that
// had been down, sent again only every 10 s. Now it reads where they
// connect from the file it kept (cluster/memberscache.go).
func TestClusterRestartedFollowerRedirectsAtOnce(t *testing.T) {
	t.Parallel()
	cc := clStart(t, 3)
	leader := cc.waitLeader(t, 15*time.Second, nil)
	f := cc.followers(leader)[0]
	f.Kill9()
	// Long enough for the leader's retries to the dead peer to back off to
	// their 10 s ceiling (10 ms doubling: about 10 s in all).
	time.Sleep(12 * time.Second)
	f.Restart() // returns once it answers PING
	began := time.Now()
	c := f.client()
	var last string
	for {
		_, err := f.do(c, "DELAY.ADD", "q", 60000, "x")
		if err != nil && strings.HasPrefix(err.Error(), "MOVED ") {
			break
		}
		last = "no error"
		if err != nil {
			last = err.Error()
		}
		if time.Since(began) > 3*time.Second {
			t.Fatalf("%v, restarted with the leader %v alive, still answers %q after %v (want MOVED to the leader)",
				f, leader, last, time.Since(began).Round(time.Millisecond))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("MOVED after %v", time.Since(began).Round(time.Millisecond))
	lines, err := f.nodesView()
	if err != nil || len(lines) != 3 {
		t.Errorf("%v CLUSTER NODES right after its restart: %v (%v), want the 3 members", f, lines, err)
	}
}
