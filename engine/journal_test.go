package engine

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/finetimer"
	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/journal"
	"github.com/delayd/delayd/record"
)

// dump renders the whole state that replay must reproduce: per queue, the
// ready list in order and the delayed jobs in the order they will fire.
func dump(e *Engine) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var names []string
	for name := range e.byName {
		names = append(names, name)
	}
	slices.Sort(names)
	var sb strings.Builder
	var buf [jobs.SIDLen]byte
	for _, name := range names {
		qi := e.byName[name]
		q := &e.queues[qi]
		fmt.Fprintf(&sb, "%s: ready", name)
		q.Order.Each(&e.jobs.Slab, func(s uint32) bool {
			j := e.jobs.At(s)
			fmt.Fprintf(&sb, " %s=%s/%d", e.jobs.ID(j, &buf), e.jobs.Payload(j), j.Deliveries)
			if g, p := e.laneOf(s); g != nil || p != 0 {
				fmt.Fprintf(&sb, "[%s/%d]", g, p) // group and priority
			}
			if o := e.jobs.Origins[s]; o != nil {
				fmt.Fprintf(&sb, "<%s/%d/%d/%s>", o.Queue, o.AckTimeout, o.Retry, o.DeadLetter) // dead-lettered from
			}
			if r := e.reasonOf(s); r != "" {
				fmt.Fprintf(&sb, "!%q", r) // the last failure reason
			}
			return true
		})
		var delayed []uint32
		for i := range e.jobs.Len() {
			if j := e.jobs.At(i); j.State == jobs.StateDelayed && j.Queue == qi {
				delayed = append(delayed, uint32(i))
			}
		}
		slices.SortFunc(delayed, func(a, b uint32) int {
			ja, jb := e.jobs.At(a), e.jobs.At(b)
			return cmp.Or(cmp.Compare(ja.Due, jb.Due), cmp.Compare(ja.Seq, jb.Seq))
		})
		sb.WriteString(" | delayed")
		for _, s := range delayed {
			j := e.jobs.At(s)
			fmt.Fprintf(&sb, " %s=%s@%d", e.jobs.ID(j, &buf), e.jobs.Payload(j), j.Due)
			if r := e.reasonOf(s); r != "" {
				fmt.Fprintf(&sb, "!%q", r)
			}
		}
		// Reserved jobs in the order they will expire; slots differ after a
		// rewrite, so slot order means nothing.
		var held []uint32
		for i := range e.jobs.Len() {
			if j := e.jobs.At(i); j.State == jobs.StateReserved && j.Queue == qi {
				held = append(held, uint32(i))
			}
		}
		deadline := func(s uint32) int64 { d, _ := e.wheel.Due(s); return d }
		slices.SortFunc(held, func(a, b uint32) int {
			return cmp.Or(cmp.Compare(deadline(a), deadline(b)), cmp.Compare(e.jobs.At(a).Seq, e.jobs.At(b).Seq))
		})
		sb.WriteString(" | reserved")
		for _, s := range held {
			j := e.jobs.At(s)
			fmt.Fprintf(&sb, " %s=%s/%d@%d", e.jobs.ID(j, &buf), e.jobs.Payload(j), j.Deliveries, deadline(s))
			if r := e.reasonOf(s); r != "" {
				fmt.Fprintf(&sb, "!%q", r)
			}
		}
		sb.WriteString("\n")
	}
	for _, r := range record.LimitRecs(nil, &e.limits, 0) {
		fmt.Fprintf(&sb, "limit %s=%+v\n", r.Queue, r.Limit)
	}
	for _, r := range record.PauseRecs(nil, &e.limits, 0) {
		fmt.Fprintf(&sb, "paused %s\n", r.Queue)
	}
	return sb.String()
}

func logged(fs aof.FS, fsync string) Options {
	return Options{AppendOnly: true, Dir: "/data", FS: fs, Fsync: fsync, RewritePercent: 0}
}

// exact is logged: reservations stay as the log left them (deadlines
// included), so a test can compare the replayed state with the state before
// the stop.
func exact(fs aof.FS, fsync string) Options { return logged(fs, fsync) }

func mustNew(t *testing.T, o Options) *Engine {
	t.Helper()
	e, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// churn applies random writes, waiting for each to be durable.
func churn(t *testing.T, e *Engine, rng *rand.Rand, n int, ids *[]string) {
	t.Helper()
	for i := range n {
		q := []byte(fmt.Sprintf("q%d", rng.IntN(3)))
		switch r := rng.IntN(10); {
		case r < 5:
			a := AddArgs{Queue: q, Delay: []int64{0, 1, 50, 64, 5000, 100_000}[rng.IntN(6)], Payload: []byte(fmt.Sprint("p", i)),
				AckTimeout: []int64{0, 0, 30, 100_000}[rng.IntN(4)], Retry: int64(rng.IntN(3)) - 1}
			if rng.IntN(3) == 0 {
				a.DeadLetter = []byte("dlq")
			}
			if rng.IntN(4) == 0 && len(*ids) > 0 {
				a.ID = []byte((*ids)[rng.IntN(len(*ids))])
				a.Replace = true
			}
			res, err := e.Add(a)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.WaitDurable(res.Ticket); err != nil {
				t.Fatal(err)
			}
			*ids = append(*ids, string(res.ID))
		case r < 6:
			if len(*ids) > 0 {
				_, tk, _ := e.Cancel(q, [][]byte{[]byte((*ids)[rng.IntN(len(*ids))])})
				if err := e.WaitDurable(tk); err != nil {
					t.Fatal(err)
				}
			}
		case r < 7 && len(*ids) > 0:
			id := []byte((*ids)[rng.IntN(len(*ids))])
			var tk uint64
			switch rng.IntN(3) {
			case 0:
				_, tk, _ = e.Ack(q, [][]byte{id})
			case 1:
				_, tk, _ = e.NackReason(q, id, []int64{0, 70}[rng.IntN(2)], [][]byte{nil, []byte("boom " + string(id))}[rng.IntN(2)])
			default:
				_, tk, _ = e.Touch(q, id)
			}
			if err := e.WaitDurable(tk); err != nil {
				t.Fatal(err)
			}
		case r < 9:
			if d, ok := e.Pop([][]byte{q}); ok {
				if err := e.WaitDurable(d.Ticket); err != nil {
					t.Fatal(err)
				}
				if rng.IntN(4) == 0 {
					e.Requeue(d) // the client left as the job was handed over
				}
			}
		case rng.IntN(2) == 0:
			churnMove(t, e, rng, q) // move_test.go
		default:
			sleep(time.Duration(rng.IntN(80)) * time.Millisecond)
		}
	}
}

func TestRestartRestoresExactState(t *testing.T) {
	for _, fsync := range []string{FsyncAlways, FsyncEverySec, FsyncNo} {
		t.Run(fsync, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fs := aof.NewMemFS()
				rng := rand.New(rand.NewPCG(1, 2))
				var ids []string
				e := mustNew(t, exact(fs, fsync))
				for round := range 8 {
					churn(t, e, rng, 400, &ids)
					before := dump(e)
					lastSID := e.lastSID
					if err := e.Close(); err != nil {
						t.Fatal(err)
					}
					e = mustNew(t, exact(fs, fsync))
					if after := dump(e); after != before {
						t.Fatalf("round %d: state after restart differs\nbefore:\n%s\nafter:\n%s", round, before, after)
					}
					if e.lastSID != lastSID {
						t.Fatalf("round %d: last server id %x, want %x", round, e.lastSID, lastSID)
					}
				}
				e.Close()
			})
		})
	}
}

func TestJobsDueWhileDownBecomeReadyInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, logged(fs, FsyncAlways))
		due := e.Now() + 10_000
		addAt(t, e, "q", due, "b", "b")
		addAt(t, e, "q", due-5, "a", "a")
		addAt(t, e, "q", due, "c", "c")
		add(t, e, "q", 60_000, "later")
		e.Close()
		time.Sleep(30 * time.Second) // the server is down
		e = mustNew(t, logged(fs, FsyncAlways))
		defer e.Close()
		if got := drain(e, "q"); !slices.Equal(got, []string{"a", "b", "c"}) {
			t.Fatalf("after restart %v, want [a b c]", got)
		}
		sleep(30 * time.Second)
		if got := drain(e, "q"); !slices.Equal(got, []string{"later"}) {
			t.Fatalf("later job: %v", got)
		}
		// Ids stay unique across restarts, even for the same millisecond.
		id := add(t, e, "q", 0, "x")
		if id <= "0000000000000000" {
			t.Fatal(id)
		}
	})
}

func TestCrashUnderAlwaysLosesNoAcknowledgedWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, logged(fs, FsyncAlways))
		var acked []string
		for i := range 300 {
			res, err := e.Add(AddArgs{Queue: b("q"), Delay: 100_000, Payload: []byte(fmt.Sprint(i))})
			if err != nil {
				t.Fatal(err)
			}
			if e.WaitDurable(res.Ticket) == nil {
				acked = append(acked, string(res.ID))
			}
			if i%97 == 0 {
				// A crash now: whatever was not fsynced is gone.
				c := mustNew(t, logged(fs.CrashClone(), FsyncAlways))
				for _, id := range acked {
					if _, ok := c.Get(b("q"), []byte(id)); !ok {
						t.Fatalf("acknowledged job %s lost in a crash after %d adds", id, i+1)
					}
				}
				c.Close()
			}
		}
		e.Close()
	})
}

func TestFailedWriteIsNotApplied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, logged(fs, FsyncEverySec))
		addAt(t, e, "q", 0, "kept", "k")
		e.WaitDurable(e.journal.Ticket())
		_, w, _ := e.PopOrWait([][]byte{b("other")}, PopDelay) // a blocked client survives the reload

		fs.Inject(aof.Fault{Op: aof.OpWrite, Path: seg1}) // one write fails (disk full)
		res, err := e.Add(AddArgs{Queue: b("q"), ID: b("lost"), Payload: b("x")})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.WaitDurable(res.Ticket); !errors.Is(err, ErrLog) {
			t.Fatalf("wait after failed write: %v", err)
		}
		if _, ok := e.Get(b("q"), b("lost")); ok {
			t.Fatal("a write whose log write failed was applied")
		}
		if _, ok := e.Get(b("q"), b("kept")); !ok {
			t.Fatal("an earlier durable job was lost by the reload")
		}
		// The disk recovered: after a probe writes go on, and the blocked
		// client still gets served.
		sleep(journal.ProbeEvery)
		res, err = e.Add(AddArgs{Queue: b("other"), ID: b("next"), Payload: b("y")})
		if err != nil || e.WaitDurable(res.Ticket) != nil {
			t.Fatalf("write after recovery: %v", err)
		}
		<-w.Ready()
		if d, ok := w.Result(); !ok || string(d.ID) != "next" {
			t.Fatalf("blocked client after reload got %+v %v", d, ok)
		}
		e.Close()
		e = mustNew(t, logged(fs, FsyncEverySec))
		defer e.Close()
		if _, ok := e.Get(b("q"), b("lost")); ok {
			t.Fatal("failed write present after restart")
		}
		if _, ok := e.Get(b("q"), b("kept")); !ok {
			t.Fatal("kept job missing after restart")
		}
	})
}

func TestFailedFsyncRefusesWritesButServesPops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, logged(fs, FsyncAlways))
		defer e.Close()
		add(t, e, "q", 0, "ready")
		e.WaitDurable(e.journal.Ticket())
		fs.Inject(aof.Fault{Op: aof.OpSync, Path: seg1, Sticky: true})
		res, _ := e.Add(AddArgs{Queue: b("q"), Payload: b("x")})
		if err := e.WaitDurable(res.Ticket); !errors.Is(err, ErrLog) {
			t.Fatalf("wait after failed fsync: %v", err)
		}
		if _, err := e.Add(AddArgs{Queue: b("q"), Payload: b("y")}); !errors.Is(err, ErrLog) {
			t.Fatalf("write while the log is broken: %v", err)
		}
		if d, ok := e.Pop([][]byte{b("q")}); !ok || string(d.Payload) != "ready" {
			t.Fatalf("pop while the log is broken: %+v %v", d, ok)
		}
		if !strings.Contains(fmt.Sprint(e.Persistence()), "aof_last_write_status err") {
			t.Fatalf("INFO persistence does not show the failure: %v", e.Persistence())
		}
	})
}

func TestRewriteUnderWritesKeepsState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		rng := rand.New(rand.NewPCG(3, 4))
		var ids []string
		e := mustNew(t, exact(fs, FsyncEverySec))
		churn(t, e, rng, 3000, &ids)
		logSize := e.journal.Sizes
		sizeBefore, _ := logSize()
		// The rewrite waits at its first pause until the second has been
		// refused: a small state is otherwise rewritten before the test's
		// next line runs on a busy machine.
		release := make(chan struct{})
		defer func(f func(*finetimer.Timer)) { rewriteYield = f }(rewriteYield)
		yield := rewriteYield
		rewriteYield = func(ft *finetimer.Timer) { <-release; yield(ft) }
		if err := e.Rewrite(); err != nil {
			t.Fatal(err)
		}
		if err := e.Rewrite(); !errors.Is(err, ErrRewriteRunning) {
			t.Fatalf("second rewrite: %v", err)
		}
		close(release)
		churn(t, e, rng, 300, &ids) // writes go on while it runs
		waitRewrite(e)
		churn(t, e, rng, 300, &ids)
		before := dump(e)
		if _, base := logSize(); base >= sizeBefore {
			t.Fatalf("rewrite did not shrink the log: %d -> %d", sizeBefore, base)
		}
		e.Close()
		e = mustNew(t, exact(fs, FsyncEverySec))
		defer e.Close()
		if after := dump(e); after != before {
			t.Fatalf("state after rewrite and restart differs\nbefore:\n%s\nafter:\n%s", before, after)
		}
	})
}

func TestCorruptLogRefusesToStartUnlessRepaired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, logged(fs, FsyncAlways))
		for i := range 20 {
			add(t, e, "q", 1000, fmt.Sprint(i))
		}
		e.Close()
		path := seg1
		data, _ := fs.ReadFile(path)
		data[len(data)/2] ^= 0x40
		fs.WriteFile(path, data)
		_, err := New(logged(fs, FsyncAlways))
		var ce *aof.CorruptError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), path) {
			t.Fatalf("start on a corrupt log: %v", err)
		}
		o := logged(fs, FsyncAlways)
		o.Repair = true
		e = mustNew(t, o)
		defer e.Close()
		if s := e.QueueStats(b("q")); s.Delayed == 0 || s.Delayed >= 20 {
			t.Fatalf("after repair: %+v (want the records before the damage)", s)
		}
		if _, err := fs.ReadFile(path + aof.BrokenSuffix); err != nil {
			t.Fatalf("cut part not kept: %v", err)
		}
	})
}

// A write that fails while a rewrite runs is undone in memory; the rewrite,
// whose tail already holds that write, must then be abandoned, or the write
// would come back at the next start.
func TestFailedWriteAbandonsRewrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, exact(aof.SlowSync(fs, time.Millisecond), FsyncEverySec))
		for i := range 2000 {
			add(t, e, "q", 60_000, fmt.Sprint(i))
		}
		e.WaitDurable(e.journal.Ticket())
		before := dump(e)
		if err := e.Rewrite(); err != nil {
			t.Fatal(err)
		}
		// The rewrite's fsync takes a (fake) millisecond; this write fails
		// before it can finish.
		fs.Inject(aof.Fault{Op: aof.OpWrite, Path: seg1})
		res, err := e.Add(AddArgs{Queue: b("q"), ID: b("undone"), Payload: b("x"), Retry: -1})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.WaitDurable(res.Ticket); !errors.Is(err, ErrLog) {
			t.Fatalf("write during the rewrite: %v", err)
		}
		sleep(10 * time.Millisecond)
		if got := fmt.Sprint(e.Persistence()); !strings.Contains(got, "aof_last_bgrewrite_status err") {
			t.Fatalf("rewrite not abandoned: %v", got)
		}
		e.Close()
		e = mustNew(t, exact(fs, FsyncEverySec))
		defer e.Close()
		if _, ok := e.Get(b("q"), b("undone")); ok {
			t.Fatal("the undone write came back after a restart")
		}
		if after := dump(e); after != before {
			t.Fatal("state after restart differs from the state before the failed write")
		}
	})
}

// logSize is how many bytes of the log have been written (not necessarily
// fsynced): what a kill -9 would leave.
func logSize(t *testing.T, fs *aof.MemFS) int {
	t.Helper()
	data, err := fs.ReadFile(seg1)
	if err != nil {
		t.Fatal(err)
	}
	return len(data)
}

// Under everysec the records the timer goroutine makes (here the
// reservation of a waiter it serves) are written by that goroutine at the
// end of its round, not left for the flusher's next tick (1 s and 2 s here;
// the job fires at 1.5 s), nor for the waiter's client: it may be gone.
func TestTimerMadeRecordsAreWrittenAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, logged(fs, FsyncEverySec))
		defer e.Close()
		res, err := e.Add(AddArgs{Queue: b("q"), Delay: 1500, Payload: b("p"), AckTimeout: 30_000})
		if err != nil || e.WaitDurable(res.Ticket) != nil {
			t.Fatal("add", err)
		}
		_, w, err := e.PopOrWait([][]byte{b("q")}, PopDelay)
		if err != nil || w == nil {
			t.Fatalf("pop: %v, %v; want to wait", w, err)
		}
		synctest.Wait()
		before := logSize(t, fs)
		time.Sleep(1501 * time.Millisecond)
		synctest.Wait()
		if d, ok := w.Result(); !ok || !d.Reserved {
			t.Fatalf("waiter: %+v, %v; want the job, reserved", d, ok)
		}
		if after := logSize(t, fs); after <= before {
			t.Fatalf("the reservation is not in the log file (%d bytes, %d before it)", after, before)
		}
	})
}

// A record whose writer never waits for it (a client gone before its
// reply) and that wakes nobody is written by the flusher's tick at the
// latest.
func TestUnclaimedRecordsAreWrittenByTheTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, logged(fs, FsyncNo))
		defer e.Close()
		// The first add moves the timer's deadline, and the timer
		// goroutine's round writes it; the second is later than that
		// deadline and wakes no one.
		if _, err := e.Add(AddArgs{Queue: b("q"), Delay: 30_000, Payload: b("p")}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		before := logSize(t, fs)
		if _, err := e.Add(AddArgs{Queue: b("q"), Delay: 60_000, Payload: b("p")}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1100 * time.Millisecond)
		synctest.Wait()
		if after := logSize(t, fs); after <= before {
			t.Fatalf("a record no one waited for is not in the log file after a second (%d bytes, %d before it)", after, before)
		}
	})
}

// A rewrite lets go of the lock and yields after each chunk it copies:
// with one P, a client woken by the unlock would otherwise wait until the
// rewrite's goroutine is preempted, most likely mid-chunk with the lock
// held (20-40 ms at a time for 500k jobs). Each yield finds the lock free
// and a write made there lands in the new log.
func TestRewriteYieldsBetweenChunks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, exact(fs, FsyncEverySec))
		const jobs = 3*rewriteChunk + 10
		for i := range jobs {
			add(t, e, "q", 60_000, fmt.Sprint(i))
		}
		yields, held := 0, 0
		defer func(f func(*finetimer.Timer)) { rewriteYield = f }(rewriteYield)
		rewriteYield = func(*finetimer.Timer) {
			yields++
			// Another of the engine's goroutines (the flusher, the spiller)
			// may hold the lock for a moment: only a lock that stays held
			// while fake time passes is the rewrite's own.
			free := false
			for range 100 {
				if e.mu.m.TryLock() {
					free = true
					break
				}
				time.Sleep(time.Millisecond)
			}
			if !free {
				held++
				return
			}
			e.mu.m.Unlock()
			add(t, e, "mid", 1000, fmt.Sprint("during chunk ", yields))
		}
		if err := e.Rewrite(); err != nil {
			t.Fatal(err)
		}
		waitRewrite(e)
		if want := (jobs + rewriteChunk - 1) / rewriteChunk; yields < want || held != 0 {
			e.Close()
			t.Fatalf("rewrite of %d jobs yielded %d times (want %d), %d of them holding the lock", jobs, yields, want, held)
		}
		before := dump(e)
		e.Close()
		e = mustNew(t, exact(fs, FsyncEverySec))
		defer e.Close()
		if after := dump(e); after != before {
			t.Fatalf("state after rewrite and restart differs\nbefore:\n%s\nafter:\n%s", before, after)
		}
		if s := e.QueueStats(b("mid")); s.Delayed != yields {
			t.Fatalf("writes made between chunks: %d after restart, want %d", s.Delayed, yields)
		}
	})
}

// seg1 is the first segment of a log a test started empty: the file
// appends go to until it rolls or is rewritten.
var seg1 = aof.SegPath("/data/"+LogFile, 1)

// logSegs returns the segments the log's manifest names, oldest first.
func logSegs(fs aof.FS) []string {
	ids, _, _ := aof.ReadManifest(fs, "/data/"+LogFile)
	var paths []string
	for _, id := range ids {
		paths = append(paths, aof.SegPath("/data/"+LogFile, id))
	}
	return paths
}

// readLog returns the bytes of every segment of the log, in order.
func readLog(fs *aof.MemFS) []byte {
	var all []byte
	for _, p := range logSegs(fs) {
		b, _ := fs.ReadFile(p)
		all = append(all, b...)
	}
	return all
}

// Between chunks a rewrite sleeps on its fine timer, so the runtime polls
// the network: with one P a goroutine whose socket (here a pipe) became
// readable runs during the first pause. With runtime.Gosched alone it ran
// only once sysmon polled, 10-20 ms later, however many chunks passed.
func TestRewriteYieldLetsThePollerRun(t *testing.T) {
	ft, err := finetimer.New()
	if err != nil {
		t.Skip(err)
	}
	defer ft.Close()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	var ran atomic.Bool
	go func() {
		var b [1]byte
		r.Read(b[:]) // parks on the poller
		ran.Store(true)
	}()
	runtime.Gosched() // the reader parks
	if _, err := w.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	for chunk := range 2 {
		spin := time.Now()
		for time.Since(spin) < 50*time.Microsecond {
		}
		rewriteYield(ft)
		if ran.Load() {
			return
		}
		t.Logf("the reader had not run after pause %d", chunk+1)
	}
	t.Fatal("a goroutine whose pipe was readable did not run during two of the rewrite's pauses")
}
