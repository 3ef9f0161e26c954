package engine

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/finetimer"
)

// segmented is logged with small segments, so a few hundred writes make
// several.
func segmented(fs aof.FS, fsync string) Options {
	o := exact(fs, fsync)
	o.SegmentSize = 1 << 10
	return o
}

// compactSegment compacts segment id, the oldest sealed one, as a round
// does, then calls compactDropped (set by a test to crash there).
func (e *Engine) compactSegment(id uint64) error {
	if err := e.journal.CompactSegment(id, compactor{e}); err != nil {
		return err
	}
	if compactDropped != nil {
		compactDropped()
	}
	return nil
}

var compactDropped func()

// compactAll compacts every segment sealed when it starts, oldest first,
// as a round does when every one is worth it.
func compactAll(t *testing.T, e *Engine) int {
	t.Helper()
	n := 0
	for active := e.journal.Active(); ; n++ {
		segs := e.journal.Segments()
		if len(segs) < 2 || segs[0] >= active {
			return n
		}
		if err := e.compactSegment(segs[0]); err != nil {
			t.Fatal(err)
		}
	}
}

// A segmented log rolls as it grows, and compacting its sealed segments
// changes nothing a restart sees (the ready lines in order, delayed and
// reserved jobs, dead letters, limits and pauses), under every fsync
// policy; the dropped segments' files are gone.
func TestCompactionKeepsExactState(t *testing.T) {
	for _, fsync := range []string{FsyncAlways, FsyncEverySec, FsyncNo} {
		t.Run(fsync, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fs := aof.NewMemFS()
				rng := rand.New(rand.NewPCG(3, 4))
				var ids []string
				e := mustNew(t, segmented(fs, fsync))
				e.SetPaused(b("q1"), true)
				flowLimit(t, e, "q2", LimitSpec{Rate: 5, Per: 1000})
				for round := range 5 {
					churn(t, e, rng, 300, &ids)
					before := dump(e)
					segs := e.journal.Segments()
					if len(segs) < 3 {
						t.Fatalf("round %d: %d segments after 300 writes of 1 KiB segments", round, len(segs))
					}
					if n := compactAll(t, e); n != len(segs)-1 {
						t.Fatalf("round %d: compacted %d of %d", round, n, len(segs)-1)
					}
					if after := dump(e); after != before {
						t.Fatalf("round %d: compaction changed the live state\n%s", round, diffLines(before, after))
					}
					for _, id := range segs[:len(segs)-1] {
						if _, err := fs.Stat(aof.SegPath("/data/"+LogFile, id)); err == nil {
							t.Fatalf("round %d: compacted segment %d still on disk", round, id)
						}
					}
					if err := e.Close(); err != nil {
						t.Fatal(err)
					}
					e = mustNew(t, segmented(fs, fsync))
					if after := dump(e); after != before {
						t.Fatalf("round %d: state after compaction and restart differs\n%s", round, diffLines(before, after))
					}
				}
				e.Close()
			})
		})
	}
}

// Ready jobs keep their place in line across a compaction, whichever
// segment each was written in: a backlog of ready jobs added over several
// segments, with a few popped, handed back to the head, and added again.
func TestCompactionKeepsReadyOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, segmented(fs, FsyncAlways))
		for i := range 300 {
			a := AddArgs{Queue: b("q"), Payload: []byte(fmt.Sprint("job-", i)), AckTimeout: 100_000}
			if i%3 == 0 {
				a.Priority = 2
			}
			res, err := e.Add(a)
			if err != nil {
				t.Fatal(err)
			}
			e.WaitDurable(res.Ticket)
			if i%50 == 49 {
				d, ok := e.Pop([][]byte{b("q")})
				if !ok {
					t.Fatal("nothing to pop")
				}
				e.WaitDurable(d.Ticket)
				if i%100 == 99 {
					_, tk, _ := e.NackReason(b("q"), d.ID, 0, nil) // back to the head
					e.WaitDurable(tk)
				}
			}
		}
		before := dump(e)
		if !strings.Contains(before, "job-299") {
			t.Fatalf("dump lacks the last job:\n%s", before)
		}
		if err := e.journal.Roll(); err != nil {
			t.Fatal(err)
		}
		compactAll(t, e)
		e.Close()
		e = mustNew(t, segmented(fs, FsyncAlways))
		defer e.Close()
		if after := dump(e); after != before {
			t.Fatalf("ready order changed by a compaction\n%s", diffLines(before, after))
		}
	})
}

// A crash at any step of a compaction (between its chunks, or at any
// write, fsync, rename or directory fsync of its restatements, of a
// roll, of the manifest, or of the drop) loses nothing acknowledged and
// doubles nothing: the log opens to the state before it.
func TestCompactionCrashAtEveryStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		rng := rand.New(rand.NewPCG(5, 6))
		var ids []string
		e := mustNew(t, segmented(fs, FsyncAlways))
		churn(t, e, rng, 250, &ids)
		want := dump(e)
		e.Close()
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
		// Between chunks: the yield is where the lock is let go.
		{
			fs2 := fs.CrashClone()
			e2 := mustNew(t, segmented(fs2, FsyncAlways))
			steps := 0
			defer func(f func(*finetimer.Timer)) { rewriteYield = f }(rewriteYield)
			rewriteYield = func(*finetimer.Timer) {
				steps++
				check(fmt.Sprintf("chunk %d", steps), fs2.CrashClone())
			}
			defer func() { compactDropped = nil }()
			compactDropped = func() { check("dropped", fs2.CrashClone()) }
			compactAll(t, e2)
			compactDropped = nil
			if steps < 4 {
				t.Fatalf("%d chunks: the test crashes too little", steps)
			}
			e2.Close()
			check("done", fs2.CrashClone())
		}
		// At every filesystem operation of a roll and a compaction.
		fired := 0
		for _, op := range []aof.Op{aof.OpWrite, aof.OpSync, aof.OpRename, aof.OpSyncDir, aof.OpOpen, aof.OpRemove} {
			for after := int64(0); after < 8; after++ {
				fs2 := fs.CrashClone()
				e2 := mustNew(t, segmented(fs2, FsyncAlways))
				n := after
				if op == aof.OpWrite {
					n *= 700 // bytes
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
		if fired < 20 {
			t.Fatalf("only %d injected faults fired", fired)
		}
	})
}

// The automatic rewrite's settings start a compaction round on a
// segmented log, which brings the log back near the live set.
func TestAutoCompaction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		o := segmented(fs, FsyncEverySec)
		o.RewritePercent, o.RewriteMinSize = 100, 16<<10
		e := mustNew(t, o)
		for i := range 3000 {
			res, err := e.Add(AddArgs{Queue: b("q"), Delay: 100_000, Payload: []byte(fmt.Sprint("p", i))})
			if err != nil {
				t.Fatal(err)
			}
			e.WaitDurable(res.Ticket)
			if i%10 != 0 {
				_, tk, _ := e.Cancel(b("q"), [][]byte{res.ID})
				e.WaitDurable(tk)
			}
			synctest.Wait()
		}
		for e.journal.Compacting() {
			synctest.Wait()
		}
		done := e.journal.CompactionInfo().Done
		if done == 0 {
			t.Fatal("no automatic compaction")
		}
		info := map[string]string{}
		for _, kv := range e.Persistence() {
			info[kv[0]] = kv[1]
		}
		if info["aof_compactions"] != strconv.FormatUint(done, 10) || info["aof_segments"] == "" ||
			info["aof_compaction_in_progress"] != "0" || info["aof_rewrite_in_progress"] != "0" || info["aof_live_bytes"] == "0" {
			t.Errorf("INFO persistence after automatic compactions: %v", info)
		}
		size, _ := e.journal.Sizes()
		if size > 64<<10 {
			t.Fatalf("log of %d bytes for 300 jobs", size)
		}
		before := dump(e)
		e.Close()
		e = mustNew(t, o)
		defer e.Close()
		if after := dump(e); after != before {
			t.Fatalf("after automatic compactions and a restart\n%s", diffLines(before, after))
		}
	})
}

// Under always, a crash at any point of a log that rolls (segments made
// ahead by PrepareNext, or at the roll) loses no acknowledged write and
// doubles none.
func TestRollCrashUnderAlwaysLosesNoAcknowledgedWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		o := segmented(fs, FsyncAlways)
		o.SegmentSize = 512
		e := mustNew(t, o)
		var acked []string
		for i := range 400 {
			res, err := e.Add(AddArgs{Queue: b("q"), Delay: 100_000, Payload: []byte(fmt.Sprint(i))})
			if err != nil {
				t.Fatal(err)
			}
			if e.WaitDurable(res.Ticket) == nil {
				acked = append(acked, string(res.ID))
			}
			if i%3 == 0 {
				_, tk, _ := e.Cancel(b("q"), [][]byte{res.ID})
				if e.WaitDurable(tk) == nil {
					acked = acked[:len(acked)-1]
				}
			}
			if i%23 == 0 {
				c := mustNew(t, segmented(fs.CrashClone(), FsyncAlways))
				st := c.QueueStats(b("q"))
				if int(st.Delayed) != len(acked) {
					t.Fatalf("after %d adds and a crash: %d jobs, %d acknowledged", i+1, st.Delayed, len(acked))
				}
				for _, id := range acked {
					if _, ok := c.Get(b("q"), []byte(id)); !ok {
						t.Fatalf("acknowledged job %s lost in a crash after %d adds", id, i+1)
					}
				}
				c.Close()
			}
		}
		if rolls := e.journal.SegmentInfo().Rolls; rolls < 10 {
			t.Fatalf("%d rolls: the test crashes across too few", rolls)
		}
		e.Close()
	})
}

// A rewrite (BGREWRITEAOF) makes its file the only segment, and the jobs
// it wrote are homed in segments that are gone: compacting that file
// later must restate them too, or they are lost with it.
func TestCompactionAfterRewriteKeepsJobs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, segmented(fs, FsyncAlways))
		for i := range 100 {
			res, err := e.Add(AddArgs{Queue: b("q"), Delay: 100_000, Payload: []byte(fmt.Sprint("job-", i))})
			if err != nil {
				t.Fatal(err)
			}
			e.WaitDurable(res.Ticket)
		}
		if err := e.Rewrite(); err != nil {
			t.Fatal(err)
		}
		for e.journal.Rewriting() {
			synctest.Wait()
			time.Sleep(time.Millisecond)
		}
		before := dump(e)
		if err := e.journal.Roll(); err != nil {
			t.Fatal(err)
		}
		compactAll(t, e)
		e.Close()
		e = mustNew(t, segmented(fs, FsyncAlways))
		defer e.Close()
		if after := dump(e); after != before {
			t.Fatalf("jobs lost by compacting a rewrite's file\n%s", diffLines(before, after))
		}
	})
}

// A compaction's chunk ends when its hold of the lock reaches compactHold,
// not only after compactChunk jobs: with no time to spare every 64 jobs
// restated end one, and the restart sees the same state.
func TestCompactionChunkEndsAtItsHold(t *testing.T) {
	for _, hold := range []time.Duration{time.Hour, 0} {
		t.Run(hold.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				defer func(d time.Duration) { compactHold = d }(compactHold)
				compactHold = hold
				fs := aof.NewMemFS()
				e := mustNew(t, exact(fs, FsyncEverySec))
				for i := range 1000 {
					add(t, e, "q", 60_000+int64(i), "p"+strconv.Itoa(i))
				}
				before := dump(e)
				if err := e.journal.Roll(); err != nil {
					t.Fatal(err)
				}
				yields := 0
				defer func(f func(*finetimer.Timer)) { rewriteYield = f }(rewriteYield)
				rewriteYield = func(*finetimer.Timer) { yields++ }
				if err := e.compactSegment(e.journal.Segments()[0]); err != nil {
					t.Fatal(err)
				}
				want := 1 // 1,000 jobs: one chunk
				if hold == 0 {
					want = (1000 + 63) / 64
				}
				if yields != want {
					t.Fatalf("compactHold %v: %d chunks for 1,000 jobs, want %d", hold, yields, want)
				}
				e.Close()
				e = mustNew(t, exact(fs, FsyncEverySec))
				defer e.Close()
				if after := dump(e); after != before {
					t.Fatalf("state after compaction and restart differs\n%s", diffLines(before, after))
				}
			})
		})
	}
}
