package record

import (
	"reflect"
	"testing"

	"github.com/delayd/delayd/jobs"
)

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range []Rec{
		{Op: Add, Time: 1, Queue: []byte("q"), SID: 42, Due: 5, Seq: 7, Deliveries: 1, Flags: FlagReady,
			Payload: []byte("p\x00"), AckTimeout: 100, Retry: -1, DeadLetter: []byte("dlq"), Deadline: 9},
		{Op: Add, Time: 1, Queue: []byte(""), ID: []byte("client-id"), Due: -3, Retry: 2},
		{Op: Cancel, Time: 2, Queue: []byte("q"), ID: []byte("x")},
		{Op: Pop, Time: 3, Queue: []byte("q"), SID: 1},
		{Op: Meta, Time: 4, Queue: []byte{}, SID: 99, Seq: 100},
		{Op: Reserve, Time: 5, Queue: []byte("q"), SID: 3, Due: 77, Deliveries: 2, Seq: 8},
		{Op: Move, Time: 6, Queue: []byte("q"), ID: []byte("y"), Due: 80, Seq: 9, Deliveries: 1, Flags: FlagHead},
		{Op: Del, Time: 7, Queue: []byte("q")},
		{Op: LMove, Time: 8, Queue: []byte("src"), SID: 4, Dst: []byte("dst"), DID: []byte("c"), Seq: 10, Flags: FlagHead},
		{Op: LMove, Time: 8, Queue: []byte("src"), ID: []byte("c"), Dst: []byte("src"), DSID: 5, Seq: 11},
		{Op: Flush, Time: 9, Queue: []byte{}},
		{Op: Add, Time: 10, Queue: []byte("q"), ID: []byte("u"), Retry: -1, UniqueTTL: 5000, DebounceUntil: 123,
			Group: []byte("tenant-7"), Priority: 9},
		{Op: Add, Time: 10, Queue: []byte("q"), SID: 3, Retry: -1, Priority: 2},
		{Op: Add, Time: 11, Queue: []byte("dlq"), SID: 3, Retry: -1,
			Origin: &jobs.Origin{Queue: []byte("q"), AckTimeout: 30000, Retry: 3, DeadLetter: []byte("dlq")}},
		{Op: Add, Time: 11, Queue: []byte("dlq"), ID: []byte("j"), Retry: -1, Priority: 1,
			Origin: &jobs.Origin{Queue: []byte(""), Retry: -1}},
		{Op: Pause, Time: 12, Queue: []byte("q"), Flags: 1},
		{Op: Pause, Time: 12, Queue: []byte("q")},
		{Op: Requeue, Time: 13, Queue: []byte("dlq"), SID: 4, Dst: []byte("q"), DSID: 4, Seq: 12,
			AckTimeout: 5000, Retry: 2, DeadLetter: []byte("dlq")},
		{Op: Requeue, Time: 13, Queue: []byte("dlq"), ID: []byte("a"), Dst: []byte("q"), DSID: 9, Seq: 13, Retry: -1},
		{Op: Add, Time: 14, Queue: []byte("dlq"), SID: 5, Retry: -1, Reason: []byte("db down"),
			Origin: &jobs.Origin{Queue: []byte("q"), Retry: 3}},
		{Op: Move, Time: 15, Queue: []byte("q"), SID: 5, Due: 90, Seq: 14, Deliveries: 2, Flags: FlagReady, Reason: []byte("timeout\x00")},
	} {
		var got Rec
		if err := got.Decode(r.Encode(nil)); err != nil {
			t.Fatalf("%+v: %v", r, err)
		}
		if got.Payload == nil && r.Op == Add {
			got.Payload = r.Payload
		}
		if !reflect.DeepEqual(normal(got), normal(r)) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, r)
		}
	}
}

// normal makes empty and nil byte slices compare equal.
func normal(r Rec) Rec {
	for _, b := range []*[]byte{&r.Queue, &r.Payload, &r.DeadLetter, &r.Dst, &r.Group, &r.Reason} {
		if len(*b) == 0 {
			*b = nil
		}
	}
	return r
}

// FuzzRecordDecode: any bytes either fail to decode or decode to a record
// that encodes back to the same bytes.
func FuzzRecordDecode(f *testing.F) {
	f.Add((&Rec{Op: Add, Time: 1, Queue: []byte("q"), SID: 42, Payload: []byte("p")}).Encode(nil))
	f.Add((&Rec{Op: Reserve, Time: 5, Queue: []byte("q"), ID: []byte("i"), Due: 77}).Encode(nil))
	f.Add((&Rec{Op: Del, Time: 7, Queue: []byte("q")}).Encode(nil))
	f.Add((&Rec{Op: LMove, Time: 8, Queue: []byte("a"), SID: 4, Dst: []byte("b"), DID: []byte("x"), Seq: 3}).Encode(nil))
	f.Add((&Rec{Op: Flush, Time: 9}).Encode(nil))
	f.Add((&Rec{Op: Add, Time: 1, Queue: []byte("q"), ID: []byte("u"), UniqueTTL: 9, Group: []byte("g"), Priority: 3}).Encode(nil))
	f.Add((&Rec{Op: Add, Time: 1, Queue: []byte("d"), SID: 2, Origin: &jobs.Origin{Queue: []byte("q"), AckTimeout: 5, Retry: 1, DeadLetter: []byte("d")}}).Encode(nil))
	f.Add((&Rec{Op: Pause, Time: 2, Queue: []byte("q"), Flags: 1}).Encode(nil))
	f.Add((&Rec{Op: Add, Time: 1, Queue: []byte("q"), SID: 2, Reason: []byte("r")}).Encode(nil))
	f.Add((&Rec{Op: Move, Time: 1, Queue: []byte("q"), SID: 2, Reason: []byte("r")}).Encode(nil))
	f.Add((&Rec{Op: Requeue, Time: 3, Queue: []byte("d"), ID: []byte("x"), Dst: []byte("q"), DSID: 7, Seq: 4, Retry: -1, DeadLetter: []byte("d")}).Encode(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Rec
		if r.Decode(b) != nil {
			return
		}
		var again Rec
		if err := again.Decode(r.Encode(nil)); err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if !reflect.DeepEqual(normal(again), normal(r)) {
			t.Fatalf("not stable:\n%+v\n%+v", r, again)
		}
	})
}

// Records written before failure reasons existed read unchanged: a move
// without its tail, an add without extReason; a tail with an unknown bit
// or an empty reason is refused.
func TestRecordReasonTailIsOptional(t *testing.T) {
	old := (&Rec{Op: Move, Time: 6, Queue: []byte("q"), ID: []byte("y"), Due: 80, Seq: 9, Deliveries: 1}).Encode(nil)
	var r Rec
	if err := r.Decode(old); err != nil || r.Reason != nil {
		t.Fatalf("a move without a tail: %v, reason %q", err, r.Reason)
	}
	for _, tail := range [][]byte{{2, 1, 'x'}, {1, 0}, {0}} {
		if err := r.Decode(append(append([]byte{}, old...), tail...)); err == nil {
			t.Errorf("tail %v accepted", tail)
		}
	}
	moved := (&Rec{Op: Move, Time: 6, Queue: []byte("q"), ID: []byte("y"), Reason: []byte("why")}).Encode(nil)
	if err := r.Decode(moved); err != nil || string(r.Reason) != "why" {
		t.Fatalf("a move with a reason: %v, %q", err, r.Reason)
	}
}

// AddPayload finds an add record's payload in its encoding, a client id's
// too, and only an add's; Tailed offers it with its id.
func TestAddPayload(t *testing.T) {
	r := Rec{Op: Add, Time: 5, Queue: []byte("q"), SID: 42, Due: 9, Seq: 3, Payload: []byte("the payload"), Retry: -1}
	b := r.Encode(nil)
	got, at, ok := AddPayload(b)
	if !ok || string(b[at:at+len(got.Payload)]) != "the payload" || got.SID != 42 || got.Seq != 3 {
		t.Fatalf("AddPayload: %v at %d, %+v", ok, at, got)
	}
	r.ID = []byte("client-id")
	b = r.Encode(nil)
	if got, at, ok := AddPayload(b); !ok || string(got.ID) != "client-id" || string(b[at:at+len(got.Payload)]) != "the payload" {
		t.Fatalf("AddPayload of a client id: %v at %d, %+v", ok, at, got)
	}
	var last Cand
	if _, _, ok := Tailed(1, 100, b, &last, 9); ok {
		t.Fatal("Tailed offered an add due at the time given")
	}
	if c, moved, ok := Tailed(1, 100, b, &last, 8); !ok || moved || c.ID != "client-id" || c.Seq != 3 || c.Queue != "q" || c.Off <= 100 {
		t.Fatalf("Tailed of a client id's add: %v %v %+v", ok, moved, c)
	}
	if _, _, ok := AddPayload((&Rec{Op: Cancel, Queue: []byte("q"), SID: 42}).Encode(nil)); ok {
		t.Fatal("AddPayload took a cancel")
	}
}

// KeptAt places an add record's payload in its segment from the record's
// offset, and only for a server id's job delayed beyond the time given,
// whose payload was decoded in place; MovedLater takes only a move of a
// server id that leaves the job delayed.
func TestKeptAtAndMovedLater(t *testing.T) {
	r := Rec{Op: Add, Time: 5, Queue: []byte("q"), SID: 42, Due: 9_000, Seq: 3, Payload: []byte("the payload"), Retry: -1}
	b := r.Encode(nil)
	var got Rec
	if err := got.Decode(b); err != nil {
		t.Fatal(err)
	}
	seg := append(make([]byte, 100), b...) // the record at offset 100 of its segment
	off, ok := got.KeptAt(b, 100, 8_999)
	if !ok || string(seg[off:off+int64(len(got.Payload))]) != "the payload" {
		t.Fatalf("KeptAt: %v at %d", ok, off)
	}
	if _, ok := got.KeptAt(b, 100, 9_000); ok {
		t.Fatal("KeptAt kept a job not due beyond the time given")
	}
	if _, ok := got.KeptAt(append([]byte(nil), b...), 100, 0); ok {
		t.Fatal("KeptAt kept a payload not read from the record given (a copy)")
	}
	ready := got
	ready.Flags = FlagReady
	if _, ok := ready.KeptAt(b, 100, 0); ok {
		t.Fatal("KeptAt kept a ready job's payload")
	}
	mv := Rec{Op: Move, Time: 6, Queue: []byte("q"), SID: 42, Due: 10_000, Seq: 4}
	if m, ok := MovedLater(mv.Encode(nil)); !ok || m.SID != 42 || m.Seq != 4 {
		t.Fatalf("MovedLater: %v %+v", ok, m)
	}
	mv.Flags = FlagReady
	if _, ok := MovedLater(mv.Encode(nil)); ok {
		t.Fatal("MovedLater took a move to the ready list")
	}
	if _, ok := MovedLater(b); ok {
		t.Fatal("MovedLater took an add")
	}
}
