package jobs

import "testing"

func TestIdentEndUniqueKeepsDebounce(t *testing.T) {
	var tb Table
	tb.Init()
	defer tb.Release()
	s := tb.Alloc()
	tb.SetIdent(s, 0, 0)
	if _, ok := tb.IdentOf(s); ok || tb.Idents != nil {
		t.Fatal("a job with neither option got an entry")
	}
	tb.SetIdent(s, 5000, 123)
	if ji, ok := tb.IdentOf(s); !ok || ji != (Ident{UniqueTTL: 5000, DebounceUntil: 123}) {
		t.Fatalf("ident %+v %v", ji, ok)
	}
	if ttl, ok := tb.EndUnique(s); !ok || ttl != 5000 {
		t.Fatalf("EndUnique %d %v", ttl, ok)
	}
	if _, ok := tb.EndUnique(s); ok {
		t.Fatal("a job ended twice left two tombstones")
	}
	if until, ok := tb.DebounceUntil(s); !ok || until != 123 {
		t.Fatalf("the DEBOUNCE limit after UNIQUE ended: %d %v", until, ok)
	}
	tb.DropIdent(s)
	if _, ok := tb.IdentOf(s); ok || len(tb.Idents) != 0 || tb.At(s).Flags&(FlagUnique|FlagDebounce) != 0 {
		t.Fatal("DropIdent left the options")
	}
	tb.SetIdent(s, 10, 0)
	if _, ok := tb.EndUnique(s); !ok || len(tb.Idents) != 0 {
		t.Fatal("a UNIQUE-only job's entry outlived its end")
	}
}

func TestTombKeyHasQueueBoundary(t *testing.T) {
	if TombKey([]byte("ab"), []byte("c")) == TombKey([]byte("a"), []byte("bc")) {
		t.Fatal("the queue's boundary is not in the key")
	}
	// The key is in the log and in snapshots: it must never change.
	if k := TombKey([]byte("q"), []byte("id")); k != 0xe872e9892aa789fa {
		t.Fatalf("TombKey(q, id) = %#x: logged tombstones would no longer hold their ids", k)
	}
}

func TestTombs(t *testing.T) {
	var ts Tombs
	if _, ok := ts.Get(1); ok || ts.Len() != 0 {
		t.Fatal("an empty Tombs holds something")
	}
	ts.Put(1, 10)
	ts.Put(2, 20)
	ts.Delete(1)
	if h, ok := ts.Get(2); !ok || h != 20 || ts.Len() != 1 {
		t.Fatalf("Get(2) = %d, %v; len %d", h, ok, ts.Len())
	}
	n := 0
	for k, h := range ts.All() {
		if k != 2 || h != 20 {
			t.Fatalf("All gave %d:%d", k, h)
		}
		n++
	}
	if n != 1 {
		t.Fatal("All gave", n)
	}
}

func TestReasonAndOrigin(t *testing.T) {
	var tb Table
	tb.Init()
	defer tb.Release()
	s := tb.Alloc()
	tb.SetReason(s, nil)
	if tb.Reason(s) != "" || tb.Reasons != nil {
		t.Fatal("an empty reason was kept")
	}
	tb.SetReason(s, []byte("boom"))
	tb.SetReason(s, nil) // keeps it
	if tb.Reason(s) != "boom" {
		t.Fatalf("reason %q", tb.Reason(s))
	}
	tb.SetReason(s, []byte(ReasonAckTimeout))
	if tb.Reason(s) != ReasonAckTimeout || len(tb.Reasons) != 0 || tb.At(s).Flags&FlagTimedOut == 0 {
		t.Fatal("the ack timeout is not a flag alone")
	}
	q := []byte("from")
	tb.SetOrigin(s, &Origin{Queue: q, AckTimeout: 5, Retry: -1})
	q[0] = 'X'
	if o := tb.Origins[s]; string(o.Queue) != "from" || o.DeadLetter != nil || o.Retry != -1 {
		t.Fatalf("origin %+v", o)
	}
	tb.SetOrigin(s, nil)
	if len(tb.Origins) != 0 || tb.At(s).Flags&FlagOrigin != 0 {
		t.Fatal("SetOrigin(nil) kept the origin")
	}
}
