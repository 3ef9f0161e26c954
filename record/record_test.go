package record

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"testing"

	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/queue"
	"github.com/delayd/delayd/schedule"
)

// golden is one record of every kind (two where a kind has a variant) and
// its bytes, as the engine wrote them before the codec moved here: old
// logs must replay, so these bytes never change.
var golden = []struct {
	r   Rec
	hex string
}{
	{Rec{Op: Add, Time: 1700000000123, Queue: []byte("q"), SID: 42, Due: 1700000005000, Seq: 7, Deliveries: 2, Flags: FlagReady,
		Payload: []byte("hello"), AckTimeout: 30000, Retry: -1, DeadLetter: []byte("dead")},
		"01f6a1abfef9620171002a90eeabfef9620702020568656c6c6fe0d40301046465616400"},
	{Rec{Op: Add, Time: 1700000000123, Queue: []byte("q"), ID: []byte("job-1"), Due: 1700000005000, Seq: 8, Flags: FlagReserved,
		Payload: []byte("x"), AckTimeout: 1000, Retry: 5, Deadline: 1700000009000, UniqueTTL: 60000, DebounceUntil: 1700000010000,
		Group: []byte("g"), Priority: 9, Reason: []byte("boom"),
		Origin: &jobs.Origin{Queue: []byte("src"), AckTimeout: 30000, Retry: 3, DeadLetter: []byte("dl")}},
		"01f6a1abfef962017101056a6f622d3190eeabfef9620800040178d00f0a00d0acacfef9623fc0a907a0bcacfef96201670903737263e0d4030602646c04626f6f6d"},
	{Rec{Op: Cancel, Time: 5, Queue: []byte("q"), SID: 3}, "020a01710003"},
	{Rec{Op: Pop, Time: 6, Queue: []byte("q"), ID: []byte("abc")}, "030c01710103616263"},
	{Rec{Op: Meta, Time: 7, Queue: []byte{}, SID: 99, Seq: 1234}, "040e000063d209"},
	{Rec{Op: Reserve, Time: 8, Queue: []byte("q"), SID: 3, Due: 1700000020000, Deliveries: 1, Seq: 77}, "051001710003c0d8adfef962014d"},
	{Rec{Op: Move, Time: 9, Queue: []byte("q"), SID: 3, Due: 1700000030000, Seq: 78, Deliveries: 2, Flags: FlagHead},
		"061201710003e0f4aefef9624e0201"},
	{Rec{Op: Move, Time: 9, Queue: []byte("q"), ID: []byte("j"), Due: 1700000030000, Seq: 78, Deliveries: 2, Flags: FlagReady, Reason: []byte("why")},
		"0612017101016ae0f4aefef9624e02020103776879"},
	{Rec{Op: Del, Time: 10, Queue: []byte("q")}, "07140171"},
	{Rec{Op: LMove, Time: 11, Queue: []byte("a"), SID: 4, Dst: []byte("b"), DSID: 5, Seq: 80, Flags: FlagHead},
		"091601610004016200055001"},
	{Rec{Op: LMove, Time: 11, Queue: []byte("a"), ID: []byte("i"), Dst: []byte("b"), DID: []byte("i"), Seq: 81, Flags: FlagReady},
		"0916016101016901620101695102"},
	{Rec{Op: Flush, Time: 12, Queue: []byte{}}, "0a1800"},
	{Rec{Op: Schedule, Time: 13, Queue: []byte("q"), ID: []byte("nightly"), Payload: []byte("p"), AckTimeout: -1, Retry: -1, DeadLetter: []byte("dl"),
		Sched: &schedule.Rec{Expr: []byte("0 3 * * *"), Zone: []byte("Europe/Paris"), Misfire: 1, Start: 1, End: 2, Since: 3, Last: 4, Count: 5}},
		"0b1a017101076e696768746c7909302033202a202a202a0c4575726f70652f5061726973000170010102646c010204060805"},
	{Rec{Op: Schedule, Time: 13, Queue: []byte("q"), ID: []byte("every"), Payload: []byte("p"), AckTimeout: 100, Retry: 2,
		Sched: &schedule.Rec{Every: 60000, Misfire: 2, Since: 3}},
		"0b1a0171010565766572790000c0a9070170c8010400020000060000"},
	{Rec{Op: Unschedule, Time: 14, Queue: []byte("q"), ID: []byte("nightly")}, "0c1c017101076e696768746c79"},
	{Rec{Op: Fire, Time: 15, Queue: []byte("q"), ID: []byte("nightly"), Due: 1700000040000, Seq: 90}, "0d1e017101076e696768746c798091b0fef9625a"},
	{Rec{Op: Tomb, Time: 16, SID: 0xdeadbeefcafe, Due: 1700000050000}, "0e20fe95bff7dbd537a0adb1fef962"},
	{Rec{Op: Limit, Time: 17, Queue: []byte("q"), Limit: queue.Spec{Concurrency: 3, Rate: 10, Per: 1000, GroupConcurrency: 1}},
		"0f220171030ae80701"},
	{Rec{Op: Limit, Time: 17, Queue: []byte("q")}, "0f22017100000000"},
	{Rec{Op: Pause, Time: 18, Queue: []byte("q"), Flags: 1}, "1024017101"},
	{Rec{Op: Pause, Time: 18, Queue: []byte("q")}, "1024017100"},
	{Rec{Op: Requeue, Time: 19, Queue: []byte("dl"), SID: 6, Dst: []byte("src"), DID: []byte("k"), Seq: 91, AckTimeout: 30000, Retry: 3, DeadLetter: []byte("dl")},
		"112602646c00060373726301016b5be0d4030602646c"},
	{Rec{Op: Requeue, Time: 19, Queue: []byte("dl"), ID: []byte("k"), Dst: []byte("src"), DSID: 7, Seq: 92, AckTimeout: -1, Retry: -1},
		"112602646c01016b0373726300075c010100"},
}

// TestGolden encodes one record of every kind to the bytes the engine
// wrote before this package existed, and decodes them back.
func TestGolden(t *testing.T) {
	for _, g := range golden {
		name := Name(g.r.Op)
		b := g.r.Encode(nil)
		if got := hex.EncodeToString(b); got != g.hex {
			t.Errorf("%s: encoded %s, want %s", name, got, g.hex)
			continue
		}
		var d Rec
		if err := d.Decode(b); err != nil {
			t.Errorf("%s: decode: %v", name, err)
			continue
		}
		if !reflect.DeepEqual(d, g.r) {
			t.Errorf("%s: decoded %+v, want %+v", name, d, g.r)
		}
		// A prefix is torn, and so malformed, unless it is a whole record
		// without the optional tail: then it reads back to itself.
		for n := range len(b) {
			if err := d.Decode(b[:n]); err == nil && !bytes.Equal(d.Encode(nil), b[:n]) {
				t.Errorf("%s: %d of %d bytes decoded to another record", name, n, len(b))
			}
		}
	}
}

// TestUnit frames a transaction's parts.
func TestUnit(t *testing.T) {
	b := AppendUnit(nil, 1, 1, []byte("body"))
	if got := hex.EncodeToString(b); got != "08010162"+"6f6479" {
		t.Fatalf("unit: %s", got)
	}
	part, more, body, err := DecodeUnit(b)
	if err != nil || part != 1 || more != 1 || !bytes.Equal(body, []byte("body")) {
		t.Fatalf("DecodeUnit: %d %d %q %v", part, more, body, err)
	}
	if _, _, _, err := DecodeUnit([]byte{Unit, 0, 2}); err == nil {
		t.Fatal("more 2 decoded")
	}
	var r Rec
	if err := r.Decode(b); err == nil {
		t.Fatal("a unit decoded as a Rec")
	}
}

// TestEveryKindEncodes fails when a kind in Kinds has no golden record,
// that is, when a kind was added without its encoding and decoding being
// pinned here (the engine's TestEveryKindRegistered checks the rest: apply
// and rewrite).
func TestEveryKindEncodes(t *testing.T) {
	seen := map[byte]bool{Unit: true} // TestUnit
	for _, g := range golden {
		seen[g.r.Op] = true
	}
	ops := map[byte]bool{}
	for _, k := range Kinds {
		if ops[k.Op] {
			t.Errorf("op %d is taken twice", k.Op)
		}
		ops[k.Op] = true
		if k.Name == "" {
			t.Errorf("op %d has no name", k.Op)
		}
		if !seen[k.Op] {
			t.Errorf("kind %s (op %d) has no golden record: add one to golden", k.Name, k.Op)
		}
	}
	for op := range seen {
		if !ops[op] {
			t.Errorf("op %d has a golden record but no row in Kinds", op)
		}
	}
}

// TestNonCanonical refuses tails Encode never writes.
func TestNonCanonical(t *testing.T) {
	for _, h := range []string{
		"01f6a1abfef9620171002a90eeabfef9620702020568656c6c6fe0d4030104646561640000", // add, tail of no bits
		"061201710003e0f4aefef9624e020100",                                           // move, tail of no bits
		"0b1a0171002a00000001700000000000000000000000",                               // schedule with a server id
		"1024017102", // pause 2
	} {
		b, _ := hex.DecodeString(h)
		var r Rec
		if err := r.Decode(b); err == nil {
			t.Errorf("%s decoded", h)
		}
	}
}

// A checkpoint's mark is a meta record (an old release applies it as one)
// whose queue field says which checkpoint; nothing else reads as a mark.
func TestFarMark(t *testing.T) {
	r := Rec{Op: Meta, Time: 5, SID: 9, Seq: 7, Queue: FarMark(300)}
	var got Rec
	if err := got.Decode(r.Encode(nil)); err != nil {
		t.Fatal(err)
	}
	if n, ok := MarkOf(&got); !ok || n != 300 || got.SID != 9 || got.Seq != 7 {
		t.Fatalf("MarkOf = %d, %v; record %+v", n, ok, got)
	}
	for _, r := range []Rec{
		{Op: Meta, Time: 5, SID: 9, Seq: 7},
		{Op: Add, Queue: FarMark(300)},
		{Op: Meta, Queue: FarMark(300)[:len(FarMark(300))-1]},
		{Op: Meta, Queue: append(FarMark(300), 0)},
	} {
		if n, ok := MarkOf(&r); ok {
			t.Errorf("MarkOf(%+v) = %d, true", r, n)
		}
	}
}
