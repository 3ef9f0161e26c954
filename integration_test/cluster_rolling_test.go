package integration

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A rolling restart, as an operator (or a StatefulSet) does one: each node
// in turn gets SIGTERM, comes back and catches up, while a producer keeps
// adding. The leader's SIGTERM hands leadership over before it stops
// (cluster.Close), so the producer's longest wait across the leader's
// restart is a hand-over, not the election timeout a crash costs (1 s of
// silence before anyone campaigns); and every add the cluster acknowledged
// is there at the end.
func TestClusterRollingRestartHandsOver(t *testing.T) {
	t.Parallel()
	cc := clStart(t, 3)
	leader := cc.waitLeader(t, 15*time.Second, nil)

	var addrs []string
	for _, n := range cc.nodes {
		addrs = append(addrs, n.Addr())
	}
	// The README's settings for failover (go-redis row).
	rc := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: addrs, Protocol: 2, DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: time.Second,
		ClusterStateReloadInterval: 200 * time.Millisecond,
	})
	defer rc.Close()

	var (
		mu      sync.Mutex
		acked   []string
		lastAck time.Time
		gaps    []time.Duration // the producer's waits longer than 100 ms, in order
	)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			id := fmt.Sprintf("r%d", i)
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			err := rc.Do(cctx, "DELAY.ADD", "{roll}q", 3600000, "p", "ID", id).Err()
			cancel()
			if err != nil {
				// Not acknowledged: it may or may not be in; the checker
				// below asks only for the acknowledged ones.
				time.Sleep(10 * time.Millisecond)
				continue
			}
			now := time.Now()
			mu.Lock()
			if !lastAck.IsZero() && now.Sub(lastAck) > 100*time.Millisecond {
				gaps = append(gaps, now.Sub(lastAck))
			}
			acked, lastAck = append(acked, id), now
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	}()
	waitAcks := func(n int) {
		t.Helper()
		clWait(t, 15*time.Second, fmt.Sprintf("%d more acknowledged adds", n), func() (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			return len(acked) >= n, fmt.Sprintf("%d acknowledged", len(acked))
		})
	}
	waitAcks(50)

	// Followers first, the leader last, as the operations guide says.
	order := append(cc.followers(leader), leader)
	var handOver time.Duration
	for _, n := range order {
		wasLeader := n == leader
		mu.Lock()
		before := len(acked)
		gaps = gaps[:0]
		mu.Unlock()
		stopped := time.Now()
		if code, ok := n.Server.Stop(10 * time.Second); !ok || code != 0 {
			t.Fatalf("%v: SIGTERM did not stop it cleanly (exit %d)\n%s", n, code, n.Output())
		}
		if wasLeader {
			if !n.outputHas("leadership handed over before stopping", 0) {
				t.Errorf("%v stopped as leader without handing leadership over:\n%s", n, n.Output())
			}
			next := cc.waitLeader(t, 10*time.Second, nil)
			handOver = time.Since(stopped)
			t.Logf("leader %v stopped; %v leads; %v from SIGTERM to a writable leader", n, next, handOver.Round(time.Millisecond))
		}
		n.Restart()
		waitAcks(before + 50)
		mu.Lock()
		t.Logf("%v restarted; the producer's waits over 100 ms meanwhile: %v", n, gaps)
		if wasLeader {
			for _, g := range gaps {
				// A crash costs at least the 1 s heartbeat timeout before an
				// election starts; a hand-over, a round trip or two.
				if g >= time.Second {
					t.Errorf("the producer waited %v across the leader's SIGTERM: leadership was not handed over", g)
				}
			}
		}
		mu.Unlock()
	}
	stop()
	<-done

	final := cc.waitLeader(t, 10*time.Second, nil)
	cc.waitCaughtUp(t, 15*time.Second, final, cc.nodes...)
	mu.Lock()
	ids := append([]string(nil), acked...)
	mu.Unlock()
	c := final.client()
	missing := 0
	for _, id := range ids {
		got, err := clGet(final, c, "{roll}q", id)
		if err != nil && !errors.Is(err, redis.Nil) || got == nil {
			if missing++; missing <= 5 {
				t.Errorf("acknowledged add %s is not in the cluster after the rolling restart: %v %v", id, got, err)
			}
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged adds lost", missing, len(ids))
	}
	t.Logf("%d acknowledged adds, all present; leader hand-over %v", len(ids), handOver.Round(time.Millisecond))
}
