package engine

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/record"
	"github.com/delayd/delayd/schedule"
)

// Schedules run in the synctest bubble too: the fake clock starts at
// 2000-01-01 00:00 UTC and jumps from timer to timer, so a year of hourly
// firings takes a few seconds.

func schedMust(t *testing.T, e *Engine, a ScheduleArgs) {
	t.Helper()
	if a.AckTimeout == 0 {
		a.AckTimeout = -1
	}
	if a.Retry == 0 {
		a.Retry = -1
	}
	ticket, err := e.Schedule(a)
	if err != nil {
		t.Fatalf("schedule %+v: %v", a, err)
	}
	if err := e.WaitDurable(ticket); err != nil {
		t.Fatal(err)
	}
}

// schedInfo returns the one schedule named name of queue q.
func schedInfo(t *testing.T, e *Engine, q, name string) ScheduleInfo {
	t.Helper()
	for _, s := range e.Schedules(b(q), false) {
		if string(s.Name) == name {
			return s
		}
	}
	t.Fatalf("no schedule %s of %s", name, q)
	return ScheduleInfo{}
}

// schedDrainIDs pops every ready job of q and returns their ids; each must
// be due by now.
func schedDrainIDs(t *testing.T, e *Engine, q string) []string {
	t.Helper()
	var ids []string
	for {
		d, ok := e.Pop([][]byte{b(q)})
		if !ok {
			return ids
		}
		j := string(d.ID)
		if at, err := strconv.ParseInt(j[strings.LastIndexByte(j, ':')+1:], 10, 64); err != nil || at > e.Now() {
			t.Fatalf("job %s handed out at %d: before its fire time", j, e.Now())
		}
		ids = append(ids, j)
	}
}

// schedIDs is name:t for t = from, from+step, ... (n of them).
func schedIDs(name string, from, step int64, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s:%d", name, from+int64(i)*step))
	}
	return out
}

// schedClose makes everything logged durable and closes e.
func schedClose(t *testing.T, e *Engine) {
	t.Helper()
	synctest.Wait()
	e.mu.Lock()
	ticket := e.journal.Ticket()
	e.mu.Unlock()
	if err := e.WaitDurable(ticket); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestScheduleHourlyForAYearAcrossRestarts: an hourly schedule runs for 365
// days on an engine stopped and started again on the same log (and the log
// rewritten once); MISFIRE all makes up the hours it was down. Exactly 8760
// jobs come out, one per hour, ids name:<each hour>, none before its time.
func TestScheduleHourlyForAYearAcrossRestarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, logged(fs, FsyncAlways))
		start := e.Now()
		if start%3_600_000 != 0 {
			t.Fatalf("the fake clock starts at %d, not on an hour", start)
		}
		schedMust(t, e, ScheduleArgs{Queue: b("q"), Name: b("hourly"), Cron: "0 * * * *", Payload: b("tick"), Misfire: MisfireAll})
		end := start + 365*24*3_600_000
		var ids []string
		// Up for a while, down for a while: restarts land between
		// firings, on them, and the downtimes cover several hours.
		segments := []struct{ up, down time.Duration }{
			{40 * 24 * time.Hour, 5*time.Hour + 30*time.Minute},
			{24*time.Hour + 30*time.Minute, time.Hour},
			{90 * 24 * time.Hour, 0},
			{17 * time.Hour, 3 * 24 * time.Hour},
			{100 * 24 * time.Hour, 30 * time.Minute},
		}
		for i, seg := range segments {
			sleep(seg.up)
			ids = append(ids, schedDrainIDs(t, e, "q")...)
			if i == 2 {
				if err := e.Rewrite(); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
			}
			schedClose(t, e)
			sleep(seg.down)
			e = mustNew(t, logged(fs, FsyncAlways))
		}
		sleep(time.Duration(end-e.Now()) * time.Millisecond)
		ids = append(ids, schedDrainIDs(t, e, "q")...)
		want := schedIDs("hourly", start+3_600_000, 3_600_000, 8760)
		if len(ids) != 8760 || !slices.Equal(ids, want) {
			t.Fatalf("%d jobs; first difference at %d", len(ids), firstDiff(ids, want))
		}
		s := schedInfo(t, e, "q", "hourly")
		if s.Fired != 8760 || s.Last != end || s.Next != end+3_600_000 {
			t.Fatalf("listed %+v, want fired 8760, last %d, next %d", s, end, end+3_600_000)
		}
		schedClose(t, e)
	})
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestScheduleMisfire: EVERY 1000 fires three times, the engine is down for
// 10 s (ten firings missed), and each policy does what it says at start.
func TestScheduleMisfire(t *testing.T) {
	for _, tc := range []struct {
		policy uint8
		missed []int64 // catch-up firings at start, in s after the anchor
	}{
		{MisfireSkip, nil},
		{MisfireOnce, []int64{13}},
		{MisfireAll, []int64{4, 5, 6, 7, 8, 9, 10, 11, 12, 13}},
	} {
		t.Run(schedule.MisfireName(tc.policy), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fs := aof.NewMemFS()
				e := mustNew(t, logged(fs, FsyncAlways))
				s0 := e.Now()
				schedMust(t, e, ScheduleArgs{Queue: b("q"), Name: b("s"), Every: 1000, Payload: b("p"), Misfire: tc.policy})
				sleep(3500 * time.Millisecond)
				if got := schedDrainIDs(t, e, "q"); !slices.Equal(got, schedIDs("s", s0+1000, 1000, 3)) {
					t.Fatalf("before the stop: %v", got)
				}
				schedClose(t, e)
				sleep(10 * time.Second)
				e = mustNew(t, logged(fs, FsyncAlways))
				defer e.Close()
				var want []string
				for _, k := range tc.missed {
					want = append(want, fmt.Sprintf("s:%d", s0+k*1000))
				}
				if got := schedDrainIDs(t, e, "q"); !slices.Equal(got, want) {
					t.Fatalf("at start: %v, want %v", got, want)
				}
				info := schedInfo(t, e, "q", "s")
				if info.Next != s0+14_000 || info.Fired != uint64(3+len(tc.missed)) {
					t.Fatalf("listed %+v", info)
				}
				sleep(499 * time.Millisecond)
				if got := schedDrainIDs(t, e, "q"); len(got) != 0 {
					t.Fatalf("early: %v", got)
				}
				sleep(time.Millisecond)
				if got := schedDrainIDs(t, e, "q"); !slices.Equal(got, []string{fmt.Sprintf("s:%d", s0+14_000)}) {
					t.Fatalf("the first firing after start: %v", got)
				}
			})
		})
	}
}

// TestScheduleMisfireAllIsBounded: MISFIRE all makes up at most 1000
// firings; the rest are skipped and the schedule goes on from now.
func TestScheduleMisfireAllIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, logged(fs, FsyncAlways))
		s0 := e.Now()
		schedMust(t, e, ScheduleArgs{Queue: b("q"), Name: b("s"), Every: 10, Payload: b("p"), Misfire: MisfireAll})
		schedClose(t, e)
		sleep(time.Minute)
		e = mustNew(t, logged(fs, FsyncAlways))
		defer e.Close()
		// The first 1000 missed, then the one due right now (on time).
		got := schedDrainIDs(t, e, "q")
		if !slices.Equal(got, append(schedIDs("s", s0+10, 10, 1000), fmt.Sprintf("s:%d", e.Now()))) {
			t.Fatalf("%d firings at start, want the first 1000 missed and the one due now", len(got))
		}
		if info := schedInfo(t, e, "q", "s"); info.Next != e.Now()+10 || info.Fired != 1001 {
			t.Fatalf("listed %+v at %d", info, e.Now())
		}
	})
}

// TestScheduleNeverEarly: each firing is handed out at its time, not a
// millisecond before, with a 1 ms tick and a 10 ms one; a cron schedule
// with a seconds field and EVERY with sub-second periods alike.
func TestScheduleNeverEarly(t *testing.T) {
	for _, tick := range []int64{1, 10} {
		t.Run(fmt.Sprint("tick ", tick), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEngine(t, Options{Tick: tick})
				s0 := e.Now()
				schedMust(t, e, ScheduleArgs{Queue: b("a"), Name: b("every"), Cron: "@every 1500ms", Payload: b("x")})
				schedMust(t, e, ScheduleArgs{Queue: b("b"), Name: b("cron"), Cron: "*/2 * * * * *", Payload: b("y")})
				schedMust(t, e, ScheduleArgs{Queue: b("c"), Name: b("odd"), Every: 333, Payload: b("z")})
				due := map[string][]int64{}
				for k := int64(1); k <= 8; k++ {
					due["a"] = append(due["a"], s0+1500*k)
					due["b"] = append(due["b"], s0+2000*k)
					due["c"] = append(due["c"], s0+333*k)
				}
				// Walk the fake clock to a millisecond before each fire time,
				// then to it.
				var all []int64
				for _, ts := range due {
					all = append(all, ts...)
				}
				slices.Sort(all)
				all = slices.Compact(all)
				for _, at := range all {
					sleep(time.Duration(at-1-e.Now()) * time.Millisecond)
					for q, ts := range due {
						if slices.Contains(ts, at) && e.Len(b(q)) != 0 {
							t.Fatalf("%s: a job a millisecond before %d", q, at)
						}
					}
					sleep(time.Duration(at+tick-1-e.Now()) * time.Millisecond) // within a tick
					for q, ts := range due {
						if !slices.Contains(ts, at) {
							continue
						}
						d, ok := e.Pop([][]byte{b(q)})
						if !ok || !strings.HasSuffix(string(d.ID), ":"+strconv.FormatInt(at, 10)) {
							t.Fatalf("%s at %d (+%d): %q %v", q, at, e.Now()-at, d.ID, ok)
						}
					}
				}
			})
		})
	}
}

// TestScheduleUpsertAndUnschedule: an upsert replaces payload and options
// and keeps the count; the same spec keeps EVERY's phase, a new one starts
// from now; UNSCHEDULE stops it, and answers 0 the second time.
func TestScheduleUpsertAndUnschedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		s0 := e.Now()
		schedMust(t, e, ScheduleArgs{Queue: b("q"), Name: b("s"), Every: 1000, Payload: b("v1")})
		sleep(2500 * time.Millisecond)
		schedMust(t, e, ScheduleArgs{Queue: b("q"), Name: b("s"), Every: 1000, Payload: b("v2"), AckTimeout: 5000})
		sleep(1000 * time.Millisecond)
		d := mustPop(t, e, "q")
		d2 := mustPop(t, e, "q")
		d3 := mustPop(t, e, "q")
		if string(d.Payload) != "v1" || string(d2.Payload) != "v1" || string(d3.Payload) != "v2" || !d3.Reserved ||
			string(d3.ID) != fmt.Sprintf("s:%d", s0+3000) {
			t.Fatalf("after the upsert: %+v %+v %+v", d, d2, d3)
		}
		e.Ack(b("q"), [][]byte{d3.ID})
		if info := schedInfo(t, e, "q", "s"); info.Fired != 3 || info.Last != s0+3000 || info.Next != s0+4000 {
			t.Fatalf("listed %+v", info)
		}
		// A new period starts counting from the upsert (at s0+3700).
		sleep(200 * time.Millisecond)
		schedMust(t, e, ScheduleArgs{Queue: b("q"), Name: b("s"), Every: 700, Payload: b("v3")})
		if info := schedInfo(t, e, "q", "s"); info.Next != s0+3700+700 || info.Spec != "EVERY 700" || info.Fired != 3 {
			t.Fatalf("listed after a new spec: %+v", info)
		}
		sleep(700 * time.Millisecond)
		if d := mustPop(t, e, "q"); string(d.ID) != fmt.Sprintf("s:%d", s0+4400) || string(d.Payload) != "v3" {
			t.Fatalf("after the new spec: %+v", d)
		}
		ok, _, err := e.Unschedule(b("q"), b("s"))
		if !ok || err != nil {
			t.Fatalf("unschedule: %v %v", ok, err)
		}
		if ok, _, _ := e.Unschedule(b("q"), b("s")); ok {
			t.Fatal("a second unschedule found it")
		}
		sleep(10 * time.Second)
		if n := e.Len(b("q")); n != 0 {
			t.Fatalf("%d jobs after UNSCHEDULE", n)
		}
		if got := e.Schedules(nil, true); len(got) != 0 {
			t.Fatalf("listed after UNSCHEDULE: %+v", got)
		}
	})
}

// TestScheduleStartEnd: START and END bound the firings; past END the
// schedule stays listed with no next fire time.
func TestScheduleStartEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		s0 := e.Now()
		schedMust(t, e, ScheduleArgs{Queue: b("q"), Name: b("s"), Every: 1000, Payload: b("p"), Start: s0 + 5000, End: s0 + 8000})
		schedMust(t, e, ScheduleArgs{Queue: b("c"), Name: b("c"), Cron: "* * * * * *", Payload: b("p"), Start: s0 + 2500, End: s0 + 4000})
		if info := schedInfo(t, e, "q", "s"); info.Next != s0+5000 || info.Last != -1 || info.Fired != 0 {
			t.Fatalf("listed %+v", info)
		}
		sleep(20 * time.Second)
		if got := schedDrainIDs(t, e, "q"); !slices.Equal(got, schedIDs("s", s0+5000, 1000, 4)) {
			t.Fatalf("EVERY within START..END: %v", got)
		}
		if got := schedDrainIDs(t, e, "c"); !slices.Equal(got, schedIDs("c", s0+3000, 1000, 2)) {
			t.Fatalf("cron within START..END: %v", got)
		}
		if info := schedInfo(t, e, "q", "s"); info.Next != -1 || info.Fired != 4 || info.Last != s0+8000 || info.Start != s0+5000 || info.End != s0+8000 {
			t.Fatalf("listed past END: %+v", info)
		}
		if _, err := e.Schedule(ScheduleArgs{Queue: b("q"), Name: b("x"), Every: 10, Start: 100, End: 50}); err == nil {
			t.Fatal("END before START accepted")
		}
		if _, err := e.Schedule(ScheduleArgs{Queue: b("q"), Name: b("x"), Cron: "0 0 30 2 *"}); err == nil {
			t.Fatal("30 February accepted")
		}
		if _, err := e.Schedule(ScheduleArgs{Queue: b("q"), Name: b("x"), Cron: "0 * * * *", Zone: "Nowhere/Never"}); err == nil ||
			!strings.Contains(err.Error(), "unknown time zone") {
			t.Fatalf("a bad zone: %v", err)
		}
	})
}

// TestScheduleReplayAndRewriteKeepState: after a restart, and after a
// rewrite and a restart, the schedules, their last fire times and counts,
// and the jobs they made are what they were, and firing goes on without a
// repeat or a gap; the rewritten log holds no fire record.
func TestScheduleReplayAndRewriteKeepState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, logged(fs, FsyncAlways))
		s0 := e.Now()
		schedMust(t, e, ScheduleArgs{Queue: b("q"), Name: b("a"), Every: 1000, Payload: b("pa"), AckTimeout: 60_000, Retry: 2, DeadLetter: b("dlq"), Misfire: MisfireAll})
		schedMust(t, e, ScheduleArgs{Queue: b("q"), Name: b("b"), Cron: "*/3 * * * * *", Zone: "Europe/Berlin", Payload: b("pb"), Misfire: MisfireOnce, End: s0 + 3_600_000})
		schedMust(t, e, ScheduleArgs{Queue: b("r"), Name: b("c"), Every: 2500, Payload: b("pc"), Start: s0 + 1234})
		sleep(10 * time.Second)
		mustPop(t, e, "q") // one reserved, the rest ready
		before, listed := dump(e), e.Schedules(nil, true)

		check := func(when string) {
			t.Helper()
			if got := dump(e); got != before {
				t.Fatalf("%s: jobs differ:\n%s", when, diffLines(before, got))
			}
			if got := e.Schedules(nil, true); fmt.Sprint(got) != fmt.Sprint(listed) {
				t.Fatalf("%s: schedules\n got %+v\nwant %+v", when, got, listed)
			}
		}
		schedClose(t, e)
		e = mustNew(t, logged(fs, FsyncAlways))
		check("after a restart")
		if err := e.Rewrite(); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		schedClose(t, e)
		if n := countOps(t, fs, record.Fire); n != 0 {
			t.Fatalf("the rewritten log holds %d fire records", n)
		}
		e = mustNew(t, logged(fs, FsyncAlways))
		check("after a rewrite and a restart")
		sleep(5 * time.Second)
		ids := append(schedDrainIDs(t, e, "q"), schedDrainIDs(t, e, "r")...)
		want := schedIDs("a", s0+2000, 1000, 14) // a:s0+1000 is reserved
		want = append(want, schedIDs("b", s0+3000, 3000, 5)...)
		want = append(want, schedIDs("c", s0+1234, 2500, 6)...)
		slices.Sort(ids)
		slices.Sort(want)
		if !slices.Equal(ids, want) {
			t.Fatalf("jobs after 15 s:\n got %v\nwant %v", ids, want)
		}
		if info := schedInfo(t, e, "q", "a"); info.Fired != 15 || info.Last != s0+15_000 {
			t.Fatalf("a after 15 s: %+v", info)
		}
		if info := schedInfo(t, e, "r", "c"); info.Fired != 6 || info.Last != s0+1234+5*2500 {
			t.Fatalf("c after 15 s: %+v", info)
		}
		if info := schedInfo(t, e, "q", "b"); info.Fired != 5 || info.Last != s0+15_000 {
			t.Fatalf("b after 15 s: %+v", info)
		}
		schedClose(t, e)
	})
}

// countOps counts the records of op in the log.
func countOps(t *testing.T, fs aof.FS, op byte) int {
	t.Helper()
	n := 0
	for _, path := range logSegs(fs) {
		_, err := aof.Replay(fs, path, func(p []byte) error {
			if len(p) > 0 && p[0] == op {
				n++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// TestScheduleFireRecordAppliedTwiceFiresOnce: a fire record applied again
// (as a rewrite's tail over its snapshot may) makes no second job and does
// not count twice; one whose job id is already taken does not replace it.
func TestScheduleFireRecordAppliedTwiceFiresOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		s0 := e.Now()
		schedMust(t, e, ScheduleArgs{Queue: b("q"), Name: b("s"), Every: 1000, Payload: b("p")})
		addAt(t, e, "q", s0, fmt.Sprintf("s:%d", s0+2000), "mine") // someone took the id of the second firing
		sleep(1000 * time.Millisecond)
		fire := record.Rec{Op: record.Fire, Time: s0 + 1000, Queue: b("q"), ID: b("s"), Due: s0 + 1000, Seq: 999}
		e.mu.Lock()
		if err := e.apply(fire.Encode(nil)); err != nil {
			t.Fatal(err)
		}
		e.mu.Unlock()
		sleep(1000 * time.Millisecond)
		if got := drain(e, "q"); !slices.Equal(got, []string{"mine", "p"}) {
			t.Fatalf("jobs: %v, want [mine p]", got)
		}
		if info := schedInfo(t, e, "q", "s"); info.Fired != 2 || info.Last != s0+2000 {
			t.Fatalf("listed %+v", info)
		}
	})
}

// TestScheduleFlushAndDel: FLUSHALL removes schedules (they are the
// database's state); DEL of the queue removes its jobs, not its schedules.
func TestScheduleFlushAndDel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, logged(fs, FsyncAlways))
		schedMust(t, e, ScheduleArgs{Queue: b("q"), Name: b("s"), Every: 1000, Payload: b("p")})
		sleep(2 * time.Second)
		if _, _, err := e.Del([][]byte{b("q")}); err != nil {
			t.Fatal(err)
		}
		sleep(time.Second)
		if n := e.Len(b("q")); n != 1 {
			t.Fatalf("after DEL the schedule goes on: %d jobs, want 1", n)
		}
		if _, err := e.Flush(); err != nil {
			t.Fatal(err)
		}
		if got := e.Schedules(nil, true); len(got) != 0 {
			t.Fatalf("after FLUSHALL: %+v", got)
		}
		sleep(5 * time.Second)
		if n := e.Len(b("q")); n != 0 {
			t.Fatalf("after FLUSHALL: %d jobs", n)
		}
		// A schedule made after the flush fires, and a restart agrees.
		schedMust(t, e, ScheduleArgs{Queue: b("q"), Name: b("t"), Every: 1000, Payload: b("p")})
		sleep(time.Second)
		if n := e.Len(b("q")); n != 1 {
			t.Fatalf("a schedule made after FLUSHALL: %d jobs", n)
		}
		schedClose(t, e)
		e = mustNew(t, logged(fs, FsyncAlways))
		defer e.Close()
		if got := e.Schedules(nil, true); len(got) != 1 || string(got[0].Name) != "t" || got[0].Fired != 1 {
			t.Fatalf("after a restart: %+v", got)
		}
	})
}

// TestScheduleInTransaction: DELAY.SCHEDULE and DELAY.UNSCHEDULE inside one
// transaction are one unit of the log, and time stands still inside it.
func TestScheduleInTransaction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, logged(fs, FsyncAlways))
		s0 := e.Now()
		ticket, err := e.Atomic(func(tx *Engine) {
			for _, n := range []string{"a", "b", "c"} {
				if _, err := tx.Schedule(ScheduleArgs{Queue: b("q"), Name: b(n), Every: 500, Payload: b(n), AckTimeout: -1, Retry: -1}); err != nil {
					t.Error(err)
				}
			}
			if ok, _, err := tx.Unschedule(b("q"), b("b")); !ok || err != nil {
				t.Error("unschedule inside the transaction", ok, err)
			}
		})
		if err != nil || ticket == 0 {
			t.Fatal(ticket, err)
		}
		e.WaitDurable(ticket)
		sleep(500 * time.Millisecond)
		if got := drain(e, "q"); !slices.Equal(got, []string{"a", "c"}) {
			t.Fatalf("first firings: %v", got)
		}
		schedClose(t, e)
		e = mustNew(t, logged(fs, FsyncAlways))
		defer e.Close()
		got := e.Schedules(b("q"), false)
		if len(got) != 2 || string(got[0].Name) != "a" || string(got[1].Name) != "c" || got[0].Last != s0+500 {
			t.Fatalf("after a restart: %+v", got)
		}
	})
}

// TestScheduleReplicated: the leader fires and the followers apply its fire
// records (their own clocks fire nothing); after a failover the new leader
// makes up the firings due while nobody led (MISFIRE all), with ids that
// continue the old leader's, and the old leader, following, fires nothing.
func TestScheduleReplicated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 2, Options{}, nil)
		ln, fn := g.nodes[0], g.nodes[1]
		L, F := ln.e, fn.e
		s0 := L.Now()
		if _, err := F.Schedule(ScheduleArgs{Queue: b("q"), Name: b("s"), Every: 1000, Payload: b("p")}); err != ErrNotLeader {
			t.Fatalf("a follower took a schedule: %v", err)
		}
		if _, err := L.Schedule(ScheduleArgs{Queue: b("q"), Name: b("s"), Every: 1000, Payload: b("p"), Misfire: MisfireAll, AckTimeout: -1, Retry: -1}); err != nil {
			t.Fatal(err)
		}
		g.sync(ln)
		sleep(3 * time.Second)
		g.sync(ln) // the followers hold the three jobs too
		if info := schedInfo(t, F, "q", "s"); info.Fired != 3 || info.Last != s0+3000 {
			t.Fatalf("follower lists %+v", info)
		}
		L.Follow()
		sleep(5 * time.Second)
		if n := F.Len(b("q")); n != 3 {
			t.Fatalf("the follower fired on its own: %d jobs", n)
		}
		F.Lead()
		sleep(500 * time.Millisecond)
		got := schedDrainIDs(t, F, "q")
		if want := schedIDs("s", s0+1000, 1000, 8); !slices.Equal(got, want) {
			t.Fatalf("after the failover:\n got %v\nwant %v", got, want)
		}
		if info := schedInfo(t, F, "q", "s"); info.Fired != 8 || info.Next != s0+9000 {
			t.Fatalf("new leader lists %+v", info)
		}
		fn.applied = len(g.log)
		sleep(2 * time.Second)
		if n := L.Len(b("q")); n != 3 {
			t.Fatalf("the old leader fired while following: %d jobs", n)
		}
	})
}

// TestScheduleChangeIsAWatchedChange: DELAY.SCHEDULE and DELAY.UNSCHEDULE
// change the watched version of their queue's name, job or no job.
func TestScheduleChangeIsAWatchedChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		v := e.Watch(b("q"))
		schedMust(t, e, ScheduleArgs{Queue: b("q"), Name: b("s"), Every: 60_000, Payload: b("p")})
		if e.Version(b("q")) == v {
			t.Fatal("DELAY.SCHEDULE left the watched version")
		}
		v = e.Version(b("q"))
		e.Unschedule(b("q"), b("s"))
		if e.Version(b("q")) == v {
			t.Fatal("DELAY.UNSCHEDULE left the watched version")
		}
		e.Unwatch(b("q"))
	})
}

// TestScheduleFiringUndoneByAFailedWriteIsMadeAgain: a firing whose log
// write failed is undone with the rest of the batch; the reload that
// follows arms the schedule again, which makes it again, so it is neither
// lost nor doubled. (Here the reload happens in the firing's millisecond;
// a later one would catch up every firing it dropped, whatever the MISFIRE
// policy: armSchedules(true).)
func TestScheduleFiringUndoneByAFailedWriteIsMadeAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, logged(fs, FsyncEverySec))
		defer e.Close()
		s0 := e.Now()
		schedMust(t, e, ScheduleArgs{Queue: b("q"), Name: b("s"), Every: 1000, Payload: b("p"), Misfire: MisfireSkip})
		fs.Inject(aof.Fault{Op: aof.OpWrite, Path: seg1}) // the first firing's write fails
		sleep(1000 * time.Millisecond)
		sleep(500 * time.Millisecond)
		if got := schedDrainIDs(t, e, "q"); !slices.Equal(got, schedIDs("s", s0+1000, 1000, 1)) {
			t.Fatalf("after the failed write: %v", got)
		}
		if info := schedInfo(t, e, "q", "s"); info.Fired != 1 || info.Next != s0+2000 {
			t.Fatalf("listed %+v", info)
		}
		sleep(time.Second)
		if got := schedDrainIDs(t, e, "q"); !slices.Equal(got, schedIDs("s", s0+2000, 1000, 1)) {
			t.Fatalf("the next firing: %v", got)
		}
	})
}
