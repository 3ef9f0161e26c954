package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Issue 13's fault battery on the real binary. Each test has its own data
// dir and ends by checking that every acknowledged write survived a restart.

// faultsEnvInt reads a positive int from the environment, else def.
func faultsEnvInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// TestFaultsKill9DuringRewrite: kill -9 at a random moment of a log rewrite
// while a client adds and cancels jobs under appendfsync always, then
// restart: every acknowledged job is there, every acknowledged cancel
// holds, and nothing else is (a write in flight at the kill may or may not
// be). DELAYD_FAULTS_REWRITE_KILLS sets the number of kills (issue 13 asks
// for 50; 5 by default to keep CI short).
func TestFaultsKill9DuringRewrite(t *testing.T) {
	t.Parallel()
	kills := faultsEnvInt("DELAYD_FAULTS_REWRITE_KILLS", 5)
	s := startServer(t, "--appendonly", "yes", "--appendfsync", "always", "--auto-rewrite-percentage", "0")
	c := s.Client()
	// Enough jobs that a rewrite takes tens of milliseconds.
	live := map[string]bool{}
	for _, id := range durAddMany(t, c, "q", 3_600_000, 100_000) {
		live[id] = true
	}
	start := time.Now()
	expect(t, c, anyReply{}, "BGREWRITEAOF")
	durWaitRewriteDone(t, s, 60*time.Second)
	took := time.Since(start)
	t.Logf("a rewrite of %d jobs takes about %v", len(live), took)

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 13))
	inRewrite := 0
	for k := range kills {
		// A writer adds jobs with known ids and cancels some of them.
		var mu sync.Mutex
		var maybe []string // in flight at the kill: either outcome is right
		cancelled := map[string]bool{}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := durNewClient(s)
			defer w.Close()
			ctx := context.Background()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("k%d-%d", k, i)
				if i%5 == 4 {
					victim := fmt.Sprintf("k%d-%d", k, i-2)
					mu.Lock()
					ok := live[victim]
					mu.Unlock()
					if !ok {
						continue
					}
					if err := w.Do(ctx, "DELAY.CANCEL", "q", victim).Err(); err != nil {
						mu.Lock()
						maybe = append(maybe, victim)
						delete(live, victim)
						mu.Unlock()
						return
					}
					mu.Lock()
					delete(live, victim)
					cancelled[victim] = true
					mu.Unlock()
					continue
				}
				err := w.Do(ctx, "DELAY.ADD", "q", 3_600_000, "p", "ID", id).Err()
				mu.Lock()
				if err != nil {
					maybe = append(maybe, id)
				} else {
					live[id] = true
				}
				mu.Unlock()
				if err != nil {
					return // the server died
				}
			}
		}()
		time.Sleep(20 * time.Millisecond)
		expect(t, c, anyReply{}, "BGREWRITEAOF")
		time.Sleep(time.Duration(rng.Int64N(int64(took + took/4))))
		if v, _ := s.info("persistence", "aof_rewrite_in_progress"); v == "1" {
			inRewrite++
		}
		s.Kill9()
		close(stop)
		wg.Wait()

		durRestartAfterKill(t, s)
		c = s.Client()
		ids := make([]string, 0, len(live))
		for id := range live {
			ids = append(ids, id)
		}
		found := durExisting(t, c, "q", ids)
		if len(found) != len(ids) {
			t.Fatalf("kill %d: %d of %d acknowledged jobs after restart", k+1, len(found), len(ids))
		}
		gone := make([]string, 0, len(cancelled))
		for id := range cancelled {
			gone = append(gone, id)
		}
		if back := durExisting(t, c, "q", gone); len(back) > 0 {
			t.Fatalf("kill %d: %d acknowledged cancels undone", k+1, len(back))
		}
		var extra int
		for id := range durExisting(t, c, "q", maybe) {
			live[id] = true // it is in the log now: from here on it must stay
			extra++
		}
		d, r, res := stats(t, c, "q")
		if total := d + r + res; total != int64(len(live)) {
			t.Fatalf("kill %d: DELAY.STATS q counts %d jobs, want %d (nothing but acknowledged writes and %d in flight)",
				k+1, total, len(live), extra)
		}
	}
	t.Logf("%d kills, %d of them with the rewrite in progress; %d jobs checked each time", kills, inRewrite, len(live))
	// A rewrite still completes after all that.
	expect(t, c, anyReply{}, "BGREWRITEAOF")
	durWaitRewriteDone(t, s, 60*time.Second)
	if v, _ := s.info("persistence", "aof_last_write_status"); v != "ok" {
		t.Errorf("aof_last_write_status = %q", v)
	}
}
