package engine

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/journal"
)

// Isolation cannot be shown under synctest (a goroutine waiting for the
// held lock is not durably blocked, so the fake clock would stop): these two
// tests use real goroutines and the real clock, and wait on nothing but the
// engine.

func TestAtomicRunsAloneAmongConcurrentWriters(t *testing.T) {
	e := newEngine(t, Options{})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				e.Push(b("q"), [][]byte{b("other")}, false)
				e.ListPop(b("q"), 1, true)
			}
		}()
	}
	for i := range 300 {
		var before, after int
		_, err := e.Atomic(func(tx *Engine) {
			before = tx.Len(b("q"))
			for range 10 {
				if _, _, err := tx.Push(b("q"), [][]byte{b("mine")}, false); err != nil {
					t.Error(err)
				}
			}
			after = tx.Len(b("q"))
			tx.ListPop(b("q"), 10, true)
		})
		if err != nil {
			t.Fatal(err)
		}
		if after-before != 10 {
			t.Fatalf("transaction %d: another client's command ran inside it: length %d -> %d after 10 pushes", i, before, after)
		}
	}
	close(stop)
	wg.Wait()
}

func TestAtomicTimeStandsStill(t *testing.T) {
	e := newEngine(t, Options{})
	start := time.Now()
	var statsInside QueueStats
	var nowIn, nowLater int64
	e.Atomic(func(tx *Engine) {
		nowIn = tx.Now()
		if _, err := tx.Add(AddArgs{Queue: b("q"), Delay: 1, Payload: b("x")}); err != nil {
			t.Error(err)
		}
		for time.Since(start) < 30*time.Millisecond {
			// Busy: the job is due, and the timer goroutine waits for the lock.
		}
		statsInside = tx.QueueStats(b("q"))
		nowLater = tx.Now()
	})
	if nowIn != nowLater || statsInside.Delayed != 1 || statsInside.Ready != 0 {
		t.Fatalf("time moved inside the transaction: now %d -> %d, stats %+v", nowIn, nowLater, statsInside)
	}
	// Outside, the job fires at once.
	_, w, err := e.PopOrWait([][]byte{b("q")}, PopDelay)
	if err != nil {
		t.Fatal(err)
	}
	if w != nil {
		select {
		case <-w.Ready():
		case <-time.After(5 * time.Second):
			t.Fatal("the job did not fire after the transaction")
		}
	}
}

func TestAtomicServesBlockedClientsAfterIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		_, w, err := e.PopOrWait([][]byte{b("q")}, PopLeft)
		if err != nil || w == nil {
			t.Fatalf("park: %v %v", w, err)
		}
		var lenInside int
		e.Atomic(func(tx *Engine) {
			tx.Push(b("q"), [][]byte{b("x")}, false)
			lenInside = tx.Len(b("q"))
			select {
			case <-w.Ready():
				t.Error("the blocked client was served inside the transaction")
			default:
			}
		})
		if lenInside != 1 {
			t.Fatalf("LLEN inside the transaction after RPUSH: %d, want 1 (Redis serves blocked clients after EXEC)", lenInside)
		}
		<-w.Ready()
		if d, ok := w.Result(); !ok || string(d.Payload) != "x" {
			t.Fatalf("blocked client got %+v %v", d, ok)
		}
		if n := e.Len(b("q")); n != 0 {
			t.Fatalf("length after: %d", n)
		}
	})
}

func TestAtomicRefusesWhatWouldWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, logged(fs, FsyncAlways))
		defer e.Close()
		var kept *Engine
		e.Atomic(func(tx *Engine) {
			kept = tx
			if _, w, err := tx.PopOrWait([][]byte{b("empty")}, PopDelay); w != nil || !errors.Is(err, ErrInTransaction) {
				t.Errorf("PopOrWait parked inside a transaction: %v %v", w, err)
			}
			res, _ := tx.Add(AddArgs{Queue: b("q"), Payload: b("x")})
			if err := tx.WaitDurable(res.Ticket); !errors.Is(err, ErrInTransaction) {
				t.Errorf("WaitDurable inside: %v", err)
			}
			if err := tx.Rewrite(); !errors.Is(err, ErrInTransaction) {
				t.Errorf("Rewrite inside: %v", err)
			}
			if _, err := tx.Atomic(func(*Engine) {}); !errors.Is(err, ErrInTransaction) {
				t.Errorf("nested Atomic: %v", err)
			}
			if err := tx.Close(); !errors.Is(err, ErrInTransaction) {
				t.Errorf("Close inside: %v", err)
			}
			if p := tx.Persistence(); len(p) == 0 {
				t.Error("INFO persistence inside a transaction")
			}
		})
		func() {
			defer func() {
				if recover() == nil {
					t.Error("a transaction's handle still worked after Atomic returned")
				}
			}()
			kept.Len(b("q"))
		}()
	})
}

// txJobs counts the jobs t0..t(n-1) of queue "tx".
func txJobs(e *Engine, n int) int {
	got := 0
	for i := range n {
		if _, ok := e.Get(b("tx"), []byte(fmt.Sprint("t", i))); ok {
			got++
		}
	}
	return got
}

// runTx adds jobs t0..t(n-1) to queue "tx" and pops job "a" of queue "pre",
// as one transaction, and checks every write got the unit's ticket.
func runTx(t *testing.T, e *Engine, n int, payload []byte) uint64 {
	t.Helper()
	var tickets []uint64
	ticket, err := e.Atomic(func(tx *Engine) {
		for i := range n {
			res, err := tx.Add(AddArgs{Queue: b("tx"), ID: []byte(fmt.Sprint("t", i)), Delay: int64(i % 3 * 1000), Payload: payload})
			if err != nil {
				t.Error(err)
			}
			tickets = append(tickets, res.Ticket)
		}
		if d, ok := tx.Pop([][]byte{b("pre")}); ok {
			tickets = append(tickets, d.Ticket)
		}
	})
	if err != nil || ticket == 0 {
		t.Fatalf("Atomic: %d %v", ticket, err)
	}
	for _, tk := range tickets {
		if tk != ticket {
			t.Fatalf("a write inside the transaction got ticket %d, the unit has %d", tk, ticket)
		}
	}
	return ticket
}

func TestUnitReplaysWhole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, exact(fs, FsyncAlways))
		addAt(t, e, "pre", 0, "a", "x")
		if err := e.WaitDurable(runTx(t, e, 20, b("p"))); err != nil {
			t.Fatal(err)
		}
		add(t, e, "post", 0, "y")
		before := dump(e)
		e.Close()
		e = mustNew(t, exact(fs, FsyncAlways))
		defer e.Close()
		if after := dump(e); after != before {
			t.Fatalf("replay of a unit differs\nbefore:\n%s\nafter:\n%s", before, after)
		}
		// One log record holds the whole transaction.
		res, _ := aof.Replay(fs, seg1, nil)
		if res.Records != 3 {
			t.Fatalf("log holds %d records, want 3 (add, unit, add)", res.Records)
		}
	})
}

// A log cut at every byte offset inside a unit (a crash during its write)
// holds all of the transaction or none of it, whether the unit is one record
// or several parts; and a unit cut short stays absent after a restart logs
// more behind it.
func TestUnitCutAtEveryOffsetIsAllOrNothing(t *testing.T) {
	for _, partMax := range []int{unitPartMax, 50} {
		t.Run(fmt.Sprint("part_max_", partMax), func(t *testing.T) {
			defer func(old int) { unitPartMax = old }(unitPartMax)
			unitPartMax = partMax
			synctest.Test(t, func(t *testing.T) {
				const n = 6
				fs := aof.NewMemFS()
				e := mustNew(t, logged(fs, FsyncAlways))
				addAt(t, e, "pre", 0, "a", "x")
				e.WaitDurable(e.journal.Ticket())
				path := seg1
				head, _ := fs.ReadFile(path)
				e.WaitDurable(runTx(t, e, n, b("payload")))
				e.Close()
				full, _ := fs.ReadFile(path)
				records, _ := aof.Replay(fs, path, nil)
				if partMax < 100 && records.Records < 4 {
					t.Fatalf("the unit was not split into parts: %d records", records.Records)
				}
				for cut := len(head); cut <= len(full); cut++ {
					cfs := aof.NewMemFS()
					cfs.WriteFile(path, full[:cut])
					c := mustNew(t, logged(cfs, FsyncAlways))
					got := txJobs(c, n)
					_, aThere := c.Get(b("pre"), b("a"))
					whole := cut == len(full)
					if (whole && (got != n || aThere)) || (!whole && (got != 0 || !aThere)) {
						t.Fatalf("log cut at %d of %d: %d of %d jobs of the transaction, its pop applied: %v", cut, len(full), got, n, !aThere)
					}
					// A restart logs after what the cut left; the torn unit stays dropped.
					res, err := c.Add(AddArgs{Queue: b("post"), ID: b("after"), Payload: b("z")})
					if err != nil || c.WaitDurable(res.Ticket) != nil {
						t.Fatal(err)
					}
					c.Close()
					c = mustNew(t, logged(cfs, FsyncAlways))
					if got2 := txJobs(c, n); got2 != got {
						t.Fatalf("log cut at %d: %d jobs of the transaction, %d after a restart logged more", cut, got, got2)
					}
					if _, ok := c.Get(b("post"), b("after")); !ok {
						t.Fatalf("log cut at %d: the write after the restart is lost", cut)
					}
					c.Close()
				}
			})
		})
	}
}

// A transaction larger than one log record is logged in parts and comes
// back whole.
func TestUnitLargerThanARecord(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 70 MiB")
	}
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		o := logged(fs, FsyncAlways)
		o.MaxPayload = 36 << 20
		e := mustNew(t, o)
		big := []byte(strings.Repeat("x", 35<<20))
		if err := e.WaitDurable(runTx(t, e, 2, big)); err != nil {
			t.Fatal(err)
		}
		e.Close()
		// Its parts may be in two segments (a roll between batches).
		n := 0
		for _, p := range logSegs(fs) {
			res, err := aof.Replay(fs, p, nil)
			if err != nil {
				t.Fatal(err)
			}
			n += res.Records
		}
		if n != 2 {
			t.Fatalf("a unit over aof.MaxRecordSize: %d records (want 2 parts)", n)
		}
		e = mustNew(t, o)
		defer e.Close()
		if got := txJobs(e, 2); got != 2 {
			t.Fatalf("%d of 2 jobs after replay", got)
		}
	})
}

// A transaction whose log write fails is undone whole by the reload.
func TestFailedUnitWriteIsNotApplied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, logged(fs, FsyncEverySec))
		defer e.Close()
		addAt(t, e, "pre", 0, "a", "x")
		e.WaitDurable(e.journal.Ticket())
		fs.Inject(aof.Fault{Op: aof.OpWrite, Path: seg1})
		if err := e.WaitDurable(runTx(t, e, 5, b("p"))); !errors.Is(err, ErrLog) {
			t.Fatalf("wait after the unit's write failed: %v", err)
		}
		if got := txJobs(e, 5); got != 0 {
			t.Fatalf("%d jobs of a failed transaction applied", got)
		}
		if _, ok := e.Get(b("pre"), b("a")); !ok {
			t.Fatal("the failed transaction's pop stayed applied")
		}
		sleep(journal.ProbeEvery) // writes are refused until a probe of the log succeeds
		if err := e.WaitDurable(runTx(t, e, 5, b("p"))); err != nil {
			t.Fatalf("transaction after the disk recovered: %v", err)
		}
		if got := txJobs(e, 5); got != 5 {
			t.Fatalf("%d of 5 jobs", got)
		}
	})
}

// Transactions logged while a rewrite runs reach the new log through its
// tail, whole.
func TestUnitsDuringRewrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, exact(fs, FsyncEverySec))
		for i := range 3000 {
			add(t, e, fmt.Sprint("q", i%5), int64(i%7*1000), "x")
		}
		addAt(t, e, "pre", 0, "a", "x")
		if err := e.Rewrite(); err != nil {
			t.Fatal(err)
		}
		runTx(t, e, 10, b("during"))
		waitRewrite(e)
		if e.journal.Info().RewriteErr != nil {
			t.Fatal(e.journal.Info().RewriteErr)
		}
		before := dump(e)
		e.Close()
		e = mustNew(t, exact(fs, FsyncEverySec))
		defer e.Close()
		if after := dump(e); after != before {
			t.Fatalf("state after rewrite with a transaction in its tail differs\nbefore:\n%s\nafter:\n%s", before, after)
		}
	})
}
