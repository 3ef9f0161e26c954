package engine

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/record"
)

// identAdd adds a job with a client id and reports whether it was added.
func identAdd(t *testing.T, e *Engine, a AddArgs) bool {
	t.Helper()
	res, err := e.Add(a)
	if err != nil {
		t.Fatalf("add %+v: %v", a, err)
	}
	return res.Added
}

// identUnique is a UNIQUE add of id to q with ttl ms and ack timeout ms.
func identUnique(id string, ttl, ackTimeout int64) AddArgs {
	return AddArgs{Queue: b("q"), ID: b(id), Payload: b("p-" + id), Unique: ttl, AckTimeout: ackTimeout, Retry: -1}
}

// The "done when": a UNIQUE id re-added 1 ms and ttl-1 ms after its
// ACK is refused (nil), REPLACE included; at ttl it is accepted.
func TestUniqueHoldsForTTLAfterAck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		const ttl = 10_000
		if !identAdd(t, e, identUnique("x", ttl, 30_000)) {
			t.Fatal("first add refused")
		}
		if d, ok := e.Pop([][]byte{b("q")}); !ok || !d.Reserved {
			t.Fatalf("pop: %+v %v", d, ok)
		}
		sleep(5 * time.Millisecond)
		if n, _, _ := e.Ack(b("q"), [][]byte{b("x")}); n != 1 {
			t.Fatal("ack")
		}
		acked := e.Now()
		sleep(time.Millisecond)
		if identAdd(t, e, identUnique("x", ttl, 0)) {
			t.Fatal("re-added 1 ms after its ACK")
		}
		replace := identUnique("x", ttl, 0)
		replace.Replace = true
		if identAdd(t, e, replace) {
			t.Fatal("REPLACE re-added it 1 ms after its ACK")
		}
		// A plain add of the same id, without UNIQUE, is refused too: the
		// id is taken, whoever asks.
		if identAdd(t, e, AddArgs{Queue: b("q"), ID: b("x"), Payload: b("plain")}) {
			t.Fatal("plain add re-added it")
		}
		// Another queue's x is another id.
		if !identAdd(t, e, AddArgs{Queue: b("other"), ID: b("x"), Payload: b("p")}) {
			t.Fatal("x of another queue refused")
		}
		sleep(time.Duration(acked+ttl-1-e.Now()) * time.Millisecond)
		if identAdd(t, e, identUnique("x", ttl, 0)) {
			t.Fatal("re-added ttl-1 ms after its ACK")
		}
		sleep(time.Millisecond)
		if e.Now() != acked+ttl {
			t.Fatalf("clock %d, want %d", e.Now(), acked+ttl)
		}
		if !identAdd(t, e, identUnique("x", ttl, 0)) {
			t.Fatal("refused at ttl after its ACK")
		}
		if e.ident.tombs.Len() != 0 {
			t.Fatalf("%d tombstones left after the ttl", e.ident.tombs.Len())
		}
	})
}

// Every way a job ends leaves the tombstone, except being replaced.
func TestUniqueEveryEndLeavesATombstone(t *testing.T) {
	for _, tc := range []struct {
		name string
		add  AddArgs
		end  func(t *testing.T, e *Engine)
	}{
		{"cancel", identUnique("x", 1000, 0), func(t *testing.T, e *Engine) {
			e.Cancel(b("q"), [][]byte{b("x")})
		}},
		{"pop at most once", identUnique("x", 1000, 0), func(t *testing.T, e *Engine) {
			if d, ok := e.Pop([][]byte{b("q")}); !ok || d.Reserved {
				t.Fatal("pop")
			}
		}},
		{"list pop", identUnique("x", 1000, 30_000), func(t *testing.T, e *Engine) {
			if _, ok := e.ListPop(b("q"), 1, false); !ok {
				t.Fatal("lpop")
			}
		}},
		{"del", identUnique("x", 1000, 0), func(t *testing.T, e *Engine) {
			e.Del([][]byte{b("q")})
		}},
		{"lrem", identUnique("x", 1000, 0), func(t *testing.T, e *Engine) {
			if n, _, _ := e.Rem(b("q"), 0, b("p-x")); n != 1 {
				t.Fatal("lrem")
			}
		}},
		{"nack, dropped", AddArgs{Queue: b("q"), ID: b("x"), Payload: b("p"), Unique: 1000, AckTimeout: 30_000, Retry: 0}, func(t *testing.T, e *Engine) {
			e.Pop([][]byte{b("q")})
			if ok, _, _ := e.Nack(b("q"), b("x"), 0); !ok {
				t.Fatal("nack")
			}
		}},
		{"nack, dead-lettered", AddArgs{Queue: b("q"), ID: b("x"), Payload: b("p"), Unique: 1000, AckTimeout: 30_000, Retry: 0, DeadLetter: b("dlq")}, func(t *testing.T, e *Engine) {
			e.Pop([][]byte{b("q")})
			e.Nack(b("q"), b("x"), 0)
			if state(e, "dlq", "x") != "ready" {
				t.Fatal("not dead-lettered")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fs := aof.NewMemFS()
				e := mustNew(t, logged(fs, FsyncAlways))
				defer func() { e.Close() }()
				if !identAdd(t, e, tc.add) {
					t.Fatal("add")
				}
				sleep(3 * time.Millisecond)
				tc.end(t, e)
				ended := e.Now()
				if state(e, "q", "x") != "gone" {
					t.Fatal("the job is still there")
				}
				sleep(time.Millisecond)
				if identAdd(t, e, identUnique("x", 1000, 0)) {
					t.Fatal("re-added 1 ms after it ended")
				}
				// Replay derives the same tombstone from the record that
				// ended the job.
				e.Close()
				e = mustNew(t, logged(fs, FsyncAlways))
				sleep(time.Duration(ended+999-e.Now()) * time.Millisecond)
				if identAdd(t, e, identUnique("x", 1000, 0)) {
					t.Fatal("after a restart: re-added ttl-1 ms after it ended")
				}
				sleep(time.Millisecond)
				if !identAdd(t, e, identUnique("x", 1000, 0)) {
					t.Fatal("after a restart: refused at ttl after it ended")
				}
			})
		})
	}
}

// A reservation that expires with no redelivery left ends the job at its
// deadline, which is not logged: replay must put the tombstone's start at
// the deadline too, not at the time of the next record it reads.
func TestUniqueExpiryStartsAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, logged(fs, FsyncAlways))
		identAdd(t, e, AddArgs{Queue: b("q"), ID: b("x"), Payload: b("p"), Unique: 1000, AckTimeout: 100, Retry: 0})
		e.Pop([][]byte{b("q")})
		deadline := e.Now() + 100
		// Down before the deadline: replay expires the reservation at start,
		// well after its deadline.
		sleep(50 * time.Millisecond)
		e.Close()
		sleep(500 * time.Millisecond)
		e = mustNew(t, logged(fs, FsyncAlways))
		defer func() { e.Close() }()
		if state(e, "q", "x") != "gone" {
			t.Fatal("the expired job with no retry left is still there")
		}
		sleep(time.Duration(deadline+999-e.Now()) * time.Millisecond)
		if identAdd(t, e, identUnique("x", 1000, 0)) {
			t.Fatal("re-added ttl-1 ms after the deadline")
		}
		sleep(time.Millisecond)
		if !identAdd(t, e, identUnique("x", 1000, 0)) {
			t.Fatal("refused ttl ms after the deadline (the tombstone started at the restart?)")
		}
	})
}

// REPLACE ends no job: the id is not tombstoned by it.
func TestUniqueReplaceLeavesNoTombstone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		identAdd(t, e, identUnique("x", 60_000, 0))
		r := AddArgs{Queue: b("q"), ID: b("x"), Payload: b("plain"), Replace: true}
		if !identAdd(t, e, r) {
			t.Fatal("replace")
		}
		if e.ident.tombs.Len() != 0 || len(e.jobs.Idents) != 0 {
			t.Fatalf("after a REPLACE without UNIQUE: %d tombstones, %d jobs with options", e.ident.tombs.Len(), len(e.jobs.Idents))
		}
		e.Cancel(b("q"), [][]byte{b("x")})
		if !identAdd(t, e, r) {
			t.Fatal("the replaced (no longer unique) job left a tombstone")
		}
	})
}

// Tombstones survive a log rewrite (whose log no longer holds the removals
// that made them), a restart after it, and a cluster snapshot; FLUSHALL
// drops them.
func TestUniqueTombstonesSurviveRewriteAndSnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, logged(fs, FsyncAlways))
		for _, id := range []string{"a", "b", "c"} {
			identAdd(t, e, identUnique(id, 5000, 0))
		}
		identAdd(t, e, AddArgs{Queue: b("q"), ID: b("live"), Payload: b("p"), Unique: 7000, Debounce: 60_000, Delay: 30_000, Retry: -1})
		e.Cancel(b("q"), [][]byte{b("a"), b("b"), b("c")})
		ended := e.Now()
		sleep(10 * time.Millisecond)
		if err := e.Rewrite(); err != nil {
			t.Fatal(err)
		}
		waitRewrite(e)
		log := readLog(fs)
		e.Close()
		e = mustNew(t, logged(fs, FsyncAlways))
		defer func() { e.Close() }()
		if bytes.Contains(log, b("p-a")) {
			t.Fatal("the rewritten log still holds the cancelled jobs")
		}
		for _, id := range []string{"a", "b", "c"} {
			if identAdd(t, e, identUnique(id, 5000, 0)) {
				t.Fatalf("%s re-added after a rewrite and a restart", id)
			}
		}
		// The live job kept its options through the rewrite.
		e.mu.Lock()
		s, _ := e.jobs.Lookup(&e.queues[e.byName["q"]].run, e.byName["q"], b("live"))
		ji := e.jobs.Idents[s]
		e.mu.Unlock()
		if ji.UniqueTTL != 7000 || ji.DebounceUntil != ended+60_000 {
			t.Fatalf("the live job's options after a rewrite: %+v", ji)
		}

		// A follower restored from a snapshot holds the same tombstones.
		g := newGroup(t, 2, Options{}, nil)
		F := g.nodes[1].e
		F.Reset()
		if err := F.Restore(bytes.NewReader(e.Snapshot())); err != nil {
			t.Fatal(err)
		}
		F.mu.Lock()
		held := F.tombHeld(b("q"), b("b"), F.nowMs())
		F.mu.Unlock()
		if !held {
			t.Fatal("a follower restored from a snapshot lost a tombstone")
		}

		sleep(time.Duration(ended+4999-e.Now()) * time.Millisecond)
		if identAdd(t, e, identUnique("a", 5000, 0)) {
			t.Fatal("re-added ttl-1 ms after it ended")
		}
		if _, err := e.Flush(); err != nil {
			t.Fatal(err)
		}
		if !identAdd(t, e, identUnique("b", 5000, 0)) {
			t.Fatal("FLUSHALL kept a tombstone")
		}
	})
}

// DEBOUNCE: re-adding a delayed id replaces it and pushes it out, never past
// the first add's time plus max-wait; a job that is not delayed any more is
// a plain add's existing id.
func TestDebouncePushesOutUpToMaxWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, logged(fs, FsyncAlways))
		defer func() { e.Close() }()
		deb := func(payload string) bool {
			return identAdd(t, e, AddArgs{Queue: b("q"), ID: b("x"), Payload: b(payload), Delay: 300, Debounce: 1000, Retry: -1})
		}
		t0 := e.Now()
		due := func() int64 { j, _ := e.Get(b("q"), b("x")); return j.Due }
		if !deb("p0") || due() != t0+300 {
			t.Fatalf("first add: due %d, want %d", due(), t0+300)
		}
		for i, want := range []int64{t0 + 450, t0 + 600, t0 + 750, t0 + 900, t0 + 1000, t0 + 1000} {
			sleep(150 * time.Millisecond)
			if !deb("p" + string(rune('1'+i))) {
				t.Fatalf("re-add %d refused", i+1)
			}
			if due() != want {
				t.Fatalf("re-add %d: due %d, want %d", i+1, due()-t0, want-t0)
			}
		}
		// A restart keeps the limit.
		e.Close()
		e = mustNew(t, logged(fs, FsyncAlways))
		if !deb("p7") || due() != t0+1000 {
			t.Fatalf("after a restart: due %d, want %d", due()-t0, 1000)
		}
		sleep(time.Duration(t0+999-e.Now()) * time.Millisecond)
		if _, ok := e.Pop([][]byte{b("q")}); ok {
			t.Fatal("handed out before its limit")
		}
		sleep(time.Millisecond)
		if j, _ := e.Get(b("q"), b("x")); j.State != "ready" || string(j.Payload) != "p7" {
			t.Fatalf("at the limit: %+v", j)
		}
		// Ready now: a DEBOUNCE add of it is an add of an existing id.
		if deb("late") {
			t.Fatal("a ready job was debounced")
		}
		// With REPLACE it is replaced, and a new window starts.
		now := e.Now()
		if !identAdd(t, e, AddArgs{Queue: b("q"), ID: b("x"), Payload: b("r"), Delay: 5000, Debounce: 2000, Replace: true}) {
			t.Fatal("replace")
		}
		if due() != now+2000 {
			t.Fatalf("REPLACE: due %d, want %d", due()-now, 2000)
		}
	})
}

// The tombstone record reads back to itself, and a cut or padded one is
// refused.
func TestUniqueTombRecordRoundTrip(t *testing.T) {
	r := record.Rec{Op: record.Tomb, Time: 1_700_000_000_000, SID: jobs.TombKey(b("q"), b("id")), Due: 1_700_000_060_000}
	enc := r.Encode(nil)
	var got record.Rec
	if err := got.Decode(enc); err != nil || got.Op != record.Tomb || got.Time != r.Time || got.SID != r.SID || got.Due != r.Due {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	if err := got.Decode(enc[:len(enc)-1]); err == nil {
		t.Fatal("a cut tombstone record decoded")
	}
	if err := got.Decode(append(enc, 0)); err == nil {
		t.Fatal("a padded tombstone record decoded")
	}
}

// identTombs renders an engine's tombstones: key and end, in key order.
func identTombs(e *Engine) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var sb bytes.Buffer
	for _, r := range e.tombRecs(e.opNow) {
		fmt.Fprintf(&sb, "%x:%d ", r.SID, r.Due)
	}
	return sb.String()
}

// A follower applying the leader's records holds the same tombstones,
// those of expiries (which no record states) included.
func TestUniqueTombstonesOnFollowers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 2, Options{}, nil)
		L, F := g.nodes[0], g.nodes[1]
		identAdd(t, L.e, identUnique("acked", 5000, 30_000))
		identAdd(t, L.e, AddArgs{Queue: b("q"), ID: b("expires"), Payload: b("p"), Unique: 5000, AckTimeout: 100, Retry: 0})
		identAdd(t, L.e, identUnique("cancelled", 5000, 0))
		L.e.Pop([][]byte{b("q")})
		L.e.Pop([][]byte{b("q")})
		sleep(3 * time.Millisecond)
		L.e.Ack(b("q"), [][]byte{b("acked")})
		L.e.Cancel(b("q"), [][]byte{b("cancelled")})
		g.sync(L)
		sleep(150 * time.Millisecond) // "expires" expires on the leader
		L.e.Add(AddArgs{Queue: b("other"), Payload: b("x"), Retry: -1})
		g.sync(L)
		want := identTombs(L.e)
		if n := strings.Count(want, ":"); n != 3 {
			t.Fatalf("the leader holds %d tombstones, want 3: %s", n, want)
		}
		if got := identTombs(F.e); got != want {
			t.Fatalf("follower's tombstones %s, leader's %s", got, want)
		}
	})
}
