package backup

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/delayd/delayd/queue"
	"github.com/delayd/delayd/record"
)

// body is a small snapshot: a meta record, a limit, a pause, a tombstone,
// and a ready, a delayed and a reserved job.
func body(t *testing.T) []byte {
	t.Helper()
	recs := []record.Rec{
		{Op: record.Meta, Time: 1000, SID: 7, Seq: 9},
		{Op: record.Limit, Time: 1000, Queue: []byte("q"), Limit: queue.Spec{Concurrency: 2}},
		{Op: record.Pause, Time: 1000, Queue: []byte("p"), Flags: 1},
		{Op: record.Tomb, Time: 1000, SID: 42, Due: 5000},
		{Op: record.Add, Time: 1000, Queue: []byte("q"), ID: []byte("a"), Due: 900, Seq: 1, Flags: record.FlagReady, Payload: []byte("x"), Retry: -1},
		{Op: record.Add, Time: 1000, Queue: []byte("q"), SID: 3, Due: 9000, Seq: 2, Payload: []byte("y"), Retry: -1},
		{Op: record.Add, Time: 1000, Queue: []byte("r"), ID: []byte("c"), Due: 900, Seq: 3, Deliveries: 1, Flags: record.FlagReserved,
			Deadline: 31000, AckTimeout: 30000, Retry: 3},
	}
	var out []byte
	for i := range recs {
		out = record.AppendSnap(out, recs[i].Encode(nil))
	}
	return record.EndSnap(out)
}

func sealed(t *testing.T) []byte {
	t.Helper()
	file := append(make([]byte, HeaderSize), body(t)...)
	file, _, err := Seal(file, Header{Mode: Cluster, Created: 1700000000123, Index: 77, Server: "0.3.0"})
	if err != nil {
		t.Fatal(err)
	}
	return file
}

// TestHeaderGolden pins the header byte for byte: a backup kept for a year
// must read the same.
func TestHeaderGolden(t *testing.T) {
	h := Header{Version: 1, Mode: Cluster, Created: 1700000000123, Index: 77, Body: 300, Records: 7, Jobs: 3, Server: "0.3.0"}
	got := hex.EncodeToString(h.Append(nil))
	const want = "444c5944424b5550" + "0100" + "02" + "00" + "7b68e5cf8b010000" + "4d00000000000000" +
		"2c01000000000000" + "0700000000000000" + "0300000000000000" +
		"05" + "302e332e30" + "00000000000000000000000000000000000000000000000000000000000000000000" +
		"ac591294"
	if got != want {
		t.Fatalf("header bytes changed:\n got %s\nwant %s", got, want)
	}
	back, err := ParseHeader(h.Append(nil))
	if err != nil || back != h {
		t.Fatalf("parsed back %+v, %v", back, err)
	}
}

func TestRoundTrip(t *testing.T) {
	file := sealed(t)
	h, c, err := Check(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if h.Mode != Cluster || h.Index != 77 || h.Server != "0.3.0" || h.Records != 7 || h.Jobs != 3 {
		t.Fatalf("header %+v", h)
	}
	if c.Ready != 1 || c.Delayed != 1 || c.Reserved != 1 || c.Limits != 1 || c.Pauses != 1 || c.Tombstones != 1 ||
		c.Queues["q"] != 2 || c.Queues["r"] != 1 {
		t.Fatalf("counts %+v", c)
	}
	// The Reader hands back the body's records as they were written.
	r, err := NewReader(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	for {
		b, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if b == nil {
			break
		}
		got = record.AppendSnap(got, b)
	}
	if !bytes.Equal(record.EndSnap(got), body(t)) {
		t.Fatal("records read back differ from those written")
	}
}

// TestDamageRefused: every way a file goes wrong is refused with its own
// error, before the end is reported good.
func TestDamageRefused(t *testing.T) {
	good := sealed(t)
	flip := func(off int) []byte {
		b := bytes.Clone(good)
		b[off] ^= 0x10
		return b
	}
	for _, tc := range []struct {
		name string
		file []byte
		want error
		text string
	}{
		{"empty", nil, ErrNotBackup, "not a delayd backup"},
		{"not a backup", []byte("DLYD\x01\x00\x00\x00 an aof"), ErrNotBackup, ""},
		{"header cut", good[:50], ErrTruncated, "header alone"},
		{"body cut", good[:HeaderSize+20], ErrTruncated, "of " + itoa(len(good)) + " bytes"},
		{"trailer cut", good[:len(good)-2], ErrTruncated, "truncated"},
		{"one byte after", append(bytes.Clone(good), 0), ErrDamaged, "after the checksum"},
		{"header bit", flip(40), ErrChecksum, "header"},
		{"body bit", flip(HeaderSize + 30), ErrChecksum, ""},
		{"trailer bit", flip(len(good) - 1), ErrChecksum, ""},
		{"newer version", func() []byte { b := bytes.Clone(good); b[8] = 2; return b }(), ErrVersion, "version 2: this delayd reads version 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Check(bytes.NewReader(tc.file))
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("%q does not say %q", err, tc.text)
			}
		})
	}
	// Every truncation and every single flipped bit is refused.
	for n := range len(good) {
		if _, _, err := Check(bytes.NewReader(good[:n])); err == nil {
			t.Fatalf("cut at %d of %d: accepted", n, len(good))
		}
	}
	for off := range len(good) {
		for bit := range 8 {
			b := bytes.Clone(good)
			b[off] ^= 1 << bit
			if _, _, err := Check(bytes.NewReader(b)); err == nil {
				t.Fatalf("bit %d of byte %d flipped: accepted", bit, off)
			}
		}
	}
}

func TestSealRefusesBadBody(t *testing.T) {
	file := append(make([]byte, HeaderSize), body(t)...)
	if _, _, err := Seal(file[:len(file)-1], Header{Mode: Single}); !errors.Is(err, ErrDamaged) {
		t.Fatalf("no end mark: %v", err)
	}
	bad := append(make([]byte, HeaderSize), record.EndSnap(record.AppendSnap(nil, []byte{200, 1, 2}))...)
	if _, _, err := Seal(bad, Header{Mode: Single}); !errors.Is(err, ErrDamaged) {
		t.Fatalf("unknown kind: %v", err)
	}
}

func itoa(n int) string {
	var b []byte
	for n > 0 || len(b) == 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}
