package engine

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// jobsOf lists a queue's jobs as DELAY.GET shows them, by id.
func jobsOf(t *testing.T, e *Engine, q string) map[string]JobInfo {
	t.Helper()
	out := map[string]JobInfo{}
	for _, j := range scanAll(t, e, q, 100, func() {}) {
		out[string(j.ID)] = j.JobInfo
	}
	return out
}

// A queue moves whole: every job in its state with its times and
// deliveries, ready ones in order, its limit, pause and schedules; the
// target's log replays the unit to the same state, an import run again
// adds nothing, and the source keeps nothing of it.
func TestMigrateQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newEngine(t, Options{})
		dir := t.TempDir()
		dst := newEngine(t, Options{AppendOnly: true, Dir: dir, Fsync: FsyncNo})
		now := time.Now().UnixMilli()
		for i := range 5 {
			addOpts(t, src, AddArgs{Queue: b("q"), ID: b(fmt.Sprint("r", i)), Payload: b("p"), AckTimeout: 30000, Retry: -1})
		}
		addOpts(t, src, AddArgs{Queue: b("q"), ID: b("later"), Payload: b("l"), Delay: 60000, AckTimeout: 30000, Retry: -1})
		addOpts(t, src, AddArgs{Queue: b("q"), Payload: b("server id"), Delay: 5000, AckTimeout: 30000, Retry: -1})
		addOpts(t, src, AddArgs{Queue: b("other"), ID: b("o"), Payload: b("o"), AckTimeout: -1, Retry: -1})
		d := mustPop(t, src, "q") // r0, reserved until now + 30 s
		if string(d.ID) != "r0" {
			t.Fatalf("popped %s", d.ID)
		}
		if _, err := src.SetLimit(b("q"), LimitSpec{Concurrency: 10}); err != nil {
			t.Fatal(err)
		}
		if _, err := src.Schedule(ScheduleArgs{Queue: b("q"), Name: b("tick"), Every: 60000, Payload: b("t"), AckTimeout: -1, Retry: -1}); err != nil {
			t.Fatal(err)
		}
		want := jobsOf(t, src, "q")
		payload, n, ok := src.ExportQueue(b("q"))
		if !ok || n != 7 {
			t.Fatalf("export: %d jobs, ok %v", n, ok)
		}
		if _, _, ok := src.ExportQueue(b("none")); ok {
			t.Error("an empty queue exported something")
		}
		added, ticket, err := dst.ImportQueue(b("q"), payload)
		if err != nil || added != 7 || ticket == 0 {
			t.Fatalf("import: %d added, ticket %d, %v", added, ticket, err)
		}
		if err := dst.WaitDurable(ticket); err != nil {
			t.Fatal(err)
		}
		check := func(e *Engine, what string) {
			t.Helper()
			got := jobsOf(t, e, "q")
			if len(got) != len(want) {
				t.Fatalf("%s: %d jobs, want %d", what, len(got), len(want))
			}
			for id, w := range want {
				g := got[id]
				if g.State != w.State || g.Due != w.Due || g.Deliveries != w.Deliveries || g.AckDeadline != w.AckDeadline || string(g.Payload) != string(w.Payload) {
					t.Errorf("%s: job %s is %+v, was %+v", what, id, g, w)
				}
			}
			if l, ok := e.Limit(b("q")); !ok || l.Concurrency != 10 {
				t.Errorf("%s: limit %+v %v", what, l, ok)
			}
			if s := e.Schedules(b("q"), true); len(s) != 1 {
				t.Errorf("%s: %d schedules", what, len(s))
			}
			if got := jobsOf(t, e, "other"); len(got) != 0 {
				t.Errorf("%s: another queue came along: %v", what, got)
			}
		}
		check(dst, "the target")
		// Ready jobs keep their order: r1 .. r4 (r0 is reserved).
		for i := 1; i < 5; i++ {
			if d := mustPop(t, dst, "q"); string(d.ID) != fmt.Sprint("r", i) {
				t.Fatalf("pop %d at the target: %s", i, d.ID)
			}
		}
		// Again: nothing added twice.
		if added, _, err := dst.ImportQueue(b("q"), payload); err != nil || added != 0 {
			t.Errorf("the import run again added %d: %v", added, err)
		}
		if _, _, err := dst.ImportQueue(b("q"), []byte{9, 1, 2}); err != ErrBadMigration {
			t.Errorf("a bad payload: %v", err)
		}
		if _, _, err := dst.ImportQueue(b("other"), payload); err != ErrBadMigration {
			t.Errorf("another queue's payload: %v", err)
		}
		full := newEngine(t, Options{MaxJobs: 6})
		if _, _, err := full.ImportQueue(b("q"), payload); err != ErrMaxJobs || len(jobsOf(t, full, "q")) != 0 {
			t.Errorf("an import past max-jobs: %v", err)
		}

		// The source drops it all, the other queue stays.
		ticket, err = src.DropQueue(b("q"))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, ok := src.ExportQueue(b("q")); ok {
			t.Error("the source still holds the queue")
		}
		if len(jobsOf(t, src, "other")) != 1 {
			t.Error("the source lost another queue")
		}

		// The target's log replays the unit to what it was; r0's
		// reservation ends at its deadline there, as at the source.
		want = jobsOf(t, dst, "q")
		dst.Close()
		dst2 := newEngine(t, Options{AppendOnly: true, Dir: dir, Fsync: FsyncNo})
		check(dst2, "the target replayed")
		if j, ok := dst2.Get(b("q"), b("r0")); !ok || j.AckDeadline != now+30000 {
			t.Errorf("r0 at the target: %+v", j)
		}
		sleep(31 * time.Second)
		if j, _ := dst2.Get(b("q"), b("r0")); j.State != "ready" {
			t.Errorf("r0 after its deadline: %+v", j)
		}
	})
}

// A client blocked on a queue that is exported is released without a job,
// and the job that falls due after the export is not handed to it: the
// target has it.
func TestExportReleasesWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		addOpts(t, e, AddArgs{Queue: b("q"), ID: b("soon"), Payload: b("p"), Delay: 1000, AckTimeout: 30000, Retry: -1})
		_, w, err := e.PopOrWait([][]byte{b("q")}, PopDelay)
		if err != nil || w == nil {
			t.Fatalf("no waiter: %v", err)
		}
		if _, n, ok := e.ExportQueue(b("q")); !ok || n != 1 {
			t.Fatalf("export: %d %v", n, ok)
		}
		select {
		case <-w.Ready():
		default:
			t.Fatal("the waiter was not released")
		}
		if _, got := w.Result(); got {
			t.Fatal("the waiter got a job")
		}
		sleep(2 * time.Second)
		if j, ok := e.Get(b("q"), b("soon")); !ok || j.State != "ready" {
			t.Errorf("the job after its due time: %+v %v", j, ok)
		}
	})
}
