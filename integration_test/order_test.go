package integration

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SPEC "Order and time": jobs of one queue become ready in order of (due
// time, add order), whichever wheel level each went through.

// planned is one job of an ordering test.
type planned struct {
	seq     int // add order
	due     int64
	payload string
	id      string
}

// readyOrder sorts jobs the way SPEC says they become ready.
func readyOrder(jobs []planned) []planned {
	out := append([]planned(nil), jobs...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].due != out[j].due {
			return out[i].due < out[j].due
		}
		return out[i].seq < out[j].seq
	})
	return out
}

// waitReady polls DELAY.STATS until key has n ready jobs.
func waitReadyCount(t testing.TB, c *redis.Client, key string, n int64, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		_, ready, _ := stats(t, c, key)
		if ready == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("DELAY.STATS %s: ready = %d after %v, want %d", key, ready, limit, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// expectReadyOrder checks DELAY.PEEK (nothing removed), then pops every job
// and checks the same order.
func expectReadyOrder(t testing.TB, c *redis.Client, key string, want []planned) {
	t.Helper()
	peek, ok := do(t, c, "DELAY.PEEK", key, len(want)+10).([]any)
	if !ok {
		t.Fatalf("DELAY.PEEK %s: not an array", key)
	}
	var got []string
	for _, e := range peek {
		pair, ok := e.([]any)
		if !ok || len(pair) != 2 {
			t.Fatalf("DELAY.PEEK %s: element %s is not an [id, payload] pair", key, showValue(e))
		}
		got = append(got, fmt.Sprint(pair[1]))
	}
	wantPayloads := make([]string, len(want))
	for i, j := range want {
		wantPayloads[i] = j.payload
	}
	if fmt.Sprint(got) != fmt.Sprint(wantPayloads) {
		t.Errorf("DELAY.PEEK %s: ready order\n got  %v\n want %v", key, got, wantPayloads)
	}
	// popping gives the same order, with the ids the adds replied
	var popped, wantPops []string
	for _, j := range want {
		wantPops = append(wantPops, j.id+"="+j.payload)
		v, err := c.Do(ctxT(t, opTimeout), "DELAY.POP", key, "0.5").Slice()
		if err != nil || len(v) != 3 || v[0] != key {
			t.Fatalf("DELAY.POP %s 0.5: got %s, want [%s, %s, %s]", key, show(v, err), key, j.id, j.payload)
		}
		popped = append(popped, fmt.Sprint(v[1], "=", v[2]))
	}
	if fmt.Sprint(popped) != fmt.Sprint(wantPops) {
		t.Errorf("DELAY.POP %s: order (id=payload)\n got  %v\n want %v", key, popped, wantPops)
	}
	expect(t, c, nil, "DELAY.POP", key, "0.05")
}

// TestSameDueTimeKeepsAddOrder adds jobs due at T-1, T and T+1 in rounds 5 s,
// 2.5 s, 800 ms, 200 ms and 60 ms before T, so the same due time sits in
// different wheel levels; they must come out in (due, add order).
func TestSameDueTimeKeepsAddOrder(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()

	start := time.Now()
	T := start.Add(5 * time.Second).UnixMilli()
	roundsAt := []time.Duration{0, 2500 * time.Millisecond, 4200 * time.Millisecond, 4800 * time.Millisecond, 4940 * time.Millisecond}
	var jobs []planned
	for r, at := range roundsAt {
		time.Sleep(time.Until(start.Add(at)))
		for _, due := range []int64{T, T - 1, T + 1, T} {
			j := planned{seq: len(jobs), due: due, payload: fmt.Sprintf("r%d-due%+d-#%d", r, due-T, len(jobs))}
			j.id = bulkID(t, "DELAY.ADDAT", do(t, c, "DELAY.ADDAT", "q", due, j.payload))
			jobs = append(jobs, j)
		}
		if now := time.Now().UnixMilli(); now >= T-3 {
			t.Skipf("round %d ended at T%+d ms: the machine is too slow for this test", r, now-T)
		}
	}
	expectStats(t, c, "q", int64(len(jobs)), 0, 0)
	waitReadyCount(t, c, "q", int64(len(jobs)), 3*time.Second)
	expectReadyOrder(t, c, "q", readyOrder(jobs))
}

// TestDueOrder adds jobs due at random times in random order; they come out
// sorted by due time (ties in add order).
func TestDueOrder(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()

	rng := rand.New(rand.NewPCG(42, 42))
	base := time.Now().Add(700 * time.Millisecond).UnixMilli()
	var jobs []planned
	for i := 0; i < 80; i++ {
		due := base + int64(rng.IntN(40))*17 // 40 distinct times over ~680 ms, with ties
		j := planned{seq: i, due: due, payload: fmt.Sprintf("j%02d@%d", i, due-base)}
		j.id = bulkID(t, "DELAY.ADDAT", do(t, c, "DELAY.ADDAT", "q", due, j.payload))
		jobs = append(jobs, j)
	}
	if now := time.Now().UnixMilli(); now >= base-5 {
		t.Skipf("adds ended at base%+d ms: the machine is too slow for this test", now-base)
	}
	waitReadyCount(t, c, "q", int64(len(jobs)), 3*time.Second)
	expectReadyOrder(t, c, "q", readyOrder(jobs))
}

// TestPastAndZeroDelayJoinTail: a job with delay 0 or a past time joins the
// tail of the ready list at once, behind jobs already ready.
func TestPastAndZeroDelayJoinTail(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()

	a := add(t, c, "q", 0, "a")
	b := bulkID(t, "DELAY.ADDAT", do(t, c, "DELAY.ADDAT", "q", 1, "b-at-1970"))
	cc := add(t, c, "q", 0, "c")
	chain(t, c,
		cmd([]any{[]any{a, "a"}, []any{b, "b-at-1970"}, []any{cc, "c"}}, "DELAY.PEEK", "q", 3),
	)
}
