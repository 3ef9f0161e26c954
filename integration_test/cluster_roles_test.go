package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Roles that tell the truth: every node of a group is asked its role every
// way a client asks (CLUSTER NODES, CLUSTER SLOTS, INFO replication, HELLO)
// across leader kills (SIGKILL) and restarts of the killed node. At no
// sample do two nodes say they are the master, and a node that says so
// takes a write sent right after (or, if it does not, no longer says so
// when asked again: it stepped down in between). Samples with no master at
// all (an election, a restart) are the honest in-between.
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
	if rs.served < 5 || rs.none < 1 {
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
	if s == nil || !s.Running() {
		return nil, false
	}
	c, ok := rs.clients[s]
	if !ok {
		c = s.Client(func(o *redis.Options) { o.ReadTimeout = time.Second; o.DialTimeout = 200 * time.Millisecond })
		rs.clients[s] = c
	}
	return c, true
}

// claimsMaster asks a node every way a client learns its role: CLUSTER
// NODES (its own line myself,master), CLUSTER SLOTS (itself first), INFO
// replication (role:master) and HELLO (role master). claims is true if any
// of them says master, with what each said; ok is false when it did not
// answer.
func claimsMaster(c *redis.Client, addr string) (claims bool, said string, ok bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	text, err := c.Do(ctx, "CLUSTER", "NODES").Text()
	if err != nil {
		return false, "", false
	}
	lines, err := clParseNodes(text)
	if err != nil {
		return false, "", false
	}
	var views []string
	for _, l := range lines {
		if l.flags["myself"] && l.flags["master"] {
			views = append(views, "NODES myself,master")
		}
	}
	switch slots, err := c.Do(ctx, "CLUSTER", "SLOTS").Slice(); {
	case err == nil && len(slots) > 0:
		if r, _ := slots[0].([]any); len(r) > 2 {
			if m, _ := r[2].([]any); len(m) > 1 && net.JoinHostPort(fmt.Sprint(m[0]), fmt.Sprint(m[1])) == addr {
				views = append(views, "SLOTS names itself")
			}
		}
	case err != nil && clErrKind(err) != "CLUSTERDOWN":
		return false, "", false
	}
	info, err := c.Do(ctx, "INFO", "replication").Text()
	if err != nil {
		return false, "", false
	}
	if role, _ := infoValue(info, "role"); role == "master" {
		views = append(views, "INFO role:master")
	}
	hello, err := c.Do(ctx, "HELLO", "2").Slice()
	if err != nil {
		return false, "", false
	}
	for i := 0; i+1 < len(hello); i += 2 {
		if hello[i] == "role" && hello[i+1] == "master" {
			views = append(views, "HELLO role master")
		}
	}
	return len(views) > 0, strings.Join(views, ", "), true
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
				claims[i], _, answered[i] = claimsMaster(p.c, p.n.Addr())
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
			rs.violations = append(rs.violations, time.Now().Format("15:04:05.000")+": two nodes say they are the master: "+strings.Join(names, ", "))
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
				if still, said, ok := claimsMaster(m.c, m.n.Addr()); ok && still {
					rs.mu.Lock()
					rs.violations = append(rs.violations, fmt.Sprintf("%s: %v says it is the master (%s) and answers a write %v",
						time.Now().Format("15:04:05.000"), m.n, said, err))
					rs.mu.Unlock()
				}
			}
		}
	}
}
