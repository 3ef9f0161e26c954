package engine

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/finetimer"
	"github.com/delayd/delayd/record"
)

// horizoned is a segmented log with a horizon of a minute.
func horizoned(fs aof.FS, fsync string) Options {
	o := segmented(fs, fsync)
	o.Horizon = 60_000
	return o
}

// settleSpill lets the spiller run a round (and its read-ahead if due).
func settleSpill() {
	time.Sleep(2 * spillEvery)
	synctest.Wait()
}

// addFar adds n jobs due far beyond the horizon and n due within it, each
// with its own payload of size bytes, and returns the far ones' ids.
func addFar(t *testing.T, e *Engine, n, size int) []string {
	t.Helper()
	return addFarIDs(t, e, n, size, false)
}

// addFarIDs is addFar, with client ids if ids says so.
func addFarIDs(t *testing.T, e *Engine, n, size int, ids bool) []string {
	t.Helper()
	return addFarWith(t, e, n, size, func(a *AddArgs, i int) {
		if ids {
			a.ID = b(fmt.Sprint("order-", i))
		}
	})
}

// withOptions gives an add of addFarWith a client id and the options that
// keep more of a job in side tables: a dead-letter queue and UNIQUE, with
// retries (no ack timeout: a pop ends a job, as the tests that use it
// count).
func withOptions(a *AddArgs, i int) {
	a.ID = b(fmt.Sprint("order-", i))
	a.DeadLetter, a.Unique, a.Retry = b("dead"), 3_600_000, 2
}

// addFarWith is addFar, each add's arguments set by opt.
func addFarWith(t *testing.T, e *Engine, n, size int, opt func(*AddArgs, int)) []string {
	t.Helper()
	var far []string
	for i := range 2 * n {
		p := []byte(fmt.Sprintf("%-*d", size, i))
		delay := int64(5_000)
		if i%2 == 0 {
			delay = 600_000 + int64(i)
		}
		a := AddArgs{Queue: b(fmt.Sprint("q", i%3)), Delay: delay, Payload: p}
		opt(&a, i)
		res, err := e.Add(a)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.WaitDurable(res.Ticket); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			far = append(far, fmt.Sprintf("q%d/%s", i%3, res.ID))
		}
	}
	return far
}

// Jobs due beyond the horizon keep their payloads in the log, not in
// memory; every reader still gets them (DELAY.GET, a dump, a snapshot);
// they come back into memory before they are due and are handed out on
// time, never early; a restart has them all. Jobs within the horizon are
// untouched.
func TestPayloadsOnDisk(t *testing.T) {
	t.Run("server ids", func(t *testing.T) { testPayloadsOnDisk(t, false) })
	t.Run("client ids", func(t *testing.T) { testPayloadsOnDisk(t, true) })
}

func testPayloadsOnDisk(t *testing.T, ids bool) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, horizoned(fs, FsyncAlways))
		inUse := e.Info().PayloadBytes
		far := addFarIDs(t, e, 60, 200, ids)
		grown := e.Info().PayloadBytes - inUse
		before := dump(e)
		settleSpill()
		in := e.Info()
		if in.DiskJobs != 60 || in.DiskBytes != 60*200 || in.Horizon != 60_000 {
			t.Fatalf("after a spill round: %d payloads on disk (%d bytes), horizon %d; want 60, 12000", in.DiskJobs, in.DiskBytes, in.Horizon)
		}
		if in.PayloadBytes-inUse > grown/2+grown/8 {
			t.Fatalf("payload memory %d after the spill, %d before: the far payloads are still in memory", in.PayloadBytes-inUse, grown)
		}
		if after := dump(e); after != before {
			t.Fatalf("payloads on disk read back differently\n%s", diffLines(before, after))
		}
		for _, qid := range far[:5] {
			q, id, _ := strings.Cut(qid, "/")
			info, ok := e.Get(b(q), b(id))
			if !ok || len(info.Payload) != 200 || info.State != "delayed" {
				t.Fatalf("DELAY.GET %s of a job on disk: %v %q", qid, ok, info.Payload)
			}
		}
		if e.Info().DiskReads < 5 {
			t.Fatalf("%d reads from disk after 5 DELAY.GETs", e.Info().DiskReads)
		}
		snap := e.Snapshot()
		if !strings.Contains(string(snap), fmt.Sprintf("%-*d", 200, 0)) {
			t.Fatal("a snapshot lacks a payload on disk")
		}
		// A restart replays every payload from the log, and spills again.
		e.Close()
		e = mustNew(t, horizoned(fs, FsyncAlways))
		if after := dump(e); after != before {
			t.Fatalf("after a restart\n%s", diffLines(before, after))
		}
		settleSpill()
		if n := e.Info().DiskJobs; n != 60 {
			t.Fatalf("after a restart: %d payloads on disk, want 60", n)
		}
		// The near jobs fire with their payloads; the far ones come back
		// into memory within half the horizon of their time, and none is
		// handed out early.
		time.Sleep(10 * time.Second)
		for range 60 {
			if d, ok := e.Pop([][]byte{b("q0"), b("q1"), b("q2")}); !ok || len(d.Payload) != 200 {
				t.Fatalf("a near job: %v %q", ok, d.Payload)
			}
		}
		time.Sleep(600_000*time.Millisecond - 10*time.Second - 20*time.Second)
		synctest.Wait()
		if d, ok := e.Pop([][]byte{b("q0"), b("q1"), b("q2")}); ok {
			t.Fatalf("a job handed out 20 s early: %s due %d at %d", d.ID, d.Due, e.Now())
		}
		if n := e.Info().DiskJobs; n != 0 {
			t.Fatalf("%d payloads still on disk 20 s before they are due (horizon 60 s)", n)
		}
		time.Sleep(21 * time.Second)
		for i := range 60 {
			d, ok := e.Pop([][]byte{b("q0"), b("q1"), b("q2")})
			if !ok || string(d.Payload) != fmt.Sprintf("%-*d", 200, 2*i) && len(d.Payload) != 200 {
				t.Fatalf("far job %d: %v %q", i, ok, d.Payload)
			}
			if d.Due > e.Now() {
				t.Fatalf("far job handed out early: due %d at %d", d.Due, e.Now())
			}
		}
		e.Close()
	})
}

// A compaction restates the jobs whose payload is on disk from the
// segment it drops (their payloads come back into memory, and the tail
// spills them again from the head), and a crash at any step of it loses
// nothing: TestCompactionCrashAtEveryStep with payloads on disk.
func TestCompactionWithPayloadsOnDisk(t *testing.T) {
	t.Run("server ids", func(t *testing.T) { testCompactionWithPayloadsOnDisk(t, false) })
	t.Run("client ids", func(t *testing.T) { testCompactionWithPayloadsOnDisk(t, true) })
}

func testCompactionWithPayloadsOnDisk(t *testing.T, withIDs bool) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		rng := rand.New(rand.NewPCG(7, 8))
		var ids []string
		e := mustNew(t, segmented(fs, FsyncAlways))
		churn(t, e, rng, 200, &ids) // FLUSHALL among its writes
		addFarIDs(t, e, 40, 60, withIDs)
		churn(t, e, rng, 60, &ids)
		e.Close()
		// Time moves as the spiller runs: the state to keep is the one
		// when the compaction starts.
		var want string
		check := func(name string, crashed *aof.MemFS) {
			t.Helper()
			c := mustNew(t, segmented(crashed, FsyncAlways))
			defer c.Close()
			if got := dump(c); got != want {
				t.Fatalf("%s: state after the crash differs\n%s", name, diffLines(want, got))
			}
		}
		defer func(c int, s uint32) { compactChunk, compactScan = c, s }(compactChunk, compactScan)
		compactChunk, compactScan = 16, 64
		{
			fs2 := fs.CrashClone()
			e2 := mustNew(t, horizoned(fs2, FsyncAlways))
			settleSpill()
			if n := e2.Info().DiskJobs; n < 30 {
				t.Fatalf("%d payloads on disk before the compaction", n)
			}
			want = dump(e2)
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
			if got := dump(e2); got != want {
				t.Fatalf("after compacting payloads on disk\n%s", diffLines(want, got))
			}
			settleSpill()
			if n := e2.Info().DiskJobs; n < 30 {
				t.Fatalf("%d payloads on disk after the compaction: the head's restatements were not spilled again", n)
			}
			if got := dump(e2); got != want {
				t.Fatalf("after spilling the restatements\n%s", diffLines(want, got))
			}
			e2.Close()
			check("done", fs2.CrashClone())
		}
		for _, op := range []aof.Op{aof.OpWrite, aof.OpSync, aof.OpRename, aof.OpSyncDir, aof.OpRemove} {
			for after := int64(0); after < 6; after++ {
				fs2 := fs.CrashClone()
				e2 := mustNew(t, horizoned(fs2, FsyncAlways))
				settleSpill()
				want = dump(e2)
				n := after
				if op == aof.OpWrite {
					n *= 700
				}
				fs2.Inject(aof.Fault{Op: op, After: n})
				err := e2.journal.Roll()
				for active := e2.journal.Active(); err == nil && e2.journal.Segments()[0] < active; {
					err = e2.compactSegment(e2.journal.Segments()[0])
				}
				check(fmt.Sprintf("op %d after %d (%v)", op, after, err), fs2.CrashClone())
				e2.Close()
			}
		}
	})
}

// A compaction reads the payloads on disk of the jobs it restates without
// the engine's lock (readVictims), not one pread each under it: a read
// the page cache missed held every client for a disk's latency. Counted,
// not timed: the payloads read under the lock (jobs.Table.Payload) stay
// where they were, and the state is the same, after a restart too.
func TestCompactionReadsPayloadsOffTheLock(t *testing.T) {
	t.Run("server ids", func(t *testing.T) { testCompactionReadsPayloadsOffTheLock(t, false) })
	t.Run("client ids", func(t *testing.T) { testCompactionReadsPayloadsOffTheLock(t, true) })
}

func testCompactionReadsPayloadsOffTheLock(t *testing.T, ids bool) {
	synctest.Test(t, func(t *testing.T) {
		defer func(c int) { compactChunk = c }(compactChunk)
		compactChunk = 32 // several steps
		fs := aof.NewMemFS()
		e := mustNew(t, horizoned(fs, FsyncEverySec))
		addFarIDs(t, e, 200, 40, ids)
		settleSpill()
		if n := e.Info().DiskJobs; n != 200 {
			t.Fatalf("%d payloads on disk, want 200", n)
		}
		before := dump(e)
		if err := e.journal.Roll(); err != nil {
			t.Fatal(err)
		}
		locked, all := e.jobs.DiskInfo().Reads, e.journal.PayloadReads()
		compactAll(t, e)
		if n := e.jobs.DiskInfo().Reads - locked; n != 0 {
			t.Errorf("the compaction read %d payloads under the engine's lock, want 0", n)
		}
		if n := e.journal.PayloadReads() - all; n != 200 {
			t.Errorf("the compaction read %d payloads back, want the 200 on disk", n)
		}
		if after := dump(e); after != before {
			t.Fatalf("after the compaction\n%s", diffLines(before, after))
		}
		settleSpill()
		if n := e.Info().DiskJobs; n != 200 {
			t.Fatalf("%d payloads on disk after the compaction, want 200 spilled again", n)
		}
		e.Close()
		e = mustNew(t, horizoned(fs, FsyncEverySec))
		defer e.Close()
		if after := dump(e); after != before {
			t.Fatalf("after the compaction and a restart\n%s", diffLines(before, after))
		}
	})
}

// The spiller spills a compaction's restatements as it tails them, a chunk
// at a time, rather than gathering every candidate first: 20,000 of them
// were a slice of about 1 MB, grown by doubling and scanned by every
// collection meanwhile. Counted in bytes allocated by the round.
func TestSpillerSpillsAsItTails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 20_000
		fs := aof.NewMemFS()
		o := horizoned(fs, FsyncEverySec)
		o.SegmentSize = 8 << 20 // the jobs in one segment
		e := mustNew(t, o)
		defer e.Close()
		var last uint64
		for i := range n {
			res, err := e.Add(AddArgs{Queue: b("q"), Delay: 600_000 + int64(i), Payload: []byte("0123456789abcdef")})
			if err != nil {
				t.Fatal(err)
			}
			last = res.Ticket
		}
		if err := e.WaitDurable(last); err != nil {
			t.Fatal(err)
		}
		settleSpill()
		if d := e.Info().DiskJobs; d != n {
			t.Fatalf("%d payloads on disk, want %d", d, n)
		}
		if err := e.journal.Roll(); err != nil {
			t.Fatal(err)
		}
		compactAll(t, e) // every job restated at the head, its payload in memory again
		synctest.Wait()  // the spiller waits for its tick: this test's round is the one that spills them
		if d := e.Info().DiskJobs; d != 0 {
			t.Fatalf("%d payloads on disk after the compaction, want 0 before the spiller's round", d)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		e.spill(nil)
		runtime.ReadMemStats(&after)
		if d := e.Info().DiskJobs; d != n {
			t.Fatalf("%d payloads on disk after the spiller's round, want %d", d, n)
		}
		got, most := after.TotalAlloc-before.TotalAlloc, uint64(n*unsafe.Sizeof(record.Cand{})/2)
		t.Logf("the round allocated %d bytes", got)
		if got > most {
			t.Errorf("the spiller's round over %d candidates allocated %d bytes, want at most %d", n, got, most)
		}
	})
}

// A rewrite (BGREWRITEAOF) drops every segment: the payloads on disk come
// back into memory as it writes them, and are spilled again from its file.
func TestRewriteWithPayloadsOnDisk(t *testing.T) {
	t.Run("server ids", func(t *testing.T) { testRewriteWithPayloadsOnDisk(t, false) })
	t.Run("client ids", func(t *testing.T) { testRewriteWithPayloadsOnDisk(t, true) })
}

func testRewriteWithPayloadsOnDisk(t *testing.T, ids bool) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, horizoned(fs, FsyncEverySec))
		addFarIDs(t, e, 50, 80, ids)
		before := dump(e)
		settleSpill()
		if n := e.Info().DiskJobs; n != 50 {
			t.Fatalf("%d payloads on disk, want 50", n)
		}
		if err := e.Rewrite(); err != nil {
			t.Fatal(err)
		}
		for e.journal.Rewriting() {
			synctest.Wait()
			time.Sleep(time.Millisecond)
		}
		if after := dump(e); after != before {
			t.Fatalf("after the rewrite\n%s", diffLines(before, after))
		}
		settleSpill()
		if n := e.Info().DiskJobs; n != 50 {
			t.Fatalf("%d payloads on disk after the rewrite, want 50 spilled again", n)
		}
		if after := dump(e); after != before {
			t.Fatalf("after the rewrite and a spill\n%s", diffLines(before, after))
		}
		e.Close()
		e = mustNew(t, horizoned(fs, FsyncEverySec))
		defer e.Close()
		if after := dump(e); after != before {
			t.Fatalf("after the rewrite and a restart\n%s", diffLines(before, after))
		}
	})
}

// With no horizon, or no log of its own, every payload stays in memory.
func TestHorizonOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, o := range []Options{segmented(aof.NewMemFS(), FsyncAlways), {Horizon: 60_000}} {
			e := mustNew(t, o)
			addFar(t, e, 10, 100)
			settleSpill()
			if in := e.Info(); in.DiskJobs != 0 || (o.Horizon != 0 && in.Horizon != 0) {
				t.Fatalf("horizon %d: %d payloads on disk", in.Horizon, in.DiskJobs)
			}
			e.Close()
		}
	})
}

// A job rescheduled beyond the horizon after its add was tailed (the move
// record carries no payload) is restated and spilled from there; one
// rescheduled again before the next round is restated once, as it is
// last; one moved back within the horizon is not; a restart has them all
// as they were, and they are handed out on time with their payloads.
func TestRescheduledBeyondHorizon(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, horizoned(fs, FsyncAlways))
		var ids []string
		for i := range 20 {
			res, err := e.Add(AddArgs{Queue: b("q"), Delay: 5_000, Payload: []byte(fmt.Sprintf("%-100d", i))})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, string(res.ID))
		}
		settleSpill()
		if n := e.Info().DiskJobs; n != 0 {
			t.Fatalf("%d near payloads on disk", n)
		}
		for i, id := range ids[:15] {
			if ok, _, err := e.Reschedule(RescheduleArgs{Queue: b("q"), ID: b(id), Delay: 600_000 + int64(i)}); !ok || err != nil {
				t.Fatalf("reschedule %s: %v %v", id, ok, err)
			}
		}
		for _, id := range ids[:5] { // again: only this move's record is the job's
			if ok, _, err := e.Reschedule(RescheduleArgs{Queue: b("q"), ID: b(id), Delay: 700_000}); !ok || err != nil {
				t.Fatal(ok, err)
			}
		}
		var last uint64
		for _, id := range ids[10:15] { // and back within the horizon
			ok, tk, err := e.Reschedule(RescheduleArgs{Queue: b("q"), ID: b(id), Delay: 6_000})
			if !ok || err != nil {
				t.Fatal(ok, err)
			}
			last = tk
		}
		if err := e.WaitDurable(last); err != nil {
			t.Fatal(err)
		}
		before := dump(e)
		size, _ := e.journal.Sizes()
		settleSpill()
		settleSpill()
		if n := e.Info().DiskJobs; n != 10 {
			t.Fatalf("%d payloads on disk after 10 jobs were rescheduled beyond the horizon, want 10", n)
		}
		if now, _ := e.journal.Sizes(); now-size < 10*100 || now-size > 2*10*(100+64) {
			t.Fatalf("the log grew %d bytes restating 10 jobs of 100 bytes", now-size)
		}
		if after := dump(e); after != before {
			t.Fatalf("restated jobs changed\n%s", diffLines(before, after))
		}
		e.Close()
		e = mustNew(t, horizoned(fs, FsyncAlways))
		if after := dump(e); after != before {
			t.Fatalf("after a restart\n%s", diffLines(before, after))
		}
		time.Sleep(10 * time.Second)
		for range 10 {
			if d, ok := e.Pop([][]byte{b("q")}); !ok || len(d.Payload) != 100 {
				t.Fatalf("a near job: %v %q", ok, d.Payload)
			}
		}
		time.Sleep(700 * time.Second)
		for range 10 {
			d, ok := e.Pop([][]byte{b("q")})
			if !ok || len(d.Payload) != 100 || d.Due > e.Now() {
				t.Fatalf("a far job: %v %q due %d at %d", ok, d.Payload, d.Due, e.Now())
			}
		}
		e.Close()
	})
}

// A restart keeps the payloads of jobs due beyond the horizon on disk as
// it replays their add records: none is in memory when it serves, not
// even before the spiller's first round; one moved to another list later
// in the log keeps its locator until the read-ahead; every reader has
// them as before.
func TestReplayKeepsPayloadsOnDisk(t *testing.T) {
	t.Run("server ids", func(t *testing.T) { testReplayKeepsPayloadsOnDisk(t, false) })
	t.Run("client ids", func(t *testing.T) { testReplayKeepsPayloadsOnDisk(t, true) })
}

func testReplayKeepsPayloadsOnDisk(t *testing.T, ids bool) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, horizoned(fs, FsyncAlways))
		inUse := e.Info().PayloadBytes
		far := addFarIDs(t, e, 60, 200, ids)
		res, err := e.Add(AddArgs{Queue: b("q0"), Delay: 900_000, Payload: []byte("moved to dst")})
		if err != nil {
			t.Fatal(err)
		}
		if ok, _, err := e.Reschedule(RescheduleArgs{Queue: b("q0"), ID: res.ID, Delay: 0}); !ok || err != nil {
			t.Fatal(ok, err)
		}
		d, ok, err := e.Move(b("q0"), b("dst"), MoveEnds{})
		if err != nil || !ok || string(d.Payload) != "moved to dst" {
			t.Fatal(d, ok, err)
		}
		if err := e.WaitDurable(d.Ticket); err != nil {
			t.Fatal(err)
		}
		grown := e.Info().PayloadBytes - inUse
		before := dump(e)
		e.Close()

		e = mustNew(t, horizoned(fs, FsyncAlways))
		in := e.Info()
		// The moved job kept its id: its payload stays where its add put it
		// until the read-ahead brings it back, as it is ready.
		if in.DiskJobs != 61 || in.DiskBytes != 60*200+12 {
			t.Fatalf("after replay: %d payloads on disk (%d bytes), want 61, 12012", in.DiskJobs, in.DiskBytes)
		}
		if in.PayloadBytes-inUse > grown/2+grown/8 {
			t.Fatalf("payload memory %d after replay, %d before the restart: replay copied the far payloads", in.PayloadBytes-inUse, grown)
		}
		if got := e.Range(b("dst"), 0, -1); len(got) != 1 || string(got[0]) != "moved to dst" {
			t.Fatalf("the moved job's payload after replay: %q", got)
		}
		if after := dump(e); after != before {
			t.Fatalf("after a restart\n%s", diffLines(before, after))
		}
		q, id, _ := strings.Cut(far[7], "/")
		if info, ok := e.Get(b(q), b(id)); !ok || info.Payload == nil || string(info.Payload) != fmt.Sprintf("%-*d", 200, 14) {
			t.Fatalf("DELAY.GET %s after replay: %v %q", far[7], ok, info.Payload)
		}
		settleSpill()
		if n := e.Info().DiskJobs; n != 60 {
			t.Fatalf("after the first spill round: %d payloads on disk, want 60", n)
		}
		e.Close()
	})
}

// A replayed record that reads a payload replay kept on disk reads it from
// the log being replayed: a job added far ahead, rescheduled to now,
// popped, and whose reservation expired with no redelivery left is
// dead-lettered during replay (an expiry is derived, not logged), which
// copies its payload.
func TestReplayReadsPayloadKeptOnDisk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, horizoned(fs, FsyncAlways))
		res, err := e.Add(AddArgs{Queue: b("q"), Delay: 900_000, Payload: []byte("to the dead letters"),
			AckTimeout: 1_000, Retry: 0, DeadLetter: b("dl")})
		if err != nil {
			t.Fatal(err)
		}
		if ok, _, err := e.Reschedule(RescheduleArgs{Queue: b("q"), ID: res.ID, Delay: 0}); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if d, ok := e.Pop([][]byte{b("q")}); !ok || string(d.Payload) != "to the dead letters" {
			t.Fatal(d, ok)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		last, err := e.Add(AddArgs{Queue: b("other"), Delay: 5_000, Payload: []byte("later")})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.WaitDurable(last.Ticket); err != nil {
			t.Fatal(err)
		}
		before := dump(e)
		e.Close()
		e = mustNew(t, horizoned(fs, FsyncAlways))
		if after := dump(e); after != before {
			t.Fatalf("after a restart\n%s", diffLines(before, after))
		}
		if d, ok := e.Pop([][]byte{b("dl")}); !ok || string(d.Payload) != "to the dead letters" {
			t.Fatalf("the dead letter after replay: %v %q", ok, d.Payload)
		}
		if d := e.jobs.DiskInfo(); d.Reads == 0 || d.Fails != 0 {
			t.Fatalf("%d payloads read from disk, %d failed: the replay did not read it there", d.Reads, d.Fails)
		}
		e.Close()
	})
}

// Jobs rescheduled beyond the horizon just before a restart (no spill
// round between) come back with their payloads in memory, as replay has
// no copy to point at, and go to disk once the restarted spiller has
// restated them.
func TestRescheduledBeforeRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, horizoned(fs, FsyncAlways))
		var last uint64
		for i := range 20 {
			res, err := e.Add(AddArgs{Queue: b("q"), Delay: 5_000, Payload: []byte(fmt.Sprintf("%-100d", i))})
			if err != nil {
				t.Fatal(err)
			}
			if i%2 == 0 {
				ok, tk, err := e.Reschedule(RescheduleArgs{Queue: b("q"), ID: res.ID, Delay: 600_000})
				if !ok || err != nil {
					t.Fatal(ok, err)
				}
				last = tk
			}
		}
		if err := e.WaitDurable(last); err != nil {
			t.Fatal(err)
		}
		before := dump(e)
		e.Close()
		e = mustNew(t, horizoned(fs, FsyncAlways))
		settleSpill()
		settleSpill()
		if n := e.Info().DiskJobs; n != 10 {
			t.Fatalf("%d payloads on disk after the restart's restatements, want 10", n)
		}
		if after := dump(e); after != before {
			t.Fatalf("after a restart\n%s", diffLines(before, after))
		}
		e.Close()
	})
}
