package jobs

import (
	"bytes"
	"testing"
)

// newTable returns a Table ready for use, released at the end of the test.
func newTable(t *testing.T) *Table {
	t.Helper()
	tb := new(Table)
	tb.Init()
	t.Cleanup(tb.Release)
	return tb
}

// add files a job in queue q with id (nil: the server id sid) and payload,
// as the engine does: a slot, its data in the arena, then the index.
func add(tb *Table, run *PushRun, q uint32, id []byte, sid uint64, payload []byte) uint32 {
	s := tb.Alloc()
	j := tb.At(s)
	j.Queue, j.SID, j.IDLen, j.State = q, sid, uint16(len(id)), StateReady
	j.Data = PackData(tb.Arena.Alloc(append(append([]byte(nil), id...), payload...)), len(payload))
	if id == nil && run != nil && sid > run.Last() {
		tb.FileInRun(run, s)
	} else {
		tb.Insert(s, id)
	}
	return s
}

// TestTableFindsEveryKindOfID: client ids by (queue, id), server ids in
// the sids table and in a push run, each only in its own queue, and not
// once deleted.
func TestTableFindsEveryKindOfID(t *testing.T) {
	tb := newTable(t)
	r0, r1 := tb.NewRun(), tb.NewRun()
	runs := []*PushRun{&r0, &r1}
	var buf [SIDLen]byte
	client := add(tb, &r0, 0, []byte("a"), 0, []byte("pa"))
	pushed := add(tb, &r0, 0, nil, 100, []byte("pb"))
	filed := add(tb, nil, 1, nil, 50, nil) // below the run's top: the sids table
	other := add(tb, &r1, 1, []byte("a"), 0, []byte("pc"))
	for _, c := range []struct {
		s uint32
		q uint32
	}{{client, 0}, {pushed, 0}, {filed, 1}, {other, 1}} {
		j := tb.At(c.s)
		id := tb.ID(j, &buf)
		if got, ok := tb.Lookup(runs[c.q], c.q, id); !ok || got != c.s {
			t.Fatalf("Lookup(%d, %s) = %d %v, want %d", c.q, id, got, ok, c.s)
		}
		if _, ok := tb.Lookup(runs[1-c.q], 1-c.q, id); ok && string(id) != "a" {
			t.Fatalf("%s found in queue %d too", id, 1-c.q)
		}
	}
	if tb.At(pushed).Flags&FlagInRun == 0 || r0.Len() != 1 {
		t.Fatal("a server id above the run's top is not in the run")
	}
	if got := tb.Payload(tb.At(client)); !bytes.Equal(got, []byte("pa")) {
		t.Fatalf("payload %q", got)
	}
	for _, s := range []uint32{client, pushed, filed} {
		j := tb.At(s)
		id := append([]byte(nil), tb.ID(j, &buf)...)
		q := j.Queue
		tb.Delete(runs[q], s, id)
		if _, ok := tb.Lookup(runs[q], q, id); ok {
			t.Fatalf("%s found after Delete", id)
		}
		tb.Free(s)
	}
	if r0.Len() != 0 || tb.At(pushed).Flags != 0 {
		t.Fatal("Delete left the id in the run")
	}
}

// TestTableSIDLikeClientIDs: a client id that reads as a server id is found
// only once SIDLike says such ids exist (the engine sets it as it stores
// one), and the server id of the same number in another queue is not it.
func TestTableSIDLikeClientIDs(t *testing.T) {
	tb := newTable(t)
	r0, r1 := tb.NewRun(), tb.NewRun()
	var buf [SIDLen]byte
	id := append([]byte(nil), RenderSID(&buf, 7)...)
	s := add(tb, &r0, 0, id, 0, nil)
	add(tb, nil, 1, nil, 7, nil)
	if _, ok := tb.Lookup(&r0, 0, id); ok {
		t.Fatal("found without SIDLike: the engine relies on the shortcut")
	}
	tb.SIDLike = true
	if got, ok := tb.Lookup(&r0, 0, id); !ok || got != s {
		t.Fatalf("Lookup = %d %v, want %d", got, ok, s)
	}
	if got, ok := tb.Lookup(&r1, 1, id); !ok || got == s {
		t.Fatalf("queue 1's server id 7: %d %v", got, ok)
	}
}

// TestTableFreeClearsSideTables: freeing a slot drops what every side table
// its flags name holds, the arena bytes of its id and payload, and hands
// the slot out again, zeroed.
func TestTableFreeClearsSideTables(t *testing.T) {
	tb := newTable(t)
	run := tb.NewRun()
	s := add(tb, &run, 0, []byte("id"), 0, []byte("payload"))
	tb.At(s).Flags |= FlagDL | FlagUnique | FlagOrigin | FlagReason
	tb.DeadLetters[s] = []byte("dlq")
	tb.Idents = map[uint32]Ident{s: {UniqueTTL: 5}}
	tb.Origins = map[uint32]*Origin{s: {Queue: []byte("q")}}
	tb.Reasons = map[uint32]string{s: "boom"}
	keep := add(tb, &run, 0, []byte("other"), 0, nil)
	tb.At(keep).Flags |= FlagReason
	tb.Reasons[keep] = "kept"

	tb.Delete(&run, s, []byte("id"))
	tb.Free(s)
	if len(tb.DeadLetters)+len(tb.Idents)+len(tb.Origins) != 0 || len(tb.Reasons) != 1 {
		t.Fatalf("side tables after Free: %v %v %v %v", tb.DeadLetters, tb.Idents, tb.Origins, tb.Reasons)
	}
	if got := tb.Alloc(); got != s || *tb.At(got) != (Job{}) {
		t.Fatalf("Alloc after Free: slot %d %+v, want slot %d zeroed", got, *tb.At(got), s)
	}
	tb.Free(s)
	tb.Free(keep)
	if tb.Arena.InUse != 0 {
		t.Fatalf("%d arena bytes in use after freeing every job", tb.Arena.InUse)
	}
}

// TestTableAllocGrows says a page is about to be mapped exactly when Alloc
// will map one: never while a freed slot can be reused.
func TestTableAllocGrows(t *testing.T) {
	tb := newTable(t)
	for i := range pageSize + 2 {
		grows := tb.AllocGrows()
		pages := len(tb.pages)
		s := tb.Alloc()
		if want := len(tb.pages) != pages; grows != want {
			t.Fatalf("alloc %d: AllocGrows %v, mapped a page %v", i, grows, want)
		}
		if i == pageSize-1 {
			tb.Free(s)
			if tb.AllocGrows() {
				t.Fatal("AllocGrows with a free slot to reuse")
			}
			tb.Alloc()
		}
	}
}
