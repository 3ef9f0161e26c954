package engine

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayd/delayd/record"
)

// Replication when a batch does not commit: writes are refused, tickets
// fail, and a rebuild clears it.

func TestFailedBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 2, Options{}, nil)
		ln, fn := g.nodes[0], g.nodes[1]
		L, F := ln.e, fn.e
		add(t, L, "q", 0, "committed")
		addOpts(t, L, AddArgs{Queue: b("r"), ID: b("r1"), Payload: b("r1"), AckTimeout: 1000})
		add(t, L, "q", 100, "delayed")
		g.sync(ln)
		snap := F.Snapshot() // a settled follower's snapshot
		if !F.Settled() {
			t.Fatal("a follower is always settled")
		}
		tail := len(g.log)
		mustPop(t, L, "r")
		g.sync(ln) // committed after the snapshot: the tail

		// Batch A: a pop and an add. Batch B: in flight behind it.
		d := mustPop(t, L, "q")
		resA, _ := L.Add(AddArgs{Queue: b("q"), ID: b("lost"), Payload: b("lost")})
		propsA := ln.r.take()
		resB, _ := L.Add(AddArgs{Queue: b("q"), ID: b("lostB"), Payload: b("lostB")})
		synctest.Wait()
		if L.Settled() {
			t.Fatal("Settled with batches in flight")
		}
		for _, p := range propsA {
			p.err = errLost
			close(p.done)
		}
		synctest.Wait()
		for _, tk := range []uint64{d.Ticket, resA.Ticket} {
			if err := waitDurable(t, L, tk); !errors.Is(err, ErrNotCommitted) {
				t.Fatalf("ticket %d of the failed batch: %v", tk, err)
			}
		}
		if _, err := L.Add(AddArgs{Queue: b("q"), Payload: b("x")}); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("a write after a failed batch: %v", err)
		}
		if _, _, err := L.PopOrWait([][]byte{b("q")}, PopDelay); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("a pop after a failed batch: %v", err)
		}
		if L.Settled() {
			t.Fatal("Settled after a failed batch")
		}

		// Rebuild from the snapshot and the committed tail. B is still in
		// flight: its ticket fails at Rebuilt rather than hang.
		L.Reset()
		if err := L.Restore(bytes.NewReader(snap)); err != nil {
			t.Fatal(err)
		}
		for _, entry := range g.log[tail:] {
			if err := L.ApplyBatch(entry); err != nil {
				t.Fatal(err)
			}
		}
		L.Rebuilt()
		if err := waitDurable(t, L, resB.Ticket); !errors.Is(err, ErrNotCommitted) {
			t.Fatalf("ticket of a batch in flight at Rebuilt: %v", err)
		}
		ln.r.settle(errLost) // B fails late: the rebuilt engine must not care
		if got, want := replDump(L), replDump(F); got != want {
			t.Fatalf("rebuilt leader differs from the committed state:\n%s", diffLines(want, got))
		}
		L.Lead()
		if !L.Settled() {
			t.Fatal("not Settled after Rebuilt")
		}
		if _, err := L.Add(AddArgs{Queue: b("q"), ID: b("again"), Payload: b("again")}); err != nil {
			t.Fatalf("a write after the rebuild: %v", err)
		}
		if p, _ := popPayload(L, "q"); p != "committed" {
			t.Fatalf("the job the failed pop took is back? got %q", p)
		}
		g.sync(ln)
		sleep(time.Second)
		g.sync(ln)
	})
}

// TestRebuildFailsPendingTickets: tickets of records the flusher was still
// proposing, or had not taken yet, when the engine is rebuilt fail too, and
// no record of the dropped state is proposed after Rebuilt.
func TestRebuildFailsPendingTickets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 1, Options{}, nil)
		ln := g.nodes[0]
		L := ln.e
		rA, _ := L.Add(AddArgs{Queue: b("q"), Payload: b("A")})
		propsA := ln.r.take()
		gate := make(chan struct{})
		ln.r.setGate(gate)
		rB, _ := L.Add(AddArgs{Queue: b("q"), Payload: b("B")}) // the flusher blocks proposing it
		synctest.Wait()
		rC, _ := L.Add(AddArgs{Queue: b("q"), Payload: b("C")}) // pending behind it
		for _, p := range propsA {
			p.err = errLost
			close(p.done)
		}
		synctest.Wait()
		rebuilt := make(chan struct{})
		go func() {
			L.Reset()
			L.Rebuilt()
			close(rebuilt)
		}()
		synctest.Wait()
		ln.r.setGate(nil)
		close(gate)
		<-rebuilt
		for _, tk := range []uint64{rA.Ticket, rB.Ticket, rC.Ticket} {
			if err := waitDurable(t, L, tk); !errors.Is(err, ErrNotCommitted) {
				t.Fatalf("ticket %d: %v", tk, err)
			}
		}
		L.Lead()
		if _, err := L.Add(AddArgs{Queue: b("q"), ID: b("new"), Payload: b("new")}); err != nil {
			t.Fatal(err)
		}
		var proposed []string
		for _, p := range ln.r.take() {
			p.err = nil
			eachRecord(p.batch, func(rb []byte) {
				var r record.Rec
				if err := r.Decode(rb); err == nil && r.Op == record.Add {
					proposed = append(proposed, string(r.Payload))
					if string(r.Payload) == "B" {
						p.err = errLost // B fails late: its outcome no longer matters
					}
				}
			})
			close(p.done)
		}
		synctest.Wait()
		if !slices.Equal(proposed, []string{"B", "new"}) {
			t.Fatalf("proposed after the failure: %v, want B (in flight) and new", proposed)
		}
		if _, err := L.Add(AddArgs{Queue: b("q"), Payload: b("x")}); err != nil {
			t.Fatalf("a write after the rebuild: %v", err)
		}
		if got := payloads(L, "q"); !slices.Equal(got, []string{"new", "x"}) {
			t.Fatalf("rebuilt state: %v", got)
		}
	})
}

// TestSnapshotRoundTrip: a snapshot restored into another engine holds the
// same jobs; a truncated one is refused; Settled says when a leader's
// state is exactly the committed one.
