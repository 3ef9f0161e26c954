package engine

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/bucket"
	"github.com/delayd/delayd/finetimer"
	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/record"
)

// farBuckets is horizoned (a minute) with the far-future buckets on.
func farBuckets(fs aof.FS) Options {
	o := horizoned(fs, FsyncAlways)
	o.FarBuckets = true
	return o
}

// delayedView renders every queue's delayed jobs, in memory or in the
// buckets, in (due, add order), with their ids, payloads and dues, and its
// counts: what must not change when jobs go out to disk and come back.
func delayedView(t *testing.T, e *Engine) string {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	type job struct {
		due  int64
		seq  uint64
		id   string
		data string
	}
	var names []string
	for name := range e.byName {
		names = append(names, name)
	}
	slices.Sort(names)
	var sb strings.Builder
	var buf [jobs.SIDLen]byte
	fmt.Fprintf(&sb, "jobs %d\n", e.njobs)
	for _, name := range names {
		qi := e.byName[name]
		var js []job
		for i := range e.jobs.Len() {
			if j := e.jobs.At(i); j.State == jobs.StateDelayed && j.Queue == qi {
				js = append(js, job{j.Due, j.Seq, string(e.jobs.ID(j, &buf)), string(e.jobs.Payload(j))})
			}
		}
		if e.far.set != nil {
			fs, err := e.far.set.Earliest(name, math.MinInt64, 0, math.MaxInt32)
			if err != nil {
				t.Fatal(err)
			}
			for i := range fs {
				var r record.Rec
				if err := farRec(&r, &fs[i], 0); err != nil {
					t.Fatal(err)
				}
				js = append(js, job{fs[i].Due, fs[i].Seq, string(farID(&r)), string(fs[i].Payload)})
			}
		}
		slices.SortFunc(js, func(a, b job) int { return cmp.Or(cmp.Compare(a.due, b.due), cmp.Compare(a.seq, b.seq)) })
		q := &e.queues[qi]
		fmt.Fprintf(&sb, "%s delayed %d ready %d:", name, q.Delayed, q.Ready)
		for _, j := range js {
			fmt.Fprintf(&sb, " %s=%s@%d", j.id, strings.TrimSpace(j.data), j.due)
		}
		sb.WriteString("\n")
	}
	return sb.String()
}

// inMemory is the jobs in the slab.
func inMemory(e *Engine) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for i := range e.jobs.Len() {
		if e.jobs.At(i).State != jobs.StateFree {
			n++
		}
	}
	return n
}

func farLen(e *Engine) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.far.set.Len()
}

// Jobs due beyond the horizon leave memory for the buckets and keep their
// counts; cancel, reschedule and REPLACE find them by id on disk; a
// checkpoint and a restart (replay over it) keep every one; they come back
// ahead of their time and are handed out never early, in (due, add order);
// DEL and FLUSHALL drop them, for good.
func TestFarBuckets(t *testing.T) {
	t.Run("server ids", func(t *testing.T) { testFarBuckets(t, false) })
	t.Run("client ids", func(t *testing.T) { testFarBuckets(t, true) })
	t.Run("options", func(t *testing.T) { testFarBuckets(t, withOptions) })
}

// testFarBuckets runs with server ids (false), client ids (true) or the
// options an add sets (a func(*AddArgs, int)).
func testFarBuckets(t *testing.T, mode any) {
	ids := mode != false
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, farBuckets(fs))
		var far []string
		if opt, ok := mode.(func(*AddArgs, int)); ok {
			far = addFarWith(t, e, 60, 200, opt)
		} else {
			far = addFarIDs(t, e, 60, 200, ids)
		}
		// Ten more far jobs of q0 due in the same millisecond: their add
		// order must hold.
		same := e.Now() + 900_000
		for i := range 10 {
			a := AddArgs{Queue: b("q0"), At: true, Due: same, Payload: []byte(fmt.Sprint("same", i))}
			if ids {
				a.ID = []byte(fmt.Sprint("same-", i))
			}
			res, err := e.Add(a)
			if err != nil || e.WaitDurable(res.Ticket) != nil {
				t.Fatal(err)
			}
		}
		before := delayedView(t, e)
		settleSpill()
		if n := farLen(e); n != 70 {
			t.Fatalf("%d jobs in the buckets after a spill round, want 70", n)
		}
		if n := inMemory(e); n != 60 {
			t.Fatalf("%d jobs in memory, want the 60 near ones", n)
		}
		if after := delayedView(t, e); after != before {
			t.Fatalf("jobs out on disk read differently\n%s", diffLines(before, after))
		}
		id := func(i int) (q, id []byte) {
			qs, ids, _ := strings.Cut(far[i], "/")
			return b(qs), b(ids)
		}
		// By id on disk: a cancel, reschedules (beyond the horizon and
		// near), a REPLACE.
		if q, x := id(0); true {
			if n, _, err := e.Cancel(q, [][]byte{x}); n != 1 || err != nil {
				t.Fatalf("cancel of a far job: %d %v", n, err)
			}
		}
		if q, x := id(1); true {
			if ok, _, err := e.Reschedule(RescheduleArgs{Queue: q, ID: x, Delay: 700_000}); !ok || err != nil {
				t.Fatalf("reschedule of a far job: %v %v", ok, err)
			}
		}
		if q, x := id(2); true {
			if ok, _, err := e.Reschedule(RescheduleArgs{Queue: q, ID: x, Delay: 10_000}); !ok || err != nil {
				t.Fatalf("reschedule of a far job near: %v %v", ok, err)
			}
		}
		if q, x := id(3); true {
			res, err := e.Add(AddArgs{Queue: q, ID: x, Replace: true, Delay: 800_000, Payload: b("replaced")})
			if err != nil || !res.Added {
				t.Fatalf("REPLACE of a far job: %+v %v", res, err)
			}
			if res, _ := e.Add(AddArgs{Queue: q, ID: x, Delay: 5, Payload: b("not")}); res.Added {
				t.Fatal("an add of a far job's id without REPLACE added")
			}
		}
		if farLen(e) != 66 {
			t.Fatalf("%d in the buckets after 4 operations by id, want 66", farLen(e))
		}
		settleSpill() // the rescheduled and replaced jobs go out again
		if err := e.checkpoint(0, nil); err != nil {
			t.Fatal(err)
		}
		// After the checkpoint, a cancel of a job its runs hold: replay
		// must apply it over them.
		if q, x := id(4); true {
			if n, _, _ := e.Cancel(q, [][]byte{x}); n != 1 {
				t.Fatal("cancel of a far job in a run")
			}
		}
		before = delayedView(t, e)
		e.Close()
		e = mustNew(t, farBuckets(fs))
		if after := delayedView(t, e); after != before {
			t.Fatalf("after a restart over a checkpoint\n%s", diffLines(before, after))
		}
		if n := farLen(e); n == 0 {
			t.Fatal("a restart over a checkpoint brought every far job into memory")
		}
		// Near jobs fire; the far ones come back ahead of their time and
		// none is handed out early.
		time.Sleep(15 * time.Second)
		n := 0
		for {
			if _, ok := e.Pop([][]byte{b("q0"), b("q1"), b("q2")}); !ok {
				break
			}
			n++
		}
		if n != 61 {
			t.Fatalf("%d near jobs, want 61 (60 and one rescheduled near)", n)
		}
		time.Sleep(600_000*time.Millisecond - 15*time.Second - 20*time.Second)
		synctest.Wait()
		if d, ok := e.Pop([][]byte{b("q0"), b("q1"), b("q2")}); ok {
			t.Fatalf("a job handed out 20 s early: %s due %d at %d", d.ID, d.Due, e.Now())
		}
		// DEL of a queue with far jobs still out (the ten due together
		// and the rescheduled and replaced ones).
		if farLen(e) == 0 {
			t.Fatal("nothing left in the buckets to DEL")
		}
		if n, _, err := e.Del([][]byte{b("q1")}); n != 1 || err != nil {
			t.Fatalf("DEL q1: %d %v", n, err)
		}
		time.Sleep(10 * time.Minute)
		var last [2]int64
		var seqs [2]uint64
		popped := 0
		for {
			d, ok := e.Pop([][]byte{b("q0"), b("q2")})
			if !ok {
				break
			}
			if d.Due > e.Now() {
				t.Fatalf("a far job handed out early: due %d at %d", d.Due, e.Now())
			}
			if string(d.Queue) == "q1" {
				t.Fatal("a job of a deleted queue")
			}
			q := (d.Queue[1] - '0') / 2
			if d.Due < last[q] || d.Due == last[q] && d.seq < seqs[q] {
				t.Fatalf("out of order in %s: (%d, %d) after (%d, %d)", d.Queue, d.Due, d.seq, last[q], seqs[q])
			}
			last[q], seqs[q] = d.Due, d.seq
			popped++
		}
		if st := e.QueueStats(b("q1")); st.Delayed != 0 {
			t.Fatalf("q1 after DEL: %+v", st)
		}
		// q0's 20 far jobs and the ten, q2's 20, less the two cancelled.
		if popped != 48 {
			t.Fatalf("%d far jobs of q0 and q2 handed out, want 48", popped)
		}
		if n := farLen(e); n != 0 {
			t.Fatalf("%d jobs left in the buckets", n)
		}
		e.Close()
	})
}

// A compaction checkpoints the buckets before it drops a segment, and a
// crash at any step of it (between its chunks, after its drop, at every
// write, fsync, rename and removal of the checkpoint's runs and file and
// of the log) loses nothing: a restart has every job, far or near, with
// its payload, due and counts.
func TestCompactionWithFarBuckets(t *testing.T) {
	t.Run("server ids", func(t *testing.T) { testCompactionWithFarBuckets(t, false) })
	t.Run("client ids", func(t *testing.T) { testCompactionWithFarBuckets(t, true) })
}

func testCompactionWithFarBuckets(t *testing.T, withIDs bool) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		rng := rand.New(rand.NewPCG(9, 10))
		var ids []string
		e := mustNew(t, segmented(fs, FsyncAlways))
		churn(t, e, rng, 200, &ids)
		far := addFarIDs(t, e, 40, 60, withIDs)
		churn(t, e, rng, 60, &ids)
		e.Close()
		var want string
		check := func(name string, crashed *aof.MemFS) {
			t.Helper()
			o := farBuckets(crashed)
			o.SegmentSize = 1 << 10
			c := mustNew(t, o)
			defer c.Close()
			if got := delayedView(t, c); got != want {
				t.Fatalf("%s: state after the crash differs\n%s", name, diffLines(want, got))
			}
		}
		opts := func(fs *aof.MemFS) Options {
			o := farBuckets(fs)
			o.SegmentSize = 1 << 10
			return o
		}
		defer func(c int, s uint32) { compactChunk, compactScan = c, s }(compactChunk, compactScan)
		compactChunk, compactScan = 16, 64
		{
			fs2 := fs.CrashClone()
			e2 := mustNew(t, opts(fs2))
			settleSpill()
			if n := farLen(e2); n < 30 {
				t.Fatalf("%d far jobs out before the compaction", n)
			}
			// One far job cancelled by id from disk, in the log the
			// compaction drops.
			qs, id, _ := strings.Cut(far[1], "/")
			if n, tk, _ := e2.Cancel(b(qs), [][]byte{b(id)}); n != 1 || e2.WaitDurable(tk) != nil {
				t.Fatal("cancel of a far job")
			}
			want = delayedView(t, e2)
			check("start", fs2.CrashClone())
			steps := 0
			defer func(f func(*finetimer.Timer)) { rewriteYield = f }(rewriteYield)
			rewriteYield = func(*finetimer.Timer) {
				steps++
				check(fmt.Sprintf("chunk %d", steps), fs2.CrashClone())
			}
			defer func() { compactDropped = nil }()
			compactDropped = func() { check("dropped", fs2.CrashClone()) }
			compactAll(t, e2)
			compactDropped, rewriteYield = nil, finetimer.Pause
			if got := delayedView(t, e2); got != want {
				t.Fatalf("after compacting with far jobs out\n%s", diffLines(want, got))
			}
			if n := farLen(e2); n < 30 {
				t.Fatalf("%d far jobs out after the compaction, want them still in runs", n)
			}
			e2.Close()
			check("done", fs2.CrashClone())
		}
		fired := 0
		for _, op := range []aof.Op{aof.OpWrite, aof.OpSync, aof.OpRename, aof.OpSyncDir, aof.OpRemove} {
			for after := int64(0); after < 6; after++ {
				fs2 := fs.CrashClone()
				e2 := mustNew(t, opts(fs2))
				settleSpill()
				want = delayedView(t, e2)
				n := after
				if op == aof.OpWrite {
					n *= 700
				}
				fs2.Inject(aof.Fault{Op: op, After: n})
				err := e2.journal.Roll()
				for active := e2.journal.Active(); err == nil && e2.journal.Segments()[0] < active; {
					err = e2.compactSegment(e2.journal.Segments()[0])
				}
				if err != nil {
					fired++
				}
				check(fmt.Sprintf("op %d after %d (%v)", op, after, err), fs2.CrashClone())
				e2.Close()
			}
		}
		if fired < 10 {
			t.Fatalf("%d of the injected faults fired: the test crashes too little", fired)
		}
	})
}

// A backup holds the far jobs (read from the runs of a checkpoint it
// takes), a rewrite leaves them in the runs and starts the new log with
// that checkpoint's mark, and DELAY.GET shows one on disk without bringing
// it back; FLUSHALL drops them for good.
func TestFarBucketsBackupRewriteGet(t *testing.T) {
	t.Run("server ids", func(t *testing.T) { testFarBucketsBackupRewriteGet(t, false) })
	t.Run("client ids", func(t *testing.T) { testFarBucketsBackupRewriteGet(t, true) })
}

func testFarBucketsBackupRewriteGet(t *testing.T, ids bool) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, farBuckets(fs))
		far := addFarIDs(t, e, 30, 100, ids)
		settleSpill()
		if farLen(e) != 30 {
			t.Fatalf("%d far jobs out, want 30", farLen(e))
		}
		want := delayedView(t, e)
		qs, id, _ := strings.Cut(far[7], "/")
		info, ok := e.Get(b(qs), b(id))
		if !ok || info.State != "delayed" || len(info.Payload) != 100 || string(info.ID) != id || farLen(e) != 30 {
			t.Fatalf("DELAY.GET of a far job: %v %+v, %d out", ok, info, farLen(e))
		}
		// DELAY.UPCOMING merges the far jobs with the near ones in (due,
		// add order), a page at a time: q0 holds 10 of each.
		var all []Upcoming
		var after *Cursor
		for {
			page := e.UpcomingAfter(b("q0"), 7, after)
			all = append(all, page...)
			if len(page) < 7 {
				break
			}
			last := page[len(page)-1]
			after = &Cursor{Time: last.Due, ID: last.ID}
		}
		seen, nfar := map[string]bool{}, 0
		for i, u := range all {
			if seen[string(u.ID)] || i > 0 && u.Due < all[i-1].Due {
				t.Fatalf("DELAY.UPCOMING of q0: %d: %s due %d repeated or out of order", i, u.ID, u.Due)
			}
			seen[string(u.ID)] = true
			if u.Due > e.Now()+60_000 {
				nfar++
			}
		}
		if len(all) != 20 || nfar != 10 {
			t.Fatalf("DELAY.UPCOMING of q0 in pages: %d jobs, %d far; want 20, 10", len(all), nfar)
		}
		if in := e.Info(); in.Far.Jobs != 30 || in.Jobs != 60 || in.Far.IndexBytes == 0 {
			t.Fatalf("INFO: %+v", in.Far)
		}
		c, err := e.Backup(0)
		if err != nil {
			t.Fatal(err)
		}
		// The backup replayed as a log: every job, in memory.
		x := newEngine(t, Options{Replicator: &fakeRepl{closed: true}, Follower: true})
		if err := x.Restore(bytes.NewReader(c.Data)); err != nil {
			t.Fatal(err)
		}
		if got := delayedView(t, x); got != want {
			t.Fatalf("a backup's jobs\n%s", diffLines(want, got))
		}
		if err := e.Rewrite(); err != nil {
			t.Fatal(err)
		}
		waitRewrite(e)
		if farLen(e) != 30 {
			t.Fatalf("%d far jobs out after a rewrite", farLen(e))
		}
		e.Close()
		e = mustNew(t, farBuckets(fs))
		if got := delayedView(t, e); got != want {
			t.Fatalf("after a rewrite and a restart\n%s", diffLines(want, got))
		}
		if _, err := e.Flush(); err != nil {
			t.Fatal(err)
		}
		if farLen(e) != 0 {
			t.Fatalf("%d far jobs after FLUSHALL", farLen(e))
		}
		e.Close()
		e = mustNew(t, farBuckets(fs))
		if in := e.Info(); in.Jobs != 0 || farLen(e) != 0 {
			t.Fatalf("after FLUSHALL and a restart: %d jobs, %d far", in.Jobs, farLen(e))
		}
		e.Close()
	})
}

// A failed log write reloads the state from the log: the buckets are
// reopened from their checkpoint and the replay is a start's, so every far
// job is still there once, counted once, and comes when due.
func TestFarBucketsReload(t *testing.T) {
	t.Run("server ids", func(t *testing.T) { testFarBucketsReload(t, false) })
	t.Run("client ids", func(t *testing.T) { testFarBucketsReload(t, true) })
}

func testFarBucketsReload(t *testing.T, ids bool) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, farBuckets(fs))
		defer e.Close()
		far := addFarIDs(t, e, 30, 100, ids)
		settleSpill()
		if err := e.checkpoint(0, nil); err != nil {
			t.Fatal(err)
		}
		qs, id, _ := strings.Cut(far[3], "/")
		if n, tk, _ := e.Cancel(b(qs), [][]byte{b(id)}); n != 1 || e.WaitDurable(tk) != nil {
			t.Fatal("cancel of a far job in a run")
		}
		addFar(t, e, 5, 100) // in the open bucket, after the checkpoint
		settleSpill()
		want := delayedView(t, e)
		fs.Inject(aof.Fault{Op: aof.OpWrite, Err: syscall.ENOSPC})
		res, _ := e.Add(AddArgs{Queue: b("x"), Payload: b("lost"), Delay: 5})
		if err := e.WaitDurable(res.Ticket); err == nil {
			t.Fatal("the write the fault was for succeeded")
		}
		if got := delayedView(t, e); got != want {
			t.Fatalf("after a reload\n%s", diffLines(want, got))
		}
		if farLen(e) != 29 { // the runs' (the open bucket's come back from the log)
			t.Fatalf("%d far jobs out after the reload, want 29", farLen(e))
		}
		time.Sleep(20 * time.Minute)
		n := 0
		for {
			if _, ok := e.Pop([][]byte{b("q0"), b("q1"), b("q2")}); !ok {
				break
			}
			n++
		}
		if n != 70-1 {
			t.Fatalf("%d jobs handed out, want 69", n)
		}
	})
}

// DELAY.SCAN lists far jobs with the fields a copy needs, read from their
// heads, and meets every job there for the whole scan while, between its
// pages, jobs go out to the buckets (the spiller), come back (a
// reschedule by id, a load as time passes), are sealed into runs by a
// checkpoint, and new ones come.
func TestScanJobsListsFarJobs(t *testing.T) {
	t.Run("server ids", func(t *testing.T) { testScanJobsListsFarJobs(t, false) })
	t.Run("client ids", func(t *testing.T) { testScanJobsListsFarJobs(t, true) })
}

func testScanJobsListsFarJobs(t *testing.T, ids bool) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, farBuckets(fs))
		defer e.Close()
		far := addFarIDs(t, e, 90, 50, ids)
		idOf := func(s string, i int) []byte {
			if ids {
				return b(fmt.Sprint(s, i))
			}
			return nil
		}
		for i := range 30 { // far jobs with fields of their own
			res, err := e.Add(AddArgs{Queue: b("q1"), ID: idOf("opt-", i), Delay: 900_000 + int64(i), Payload: b(fmt.Sprint("opt", i)),
				AckTimeout: 7000, Retry: 3, Priority: 2, DeadLetter: b("dlq")})
			if err != nil || e.WaitDurable(res.Ticket) != nil {
				t.Fatal(err)
			}
			far = append(far, "q1/"+string(res.ID))
		}
		settleSpill()
		if err := e.checkpoint(0, nil); err != nil {
			t.Fatal(err)
		}
		if farLen(e) < 60 {
			t.Fatalf("%d jobs in the buckets: the test tests nothing", farLen(e))
		}
		want := map[string]JobInfo{}
		for _, q := range []string{"q0", "q1", "q2"} {
			for _, j := range scanAll(t, e, q, 1<<20, func() {}) {
				got, ok := e.Get(b(q), j.ID)
				if !ok {
					t.Fatalf("%s/%s listed, not there", q, j.ID)
				}
				if fmt.Sprint(got) != fmt.Sprint(j.JobInfo) {
					t.Fatalf("%s/%s listed\n%+v\nis\n%+v", q, j.ID, j.JobInfo, got)
				}
				if strings.HasPrefix(string(j.Payload), "opt") && (j.AckTimeout != 7000 || j.Retry != 3 || j.Priority != 2 || j.Seq == 0 ||
					string(j.DeadLetter) != "dlq") {
					t.Fatalf("a far job's options: %+v", j)
				}
				want[q+"/"+string(j.ID)] = j.JobInfo
			}
		}
		if len(want) != 180+30 {
			t.Fatalf("one scan a queue listed %d jobs, want 210", len(want))
		}
		// Now with the world moving between pages of 7.
		moved, n := 0, 0
		for _, q := range []string{"q0", "q1", "q2"} {
			seen := map[string]bool{}
			for _, j := range scanAll(t, e, q, 7, func() {
				n++
				if moved < len(far) { // back into memory, then out again
					qs, id, _ := strings.Cut(far[moved], "/")
					moved++
					if ok, _, err := e.Reschedule(RescheduleArgs{Queue: b(qs), ID: b(id), Delay: 800_000}); !ok || err != nil {
						t.Fatalf("reschedule: %v %v", ok, err)
					}
				}
				if n%5 == 0 {
					add(t, e, "q0", 700_000, "new")
				}
				if n%11 == 0 {
					if err := e.checkpoint(0, nil); err != nil {
						t.Fatal(err)
					}
				}
				time.Sleep(20 * time.Second) // the spiller's rounds, loads at half the horizon
				synctest.Wait()
			}) {
				seen[string(j.ID)] = true
			}
			for k := range want {
				if qs, id, _ := strings.Cut(k, "/"); qs == q && !seen[id] {
					t.Fatalf("%s was there for the whole scan and was not listed", k)
				}
			}
		}
		if moved < 20 {
			t.Fatalf("%d jobs moved during the scans: the test tests little", moved)
		}
		// Jobs still in memory when the slab's walk begins go out to the
		// buckets during it, behind the first walk: the last one lists them.
		stay := map[string]bool{}
		for i := range 40 {
			res, err := e.Add(AddArgs{Queue: b("q9"), ID: idOf("late-", i), Delay: 900_000, Payload: b("late")})
			if err != nil || !res.Added {
				t.Fatal(err)
			}
			stay[string(res.ID)] = true
		}
		var got []ScanJob
		for _, j := range scanAll(t, e, "q9", 7, func() { settleSpill() }) {
			got = append(got, j)
			delete(stay, string(j.ID))
		}
		if len(stay) != 0 || farLen(e) < 40 {
			t.Fatalf("%d of 40 jobs that went out during the scan not listed (%d far)", len(stay), farLen(e))
		}
	})
}

// MEMORY USAGE counts a far job as what it keeps in memory, its cell of
// the buckets' index, not its slab record, wheel node and payload; INFO
// counts the runs' bytes on disk once they are sealed.
func TestFarMemoryUsage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := mustNew(t, farBuckets(aof.NewMemFS()))
		defer e.Close()
		for i := range 200 {
			add(t, e, "near", 5_000, strings.Repeat("n", 300))
			add(t, e, "far", 900_000+int64(i), strings.Repeat("f", 300))
		}
		near, _ := e.MemoryUsage(b("near"))
		before, _ := e.MemoryUsage(b("far"))
		for range 10 {
			settleSpill()
		}
		if n := farLen(e); n != 200 {
			t.Fatalf("%d far jobs, want 200", n)
		}
		after, _ := e.MemoryUsage(b("far"))
		if want := queueBytes + 3 + 200*farCellBytes; after != want || before < near-10 {
			t.Fatalf("MEMORY USAGE of 200 far jobs: %d before they went out, %d after; want %d (near: %d)", before, after, want, near)
		}
		if in := e.Info(); in.Far.DiskBytes != 0 || in.Far.MemBytes == 0 {
			t.Fatalf("before a seal: %+v", in.Far)
		}
		if err := e.checkpoint(0, nil); err != nil {
			t.Fatal(err)
		}
		if in := e.Info(); in.Far.DiskBytes < 200*300 || in.Far.MemBytes != 0 {
			t.Fatalf("after a seal: %+v", in.Far)
		}
		// Back in memory, it counts as before.
		if ok, _, err := e.Reschedule(RescheduleArgs{Queue: b("far"), ID: e.Upcoming(b("far"), 1)[0].ID, Delay: 5_000}); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if got, _ := e.MemoryUsage(b("far")); got <= after+300 {
			t.Fatalf("MEMORY USAGE %d after a far job came back, %d before", got, after)
		}
	})
}

// Runs that cancels left mostly dead are merged in the background, a
// chunk of re-pointed jobs a lock hold, and the checkpoint after drops
// them: fewer runs, the same jobs; a crash after any step of the merge
// (and after its checkpoint) loses nothing.
func TestFarMergeRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, farBuckets(fs))
		defer e.Close()
		var far []string
		for range 6 { // six runs of 40
			for i := range 40 {
				far = append(far, add(t, e, "q", 900_000+int64(i)*1000, fmt.Sprint("payload", len(far))))
			}
			for farLen(e) < int64(len(far)) {
				settleSpill()
			}
			if err := e.checkpoint(0, nil); err != nil {
				t.Fatal(err)
			}
		}
		for i, id := range far {
			if i%5 != 0 {
				if n, tk, _ := e.Cancel(b("q"), [][]byte{b(id)}); n != 1 || e.WaitDurable(tk) != nil {
					t.Fatal("cancel of a far job")
				}
			}
		}
		runs := e.Info().Far.Runs
		want := delayedView(t, e)
		check := func(name string) {
			t.Helper()
			c := mustNew(t, farBuckets(fs.CrashClone()))
			defer c.Close()
			if got := delayedView(t, c); got != want {
				t.Fatalf("%s: after a crash\n%s", name, diffLines(want, got))
			}
		}
		check("before")
		steps := 0
		defer func() { mergeStepped = nil }()
		mergeStepped = func() { steps++; check(fmt.Sprint("step ", steps)) }
		defer func(c int) { compactChunk = c }(compactChunk)
		compactChunk = 8
		e.mergeFar(nil)
		mergeStepped = nil
		if got := delayedView(t, e); got != want {
			t.Fatalf("after the merge\n%s", diffLines(want, got))
		}
		if in := e.Info().Far; in.Runs >= runs || in.Jobs != 48 || steps < 4 {
			t.Fatalf("%d runs before the merge, after %+v, in %d steps", runs, in, steps)
		}
		check("after")
		e.mergeFar(nil) // nothing left worth merging
		if got := delayedView(t, e); got != want {
			t.Fatalf("after a second merge\n%s", diffLines(want, got))
		}
	})
}

// A cancel of a far job a run holds, logged after the checkpoint, holds
// after a crash: replay's restatement of the job (the fault's add record)
// takes it out of the run, though the records skipped before the mark
// left the server-id builder's ceiling below its id.
func TestFarCancelSurvivesCrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, farBuckets(fs))
		defer e.Close()
		var far []string
		for range 2 {
			for i := range 5 {
				far = append(far, add(t, e, "q", 900_000+int64(i)*1000, fmt.Sprint("payload", len(far))))
			}
			for farLen(e) < int64(len(far)) {
				settleSpill()
			}
			if err := e.checkpoint(0, nil); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range far[1:3] {
			if n, tk, _ := e.Cancel(b("q"), [][]byte{b(id)}); n != 1 || e.WaitDurable(tk) != nil {
				t.Fatal("cancel of a far job")
			}
			want := delayedView(t, e)
			c := mustNew(t, farBuckets(fs.CrashClone()))
			if got := delayedView(t, c); got != want {
				t.Fatalf("after a crash\n%s", diffLines(want, got))
			}
			c.Close()
		}
	})
}

// A DEL of a queue with far jobs in runs reads them without the engine's
// lock, then drops those and the ones in the open bucket under it; the
// other queues' far jobs stay, and a restart agrees.
func TestFarDelReadsOutsideTheLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, farBuckets(fs))
		defer e.Close()
		for i := range 60 {
			add(t, e, fmt.Sprint("q", i%2), 900_000+int64(i), "in a run")
		}
		for farLen(e) < 60 {
			settleSpill()
		}
		if err := e.checkpoint(0, nil); err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			add(t, e, fmt.Sprint("q", i%2), 900_000+int64(i), "in the open bucket")
		}
		for farLen(e) < 70 {
			settleSpill()
		}
		read := -1
		defer func() { doomedRead = nil }()
		doomedRead = func(pre map[string][]bucket.Job) {
			if !e.core.mutex.TryLock() {
				t.Error("the runs were read under the engine's lock")
				return
			}
			e.core.mutex.Unlock()
			read = len(pre["q0"])
		}
		if n, tk, err := e.Del([][]byte{b("q0")}); n != 1 || err != nil || e.WaitDurable(tk) != nil {
			t.Fatalf("DEL q0: %d %v", n, err)
		}
		if read != 30 {
			t.Fatalf("%d of q0's 30 far jobs in runs read before the lock", read)
		}
		if n := farLen(e); n != 35 {
			t.Fatalf("%d far jobs after DEL q0, want q1's 35", n)
		}
		if st := e.QueueStats(b("q0")); st.Delayed != 0 {
			t.Fatalf("q0 after DEL: %+v", st)
		}
		want := delayedView(t, e)
		c := mustNew(t, farBuckets(fs.CrashClone()))
		defer c.Close()
		if got := delayedView(t, c); got != want {
			t.Fatalf("after a crash\n%s", diffLines(want, got))
		}
	})
}

// The file work of the buckets gives its CPU up as it goes (farPacer): a
// checkpoint writing a bucket of far jobs, a pread a payload, pauses
// every farSlice of its work, never with the lock held; on one CPU the
// clients' requests run in those pauses (a whole 500k-job bucket written
// without one stalled them 300-400 ms).
func TestFarFileWorkPauses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, farBuckets(fs))
		defer e.Close()
		const n = 2000
		addFar(t, e, n, 100)
		settleSpill()
		if farLen(e) != n {
			t.Fatalf("%d far jobs in the buckets, want %d", farLen(e), n)
		}
		// Each look at the clock finds 40 µs more: a pause every third job.
		var clock time.Time
		defer func(f func() time.Time) { farNow = f }(farNow)
		farNow = func() time.Time { clock = clock.Add(40 * time.Microsecond); return clock }
		pauses, locked := 0, 0
		defer func(f func(*finetimer.Timer)) { farPause = f }(farPause)
		farPause = func(*finetimer.Timer) {
			pauses++
			free := false
			for range 100 { // another goroutine's moment with the lock is not the writer's
				if free = e.mu.m.TryLock(); free {
					e.mu.m.Unlock()
					break
				}
				time.Sleep(time.Millisecond)
			}
			if !free {
				locked++
			}
		}
		e.mu.Lock()
		e.far.set.Freeze() // the open bucket, written by the next checkpoint
		e.mu.Unlock()
		if err := e.checkpoint(0, e.farPacer(nil, false)); err != nil {
			t.Fatal(err)
		}
		if want := n / 3; pauses < want || locked != 0 {
			t.Fatalf("writing %d far jobs paused %d times (want at least %d), %d of them with the lock held", n, pauses, want, locked)
		}
	})
}

// A long write of a run (a seal of a million jobs takes seconds) runs the
// far jobs' load rounds in its pauses: the jobs due meanwhile come back on
// time, not after it. Nothing is lost or doubled by a load in the middle
// of a checkpoint's write, and a restart over that checkpoint has the same
// jobs.
func TestFarLoadsDuringSeal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, farBuckets(fs))
		const n = 2000
		for i := range n { // due 600 s to 700 s out, 50 ms apart
			res, err := e.Add(AddArgs{Queue: b("q"), Delay: 600_000 + 50*int64(i), Payload: []byte(fmt.Sprintf("%-100d", i))})
			if err != nil || e.WaitDurable(res.Ticket) != nil {
				t.Fatal(err)
			}
		}
		settleSpill()
		if farLen(e) != n {
			t.Fatalf("%d far jobs in the buckets, want %d", farLen(e), n)
		}
		// Past the spiller's load round nearest 600 s, and 10 s more:
		// less than a round's interval (15 s), so the jobs due within the
		// next 10 s past the half horizon are still out.
		time.Sleep(575 * time.Second)
		synctest.Wait()
		last := time.Unix(0, e.far.loaded.Load())
		time.Sleep(time.Until(last.Add(10 * time.Second)))
		before, out := delayedView(t, e), farLen(e)
		var clock time.Time
		defer func(f func() time.Time) { farNow = f }(farNow)
		farNow = func() time.Time { clock = clock.Add(40 * time.Microsecond); return clock }
		var during []int64
		var crashed *aof.MemFS // the files as a kill -9 would leave them right after the load
		defer func(f func(*finetimer.Timer)) { farPause = f }(farPause)
		farPause = func(*finetimer.Timer) {
			during = append(during, farLen(e))
			if crashed == nil && farLen(e) < out {
				crashed = fs.CrashClone()
			}
		}
		e.mu.Lock()
		e.far.set.Freeze()
		e.mu.Unlock()
		e.far.loaded.Store(last.Add(-5 * time.Second).UnixNano()) // the seal began as a round came due
		if err := e.checkpoint(0, e.farPacer(nil, true)); err != nil {
			t.Fatal(err)
		}
		loaded := out - farLen(e)
		if loaded < 100 || len(during) < 2 || during[len(during)-1] != farLen(e) || during[0] != out {
			t.Fatalf("%d far jobs before the seal, %d after; during it: %v: want about 200 loaded by a pause of it", out, farLen(e), during)
		}
		if got := delayedView(t, e); got != before {
			t.Fatalf("a load during a seal changed the jobs\n%s", diffLines(before, got))
		}
		e.Close()
		e = mustNew(t, farBuckets(fs))
		if got := delayedView(t, e); got != before {
			t.Fatalf("after a restart over a checkpoint a load ran in\n%s", diffLines(before, got))
		}
		e.Close()
		if crashed == nil {
			t.Fatal("no crash taken after the load")
		}
		e = mustNew(t, farBuckets(crashed))
		defer e.Close()
		if got := delayedView(t, e); got != before {
			t.Fatalf("after a kill -9 in the middle of the seal, after a load\n%s", diffLines(before, got))
		}
	})
}

// Replay before a checkpoint's mark skips only the add record a run's job
// of a client id left memory from, not every record of its id: an earlier
// job of the id dead-lettered on the way is still dead-lettered, a job
// added near and rescheduled far is there once, a far job cancelled and
// its id added far again is there once; with the mark in the middle of the
// log (a crash) and at its end (a graceful stop).
func TestFarIDsReplayEarlierJobs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, farBuckets(fs))
		wait := func(tk uint64, err error) {
			t.Helper()
			if err != nil || e.WaitDurable(tk) != nil {
				t.Fatal(err)
			}
		}
		addID := func(q, id string, delay int64, payload string, opts ...func(*AddArgs)) {
			t.Helper()
			a := AddArgs{Queue: b(q), ID: b(id), Delay: delay, Payload: b(payload)}
			for _, o := range opts {
				o(&a)
			}
			res, err := e.Add(a)
			if err != nil || !res.Added {
				t.Fatalf("add %s/%s: %+v %v", q, id, res, err)
			}
			wait(res.Ticket, nil)
		}
		// An earlier job of "j" fails into a dead-letter queue.
		addID("q", "j", 0, "first", func(a *AddArgs) { a.AckTimeout, a.Retry, a.DeadLetter = 5, 0, b("dead") })
		if d, ok := e.Pop([][]byte{b("q")}); !ok || string(d.ID) != "j" {
			t.Fatalf("pop: %+v %v", d, ok)
		}
		sleep(10 * time.Millisecond)
		// Then "j" again, far; "m" near, then rescheduled far; "c" far,
		// cancelled, and far again.
		addID("q", "j", 700_000, "second")
		addID("q", "m", 5_000, "moved")
		addID("q", "c", 800_000, "cancelled")
		settleSpill()
		ok, tk, err := e.Reschedule(RescheduleArgs{Queue: b("q"), ID: b("m"), Delay: 750_000})
		if !ok {
			t.Fatal("reschedule of m")
		}
		wait(tk, err)
		n, tk, err := e.Cancel(b("q"), [][]byte{b("c")})
		if n != 1 {
			t.Fatal("cancel of c, far")
		}
		wait(tk, err)
		addID("q", "c", 850_000, "again")
		for range 5 {
			settleSpill()
		}
		if n := farLen(e); n != 3 {
			t.Fatalf("%d jobs in the buckets, want j, m and c", n)
		}
		if err := e.checkpoint(0, nil); err != nil {
			t.Fatal(err)
		}
		want := delayedView(t, e)
		for _, q := range []string{"q", "dead"} {
			if st := e.QueueStats(b(q)); st.Delayed+st.Ready+st.Reserved != map[string]int{"q": 3, "dead": 1}[q] {
				t.Fatalf("%s before: %+v", q, st)
			}
		}
		check := func(c *Engine, when string) {
			t.Helper()
			if got := delayedView(t, c); got != want {
				t.Fatalf("%s\n%s", when, diffLines(want, got))
			}
			if pk := c.Peek(b("dead"), 10); len(pk) != 1 || string(pk[0].Payload) != "first" {
				t.Fatalf("%s: the dead-letter queue holds %q", when, pk)
			}
			if st := c.QueueStats(b("q")); st.Delayed != 3 || st.Ready+st.Reserved != 0 {
				t.Fatalf("%s: q %+v", when, st)
			}
			if inMemory(c) != 1 {
				t.Fatalf("%s: %d jobs in memory, want the dead-lettered one", when, inMemory(c))
			}
		}
		c := mustNew(t, farBuckets(fs.CrashClone()))
		check(c, "after a crash")
		c.Close()
		e.Close()
		e = mustNew(t, farBuckets(fs))
		check(e, "after a restart")
		// Each comes back once, by id and in time.
		for _, id := range []string{"j", "m", "c"} {
			if in, ok := e.Get(b("q"), b(id)); !ok || in.State != "delayed" {
				t.Fatalf("DELAY.GET %s: %+v %v", id, in, ok)
			}
		}
		sleep(900 * time.Second)
		var got []string
		for {
			d, ok := e.Pop([][]byte{b("q")})
			if !ok {
				break
			}
			got = append(got, string(d.ID)+"="+string(d.Payload))
		}
		if fmt.Sprint(got) != "[j=second m=moved c=again]" {
			t.Fatalf("popped %v", got)
		}
		e.Close()
	})
}

// A DELAY.SCAN's last walk meets the jobs of client ids that went out to
// the buckets behind its walk of memory and came back before it passed
// them: it finds them in memory by the id their dead entries' heads hold.
func TestScanFindsClientIDsBackInMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, farBuckets(fs))
		defer e.Close()
		var ids []string
		for i := range 40 {
			res, err := e.Add(AddArgs{Queue: b("q9"), ID: b(fmt.Sprint("late-", i)), Delay: 900_000, Payload: b("late")})
			if err != nil || !res.Added || e.WaitDurable(res.Ticket) != nil {
				t.Fatal(err)
			}
			ids = append(ids, string(res.ID))
		}
		pages, back := 0, 0
		seen := map[string]bool{}
		for _, j := range scanAll(t, e, "q9", 7, func() {
			if pages++; pages == 1 {
				settleSpill() // out, behind the walk of memory
				return
			}
			if pages == 2 {
				for _, id := range ids { // back into memory, near
					if ok, _, _ := e.Reschedule(RescheduleArgs{Queue: b("q9"), ID: b(id), Delay: 5_000}); ok {
						back++
					}
				}
			}
		}) {
			seen[string(j.ID)] = true
		}
		if back != 40 || farLen(e) != 0 {
			t.Fatalf("%d came back, %d still out: the test tests nothing", back, farLen(e))
		}
		for _, id := range ids {
			if !seen[id] {
				t.Fatalf("%s was there for the whole scan and was not listed", id)
			}
		}
	})
}

// Two ids of one key (jobs.FarKey is a hash): the first goes out, the
// second stays in memory; each is found by its own id, never the other's,
// and a restart over a checkpoint (replay confirms a key's job by its
// head) has both once.
func TestFarKeysThatMeet(t *testing.T) {
	defer func(k func(string, []byte) uint64) { farKey = k }(farKey)
	farKey = func(q string, id []byte) uint64 {
		if q == "q" && (string(id) == "a" || string(id) == "b" || string(id) == "z") {
			return jobs.FarKeyBit | 7
		}
		return jobs.FarKey(q, id)
	}
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, farBuckets(fs))
		for _, id := range []string{"a", "b", "c"} {
			res, err := e.Add(AddArgs{Queue: b("q"), ID: b(id), Delay: 900_000, Payload: b("payload of " + id)})
			if err != nil || !res.Added || e.WaitDurable(res.Ticket) != nil {
				t.Fatal(err)
			}
		}
		for range 3 {
			settleSpill()
		}
		if farLen(e) != 2 || inMemory(e) != 1 {
			t.Fatalf("%d out, %d in memory: want a and c out, b in", farLen(e), inMemory(e))
		}
		check := func(e *Engine, when string) {
			t.Helper()
			for _, id := range []string{"a", "b", "c"} {
				if in, ok := e.Get(b("q"), b(id)); !ok || string(in.ID) != id || string(in.Payload) != "payload of "+id {
					t.Fatalf("%s: DELAY.GET %s: %+v %v", when, id, in, ok)
				}
			}
			for _, id := range []string{"d", "z"} { // z: of a's key
				if _, ok := e.Get(b("q"), b(id)); ok {
					t.Fatalf("%s: %s, never added, found", when, id)
				}
			}
			if st := e.QueueStats(b("q")); st.Delayed != 3 {
				t.Fatalf("%s: %+v", when, st)
			}
		}
		check(e, "out")
		if err := e.checkpoint(0, nil); err != nil {
			t.Fatal(err)
		}
		want := delayedView(t, e)
		c := mustNew(t, farBuckets(fs.CrashClone()))
		check(c, "after a crash")
		if got := delayedView(t, c); got != want {
			t.Fatalf("after a crash\n%s", diffLines(want, got))
		}
		c.Close()
		// b's cancel must not touch a, which holds the key.
		if n, tk, _ := e.Cancel(b("q"), [][]byte{b("b")}); n != 1 || e.WaitDurable(tk) != nil {
			t.Fatal("cancel of b")
		}
		if _, ok := e.Get(b("q"), b("a")); !ok || farLen(e) != 2 {
			t.Fatalf("a after b's cancel: %v, %d out", ok, farLen(e))
		}
		e.Close()
	})
}
