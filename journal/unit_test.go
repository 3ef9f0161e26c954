package journal

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/record"
)

// TestUnitSplitsIntoPartsAndGatherJoinsThem: a unit larger than partMax is
// logged as parts under one ticket, and Gather gives the body back only at
// the commit; a part without its start, or a unit cut short, is dropped.
func TestUnitSplitsIntoPartsAndGatherJoinsThem(t *testing.T) {
	fs := aof.NewMemFS()
	o := newOwner(t, fs, FsyncNo, nil)
	var u Unit
	if u.End(o.j, 4) != 0 {
		t.Fatal("an empty unit logged something")
	}
	t1 := u.Add(o.j, []byte("first"))
	if t2 := u.Add(o.j, []byte("second")); t2 != t1 {
		t.Fatalf("tickets %d and %d: a unit has one", t1, t2)
	}
	if got := u.End(o.j, 4); got != t1 {
		t.Fatalf("End returned %d, want %d", got, t1)
	}
	if err := o.j.WaitDurable(t1); err != nil {
		t.Fatal(err)
	}
	var want []byte
	for _, r := range []string{"first", "second"} {
		want = binary.AppendUvarint(want, uint64(len(r)))
		want = append(want, r...)
	}
	var g Gather
	recs := records(t, fs)
	if len(recs) != (len(want)+3)/4 {
		t.Fatalf("%d parts, want %d", len(recs), (len(want)+3)/4)
	}
	for i, rec := range recs {
		b := []byte(rec)
		if b[0] != record.Unit {
			t.Fatalf("part %d: op %x", i, b[0])
		}
		part, k := binary.Uvarint(b[1:])
		more := b[1+k] == 1
		whole, done, orphan := g.Part(part, more, b[2+k:])
		if orphan || done != !more {
			t.Fatalf("part %d: done %v orphan %v", part, done, orphan)
		}
		if done && !bytes.Equal(whole, want) {
			t.Fatalf("gathered %q, want %q", whole, want)
		}
	}
	g.Applied()
	if _, _, orphan := g.Part(1, false, []byte("x")); !orphan {
		t.Fatal("a part without its start was taken")
	}
	g.Part(0, true, []byte("ab"))
	if torn, parts, n := g.Torn(); !torn || parts != 1 || n != 2 {
		t.Fatalf("torn %v parts %d bytes %d", torn, parts, n)
	}
	if torn, _, _ := g.Torn(); torn {
		t.Fatal("torn twice")
	}
}

// A commit that runs while a transaction is under way (its records in the
// Unit, not yet in the batch) must not count the unit's ticket durable:
// the transaction's reply waits for its ticket, and would leave before its
// records were written (TestDurabilityKill9Transactions lost one so).
func TestCommitDuringUnitDoesNotCoverIt(t *testing.T) {
	fs := aof.NewMemFS()
	o := newOwner(t, fs, FsyncAlways, nil)
	first := o.add("before")
	var u Unit
	u.Add(o.j, []byte("in the transaction"))       // the owner's lock holds it...
	if err := o.j.WaitDurable(first); err != nil { // ...while another client's wait commits
		t.Fatal(err)
	}
	ticket := u.End(o.j, 1<<20)
	if err := o.j.WaitDurable(ticket); err != nil {
		t.Fatal(err)
	}
	if recs := records(t, fs); len(recs) != 2 {
		t.Fatalf("WaitDurable(%d) returned with %d records in the log, want 2: the unit was counted durable before it was written", ticket, len(recs))
	}
}
