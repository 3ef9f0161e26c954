package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Roles that tell the truth: CLUSTER NODES is polled on every node of a
// group across leader kills (SIGKILL) and restarts of the killed node. At
// no sample do two nodes say "myself,master", and a node that says it is
// the master takes a write sent right after (or, if it does not, no longer
// says so when asked again: it stepped down in between). Samples with no
// master at all (an election, a restart) are the honest in-between.
func TestClusterRolesTellTheTruth(t *testing.T) {
	t.Parallel()
	cc := clStart(t, 3)
	cc.waitLeader(t, 15*time.Second, nil)

	rs := &roleSampler{cc: cc, clients: map[*server]*redis.Client{}, stop: make(chan struct{})}
	done := make(chan struct{})
	go func() { defer close(done); rs.run() }()
	defer func() {
		select {
		case <-rs.stop:
		default:
			close(rs.stop)
		}
		<-done
	}()

	for round := 0; round < 2; round++ {
		old := cc.waitLeader(t, 20*time.Second, nil)
		time.Sleep(300 * time.Millisecond) // samples of a settled group
		old.Kill9()
		leader := cc.waitLeader(t, 20*time.Second, nil)
		time.Sleep(300 * time.Millisecond)
		old.Restart()
		clWait(t, 20*time.Second, fmt.Sprintf("%v (restarted) following %v", old, leader), func() (bool, string) {
			r := old.role()
			return r == "slave", "role " + r
		})
		time.Sleep(300 * time.Millisecond)
	}
	close(rs.stop)
	<-done

	rs.mu.Lock()
	defer rs.mu.Unlock()
	t.Logf("%d samples: %d with one master that took a write, %d with none", rs.rounds, rs.served, rs.none)
	for _, v := range rs.violations {
		t.Error(v)
	}
	// The test saw what it is about: masters serving, and elections.
	if rs.served < 10 || rs.none < 1 {
		t.Errorf("too few samples to judge: %d with a serving master, %d with none", rs.served, rs.none)
	}
}

// roleSampler polls every node's CLUSTER NODES, all nodes at once, until
// stop is closed.
type roleSampler struct {
	cc      *clCluster
	stop    chan struct{}
	clients map[*server]*redis.Client // one per process, no retries

	mu                   sync.Mutex
	rounds, served, none int
	violations           []string
}

func (rs *roleSampler) client(n *clNode) (*redis.Client, bool) {
	n.mu.Lock()
	s := n.server
	n.mu.Unlock()
	if s == nil || !s.running() {
		return nil, false
	}
	c, ok := rs.clients[s]
	if !ok {
		c = s.Client(func(o *redis.Options) { o.ReadTimeout = time.Second; o.DialTimeout = 200 * time.Millisecond })
		rs.clients[s] = c
	}
	return c, true
}

// claimsMaster reports whether the node's own line says myself,master; ok
// is false when it did not answer.
func claimsMaster(c *redis.Client) (claims, ok bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	text, err := c.Do(ctx, "CLUSTER", "NODES").Text()
	if err != nil {
		return false, false
	}
	lines, err := clParseNodes(text)
	if err != nil {
		return false, false
	}
	for _, l := range lines {
		if l.flags["myself"] {
			return l.flags["master"], true
		}
	}
	return false, true
}

func (rs *roleSampler) run() {
	for {
		select {
		case <-rs.stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
		type probe struct {
			n *clNode
			c *redis.Client
		}
		var probes []probe
		for _, n := range rs.cc.nodes {
			if c, ok := rs.client(n); ok {
				probes = append(probes, probe{n, c})
			}
		}
		claims := make([]bool, len(probes))
		answered := make([]bool, len(probes))
		var wg sync.WaitGroup
		for i, p := range probes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				claims[i], answered[i] = claimsMaster(p.c)
			}()
		}
		wg.Wait()
		var masters []probe
		for i, p := range probes {
			if answered[i] && claims[i] {
				masters = append(masters, p)
			}
		}
		rs.mu.Lock()
		rs.rounds++
		switch {
		case len(masters) > 1:
			var names []string
			for _, m := range masters {
				names = append(names, m.n.String())
			}
			rs.violations = append(rs.violations, time.Now().Format("15:04:05.000")+": two nodes say myself,master: "+strings.Join(names, ", "))
		case len(masters) == 0:
			rs.none++
		}
		rs.mu.Unlock()
		for _, m := range masters {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err := m.c.Do(ctx, "DELAY.ADD", "{roles}w", 3600000, "x").Err()
			cancel()
			var re redis.Error
			switch {
			case err == nil:
				rs.mu.Lock()
				rs.served++
				rs.mu.Unlock()
			case !errors.As(err, &re):
				// No reply: the node died (a kill) or is too slow to say.
			default:
				// A refusal is fair only from a node that stopped leading
				// meanwhile: ask again.
				if still, ok := claimsMaster(m.c); ok && still {
					rs.mu.Lock()
					rs.violations = append(rs.violations, fmt.Sprintf("%s: %v says myself,master and answers a write %v",
						time.Now().Format("15:04:05.000"), m.n, err))
					rs.mu.Unlock()
				}
			}
		}
	}
}
