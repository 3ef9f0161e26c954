package engine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/record"
)

// Issue 10's features were built side by side; this test runs them
// together. A random mix of adds with UNIQUE, DEBOUNCE, GROUP and PRIORITY,
// pops (single and MPOP), acks, nacks, cancels, reschedules, promotions,
// limits and recurring schedules, with time passing, must come back exactly
// after a restart, after a rewrite, and on a follower fed the leader's
// batches: jobs, ready order, tombstones, schedules and limits alike.

// mixDump is dump plus the state that is not jobs.
func mixDump(e *Engine) string {
	var sb strings.Builder
	sb.WriteString(dump(e))
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.opNow
	for _, r := range e.tombRecs(now) {
		fmt.Fprintf(&sb, "tomb %x until %d\n", r.SID, r.Due)
	}
	for _, r := range record.ScheduleRecs(nil, &e.sched, nil, now) {
		st := r.Sched
		fmt.Fprintf(&sb, "schedule %s/%s every=%d last=%d count=%d\n", r.Queue, r.ID, st.Every, st.Last, st.Count)
	}
	return sb.String()
}

// mixChurn applies n random operations of every kind.
func mixChurn(t *testing.T, e *Engine, rng *rand.Rand, n int, ids *[]string) {
	t.Helper()
	queue := func() []byte { return []byte(fmt.Sprintf("m%d", rng.IntN(3))) }
	for i := range n {
		q := queue()
		var tk uint64
		var err error
		switch r := rng.IntN(33); {
		case r < 9:
			a := AddArgs{Queue: q, Payload: []byte(fmt.Sprint("p", i)), Delay: []int64{0, 0, 20, 300}[rng.IntN(4)],
				AckTimeout: []int64{0, 80, 100_000}[rng.IntN(3)], Retry: int64(rng.IntN(3)) - 1,
				Priority: uint8(rng.IntN(2) * rng.IntN(10))}
			if g := rng.IntN(4); g > 0 {
				a.Group = []byte(fmt.Sprint("g", g))
			}
			if rng.IntN(3) == 0 {
				// A small id space, so re-adds meet live jobs and tombstones.
				a.ID = []byte(fmt.Sprint("c", rng.IntN(40)))
				switch rng.IntN(3) {
				case 0:
					a.Unique = int64(50 + rng.IntN(5000))
				case 1:
					a.Debounce = int64(100 + rng.IntN(400))
				}
			}
			if rng.IntN(6) == 0 {
				a.DeadLetter = []byte("mdlq")
			}
			res, err := e.Add(a)
			if err != nil {
				t.Fatal(err)
			}
			if res.Added {
				*ids = append(*ids, string(res.ID))
			}
			tk = res.Ticket
		case r < 13:
			if d, ok := e.Pop([][]byte{q, queue()}); ok {
				tk = d.Ticket
				*ids = append(*ids, string(d.ID)) // a list-pushed job's id is first seen here
			}
		case r < 15:
			ds, w, err := e.MPopOrWait([][]byte{q}, 1+rng.IntN(4))
			if err != nil {
				t.Fatal(err)
			}
			if w != nil {
				if d, ok := e.CancelWait(w); ok {
					ds = append([]Delivery{d}, w.More()...)
				}
			}
			for _, d := range ds {
				tk = max(tk, d.Ticket)
			}
		case r < 16:
			if ds, ok := e.ListPop(q, 1, rng.IntN(2) == 0); ok {
				tk = ds[0].Ticket
			}
		case r < 21 && len(*ids) > 0:
			id := []byte((*ids)[rng.IntN(len(*ids))])
			switch rng.IntN(6) {
			case 0:
				_, tk, err = e.Ack(q, [][]byte{id})
			case 1:
				_, tk, err = e.NackReason(q, id, []int64{0, 70}[rng.IntN(2)], [][]byte{nil, []byte("boom " + string(id))}[rng.IntN(2)])
			case 2:
				_, tk, err = e.Cancel(q, [][]byte{id})
			case 3:
				_, tk, err = e.Reschedule(RescheduleArgs{Queue: q, ID: id, Delay: int64(rng.IntN(400))})
			case 4:
				_, tk, err = e.Promote(q, [][]byte{id})
			default:
				_, tk, err = e.Touch(q, id)
			}
		case r < 23:
			s := LimitSpec{}
			if rng.IntN(3) > 0 {
				s = LimitSpec{Concurrency: int64(rng.IntN(2) * (1 + rng.IntN(5))), GroupConcurrency: int64(rng.IntN(2) * (1 + rng.IntN(2)))}
				if rng.IntN(2) == 0 {
					s.Rate, s.Per = int64(1+rng.IntN(20)), int64(1+rng.IntN(100))
				}
			}
			tk, err = e.SetLimit(q, s)
		case r < 25:
			a := ScheduleArgs{Queue: q, Name: []byte(fmt.Sprint("s", rng.IntN(3))), Payload: []byte("tick"),
				AckTimeout: []int64{0, 90}[rng.IntN(2)], Retry: -1, Misfire: uint8(rng.IntN(3))}
			if rng.IntN(3) == 0 {
				a.Cron = "* * * * * *" // every second
			} else {
				a.Every = int64(40 + rng.IntN(200))
			}
			tk, err = e.Schedule(a)
		case r < 26:
			_, tk, err = e.Unschedule(q, []byte(fmt.Sprint("s", rng.IntN(3))))
		case r < 29:
			_, tk, err = e.Push(q, [][]byte{[]byte(fmt.Sprint("l", i)), []byte(fmt.Sprint("m", i))}, rng.IntN(2) == 0)
		default:
			sleep(time.Duration(rng.IntN(60)) * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := e.WaitDurable(tk); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMixRestartAndRewriteKeepEverything(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { mixRestarts(t, seed) })
	}
}

func mixRestarts(t *testing.T, seed uint64) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		rng := rand.New(rand.NewPCG(seed, 10))
		var ids []string
		e := mustNew(t, exact(fs, FsyncAlways))
		fired := false
		for round := range 8 {
			mixChurn(t, e, rng, 500, &ids)
			if round%2 == 1 {
				if err := e.Rewrite(); err != nil {
					t.Fatal(err)
				}
				waitRewrite(e)
			}
			checkIndex(t, e) // pushrun_test.go
			before := mixDump(e)
			fired = fired || strings.Contains(before, ":") && strings.Contains(before, "schedule ")
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			e = mustNew(t, exact(fs, FsyncAlways))
			after := mixDump(e)
			if testing.Verbose() {
				e.mu.Lock() // the timer goroutine may be firing a schedule
				n := e.njobs
				e.mu.Unlock()
				t.Logf("round %d: %d tombstones, %d schedules, %d jobs, %d bytes of state", round,
					strings.Count(after, "tomb "), strings.Count(after, "schedule "), n, len(after))
			}
			if after != before {
				e.Close()
				t.Fatalf("round %d: state after restart differs:\n%s", round, diffLines(strings.ReplaceAll(before, " ", "\n"), strings.ReplaceAll(after, " ", "\n")))
			}
		}
		e.Close()
		if !fired {
			t.Fatal("the churn made no schedule: the test checks nothing of them")
		}
	})
}

// The same mix on a leader: a follower applying its batches, and an engine
// restored from its snapshot, hold the same state, schedules and
// tombstones included (only the leader fires schedules).
func TestMixFollowersAndSnapshot(t *testing.T) {
	followersAgree(t, 21, mixChurn, mixDump, "schedule ", "tomb ")
}

// followersAgree runs churn on a leader of a two-node group, then checks
// that the follower fed its batches and an engine restored from its
// snapshot dump the same as the leader, and that a snapshot of the
// restored engine is the same bytes. want lists what the leader's dump must
// show, so the check cannot pass on a churn that made none of it.
func followersAgree(t *testing.T, seed uint64, churn func(*testing.T, *Engine, *rand.Rand, int, *[]string),
	dump func(*Engine) string, want ...string) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 2, Options{}, nil)
		ln, fn := g.nodes[0], g.nodes[1]
		ln.r.setAuto(true)
		rng := rand.New(rand.NewPCG(seed, seed+1))
		var ids []string
		churn(t, ln.e, rng, 3000, &ids)
		synctest.Wait()
		ln.r.mu.Lock()
		g.log = append(g.log, ln.r.log...) // auto: every batch committed
		ln.r.mu.Unlock()
		ln.applied = len(g.log)
		g.catchUp(fn)
		leader := dump(ln.e)
		for _, w := range want {
			if !strings.Contains(leader, w) {
				t.Fatalf("the churn left no %q:\n%s", w, leader)
			}
		}
		if got := dump(fn.e); got != leader {
			t.Fatalf("the follower differs:\n%s", diffLines(leader, got))
		}
		snap := ln.e.Snapshot()
		x := newEngine(t, Options{Replicator: &fakeRepl{closed: true}, Follower: true})
		if err := x.Restore(bytes.NewReader(snap)); err != nil {
			t.Fatal(err)
		}
		if got := dump(x); got != leader {
			t.Fatalf("the restored state differs:\n%s", diffLines(leader, got))
		}
		if again := x.Snapshot(); !bytes.Equal(again, snap) {
			t.Fatal("a snapshot of the restored engine differs")
		}
		for _, e := range []*Engine{ln.e, fn.e, x} {
			checkIndex(t, e) // pushrun_test.go
		}
	})
}
