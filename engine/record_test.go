package engine

import (
	"reflect"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range []rec{
		{op: opAdd, time: 1, queue: []byte("q"), sid: 42, due: 5, seq: 7, deliveries: 1, flags: flagReady,
			payload: []byte("p\x00"), ackTimeout: 100, retry: -1, deadLetter: []byte("dlq"), deadline: 9},
		{op: opAdd, time: 1, queue: []byte(""), id: []byte("client-id"), due: -3, retry: 2},
		{op: opCancel, time: 2, queue: []byte("q"), id: []byte("x")},
		{op: opPop, time: 3, queue: []byte("q"), sid: 1},
		{op: opMeta, time: 4, queue: []byte{}, sid: 99, seq: 100},
		{op: opReserve, time: 5, queue: []byte("q"), sid: 3, due: 77, deliveries: 2, seq: 8},
		{op: opMove, time: 6, queue: []byte("q"), id: []byte("y"), due: 80, seq: 9, deliveries: 1, flags: flagHead},
		{op: opDel, time: 7, queue: []byte("q")},
		{op: opLMove, time: 8, queue: []byte("src"), sid: 4, dst: []byte("dst"), did: []byte("c"), seq: 10, flags: flagHead},
		{op: opLMove, time: 8, queue: []byte("src"), id: []byte("c"), dst: []byte("src"), dsid: 5, seq: 11},
		{op: opFlush, time: 9, queue: []byte{}},
		{op: opAdd, time: 10, queue: []byte("q"), id: []byte("u"), retry: -1, uniqueTTL: 5000, debounceUntil: 123,
			group: []byte("tenant-7"), priority: 9},
		{op: opAdd, time: 10, queue: []byte("q"), sid: 3, retry: -1, priority: 2},
		{op: opAdd, time: 11, queue: []byte("dlq"), sid: 3, retry: -1,
			origin: &origin{Queue: []byte("q"), AckTimeout: 30000, Retry: 3, DeadLetter: []byte("dlq")}},
		{op: opAdd, time: 11, queue: []byte("dlq"), id: []byte("j"), retry: -1, priority: 1,
			origin: &origin{Queue: []byte(""), Retry: -1}},
		{op: opPause, time: 12, queue: []byte("q"), flags: 1},
		{op: opPause, time: 12, queue: []byte("q")},
		{op: opRequeue, time: 13, queue: []byte("dlq"), sid: 4, dst: []byte("q"), dsid: 4, seq: 12,
			ackTimeout: 5000, retry: 2, deadLetter: []byte("dlq")},
		{op: opRequeue, time: 13, queue: []byte("dlq"), id: []byte("a"), dst: []byte("q"), dsid: 9, seq: 13, retry: -1},
		{op: opAdd, time: 14, queue: []byte("dlq"), sid: 5, retry: -1, reason: []byte("db down"),
			origin: &origin{Queue: []byte("q"), Retry: 3}},
		{op: opMove, time: 15, queue: []byte("q"), sid: 5, due: 90, seq: 14, deliveries: 2, flags: flagReady, reason: []byte("timeout\x00")},
	} {
		var got rec
		if err := got.decode(r.encode(nil)); err != nil {
			t.Fatalf("%+v: %v", r, err)
		}
		if got.payload == nil && r.op == opAdd {
			got.payload = r.payload
		}
		if !reflect.DeepEqual(normal(got), normal(r)) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, r)
		}
	}
}

// normal makes empty and nil byte slices compare equal.
func normal(r rec) rec {
	for _, b := range []*[]byte{&r.queue, &r.payload, &r.deadLetter, &r.dst, &r.group, &r.reason} {
		if len(*b) == 0 {
			*b = nil
		}
	}
	return r
}

// FuzzRecordDecode: any bytes either fail to decode or decode to a record
// that encodes back to the same bytes.
func FuzzRecordDecode(f *testing.F) {
	f.Add((&rec{op: opAdd, time: 1, queue: []byte("q"), sid: 42, payload: []byte("p")}).encode(nil))
	f.Add((&rec{op: opReserve, time: 5, queue: []byte("q"), id: []byte("i"), due: 77}).encode(nil))
	f.Add((&rec{op: opDel, time: 7, queue: []byte("q")}).encode(nil))
	f.Add((&rec{op: opLMove, time: 8, queue: []byte("a"), sid: 4, dst: []byte("b"), did: []byte("x"), seq: 3}).encode(nil))
	f.Add((&rec{op: opFlush, time: 9}).encode(nil))
	f.Add((&rec{op: opAdd, time: 1, queue: []byte("q"), id: []byte("u"), uniqueTTL: 9, group: []byte("g"), priority: 3}).encode(nil))
	f.Add((&rec{op: opAdd, time: 1, queue: []byte("d"), sid: 2, origin: &origin{Queue: []byte("q"), AckTimeout: 5, Retry: 1, DeadLetter: []byte("d")}}).encode(nil))
	f.Add((&rec{op: opPause, time: 2, queue: []byte("q"), flags: 1}).encode(nil))
	f.Add((&rec{op: opAdd, time: 1, queue: []byte("q"), sid: 2, reason: []byte("r")}).encode(nil))
	f.Add((&rec{op: opMove, time: 1, queue: []byte("q"), sid: 2, reason: []byte("r")}).encode(nil))
	f.Add((&rec{op: opRequeue, time: 3, queue: []byte("d"), id: []byte("x"), dst: []byte("q"), dsid: 7, seq: 4, retry: -1, deadLetter: []byte("d")}).encode(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r rec
		if r.decode(b) != nil {
			return
		}
		var again rec
		if err := again.decode(r.encode(nil)); err != nil {
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
	old := (&rec{op: opMove, time: 6, queue: []byte("q"), id: []byte("y"), due: 80, seq: 9, deliveries: 1}).encode(nil)
	var r rec
	if err := r.decode(old); err != nil || r.reason != nil {
		t.Fatalf("a move without a tail: %v, reason %q", err, r.reason)
	}
	for _, tail := range [][]byte{{2, 1, 'x'}, {1, 0}, {0}} {
		if err := r.decode(append(append([]byte{}, old...), tail...)); err == nil {
			t.Errorf("tail %v accepted", tail)
		}
	}
	moved := (&rec{op: opMove, time: 6, queue: []byte("q"), id: []byte("y"), reason: []byte("why")}).encode(nil)
	if err := r.decode(moved); err != nil || string(r.reason) != "why" {
		t.Fatalf("a move with a reason: %v, %q", err, r.reason)
	}
}
