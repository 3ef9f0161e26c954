package integration

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// In a cluster only the leader fires a recurring schedule, and a firing is
// one Raft entry: a leader killed with kill -9 hands the schedule to the
// next, which fires what was missed (MISFIRE all) and never a firing the
// group already committed. A worker on the cluster client, acking every
// job, sees every firing of the run, each id exactly once once acked, none
// before its time. An ACK whose reply the kill lost may have been applied:
// such a job never comes back, and its firing counts as made.
func TestClusterScheduleFiresOnceAcrossFailover(t *testing.T) {
	t.Parallel()
	const every = 200
	cc := clStart(t, 3)
	old := cc.waitLeader(t, 10*time.Second, nil)
	if v := do(t, old.client(), "DELAY.SCHEDULE", "{s}ticks", "tick", "EVERY", every, "tick",
		"ACKTIMEOUT", 1500, "MISFIRE", "all"); v != "OK" {
		t.Fatalf("DELAY.SCHEDULE: %s", showValue(v))
	}
	var addrs []string
	for _, n := range cc.nodes {
		addrs = append(addrs, n.Addr())
	}
	rc := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: addrs, Protocol: 2, DialTimeout: time.Second, ReadTimeout: 3 * time.Second, WriteTimeout: time.Second,
		ClusterStateReloadInterval: 300 * time.Millisecond, MaxRetries: -1,
	})
	defer rc.Close()

	var (
		mu    sync.Mutex
		acked = map[string]bool{}
		// unsure: ids whose ACK got no reply (the leader was killed). If
		// the ACK was not applied, the job comes back after its ack timeout
		// and is acked then; if it was, it is gone and counts as made.
		unsure = map[string]bool{}
		again  []string // ids delivered after their ACK succeeded: a firing made twice
		early  []string
	)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
			v, err := rc.Do(ctx, "DELAY.POP", "{s}ticks", 1).StringSlice()
			cancel()
			if err != nil {
				if !errors.Is(err, redis.Nil) {
					time.Sleep(50 * time.Millisecond) // an election: the client reloads the slot map
				}
				continue
			}
			id := v[1]
			at, perr := strconv.ParseInt(strings.TrimPrefix(id, "tick:"), 10, 64)
			now := time.Now().UnixMilli()
			mu.Lock()
			if perr != nil || now < at {
				early = append(early, fmt.Sprintf("%s at %d", id, now))
			}
			if acked[id] {
				again = append(again, id)
			}
			mu.Unlock()
			ctx, cancel = context.WithTimeout(context.Background(), 3*time.Second)
			n, err := rc.Do(ctx, "DELAY.ACK", "{s}ticks", id).Int()
			cancel()
			mu.Lock()
			if err == nil && n == 1 {
				acked[id] = true
			} else if err != nil {
				// The leader may have applied the ACK and died before
				// replying: the job is gone, the firing was made.
				unsure[id] = true
			}
			mu.Unlock()
		}
	}()

	time.Sleep(2 * time.Second)
	old.Kill9()
	leader := cc.waitLeader(t, 15*time.Second, nil)
	time.Sleep(2 * time.Second)
	old.spawnAgain(t)
	cc.waitCaughtUp(t, 20*time.Second, leader, old)
	time.Sleep(time.Second)
	leader = cc.waitLeader(t, 10*time.Second, nil)
	if v := do(t, leader.client(), "DELAY.UNSCHEDULE", "{s}ticks", "tick"); v != int64(1) {
		t.Fatalf("DELAY.UNSCHEDULE: %s", showValue(v))
	}
	// Every firing made is acked in the end (a pop whose reply the kill
	// lost comes back after its ack timeout).
	clWait(t, 20*time.Second, "every firing acked", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st, err := rc.Do(ctx, "DELAY.STATS", "{s}ticks").Slice()
		if err != nil {
			return false, err.Error()
		}
		return st[1] == int64(0) && st[3] == int64(0) && st[5] == int64(0), fmt.Sprint(st)
	})
	close(stop)
	<-done

	mu.Lock()
	defer mu.Unlock()
	var fires []int64
	for id := range acked {
		at, _ := strconv.ParseInt(strings.TrimPrefix(id, "tick:"), 10, 64)
		fires = append(fires, at)
	}
	for id := range unsure {
		if !acked[id] {
			t.Logf("%s: its ACK's reply was lost and it never came back: the ACK was applied", id)
			at, _ := strconv.ParseInt(strings.TrimPrefix(id, "tick:"), 10, 64)
			fires = append(fires, at)
		}
	}
	sort.Slice(fires, func(i, j int) bool { return fires[i] < fires[j] })
	if len(fires) < 20 {
		t.Fatalf("only %d firings acked over a ~6 s run of EVERY %d", len(fires), every)
	}
	for i := 1; i < len(fires); i++ {
		if fires[i]-fires[i-1] != every {
			t.Errorf("firings %d and %d: %d ms apart, want %d (a gap)", fires[i-1], fires[i], fires[i]-fires[i-1], every)
		}
	}
	if len(again) > 0 {
		t.Errorf("delivered again after their ACK (fired twice): %v", again)
	}
	if len(early) > 0 {
		t.Errorf("handed out before their fire time: %v", early)
	}
	t.Logf("%d firings from %d to %d, each acked once, across a leader kill", len(fires), fires[0], fires[len(fires)-1])
}
