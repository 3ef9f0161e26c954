package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/delayd/delayd/aof"
)

func TestSnapshotFraming(t *testing.T) {
	var out []byte
	out = AppendSnap(out, []byte("one"))
	out = AppendSnap(out, []byte("two"))
	whole := EndSnap(out)
	sr := NewSnapReader(bytes.NewReader(whole))
	for _, want := range []string{"one", "two"} {
		if b, err := sr.Next(); err != nil || string(b) != want {
			t.Fatalf("Next = %q, %v; want %q", b, err, want)
		}
	}
	if b, err := sr.Next(); b != nil || err != nil {
		t.Fatalf("at the end mark: %q, %v", b, err)
	}
	bad := map[string][]byte{
		"cut short":      out,
		"cut in record":  whole[:5],
		"after the end":  append(bytes.Clone(whole), 1),
		"over the limit": binary.AppendUvarint(nil, aof.MaxRecordSize+1),
	}
	for name, in := range bad {
		sr := NewSnapReader(bytes.NewReader(in))
		var err error
		for err == nil {
			var b []byte
			if b, err = sr.Next(); b == nil && err == nil {
				t.Fatalf("%s: read as whole", name)
			}
		}
		if name == "cut short" && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// A snapshot's size mark and jobs' end mark read back, and neither is
// taken for the other or for a far-future checkpoint's mark.
func TestSnapshotMarks(t *testing.T) {
	for _, c := range [][2]uint64{{0, 0}, {1, 2}, {10_000_000, 3}, {1 << 40, 1 << 33}} {
		r := Rec{Op: Meta, Time: 5, SID: 9, Seq: 7, Queue: SizeMark(c[0], c[1])}
		var back Rec
		if err := back.Decode(r.Encode(nil)); err != nil {
			t.Fatal(err)
		}
		if cl, s, ok := SizeOf(&back); !ok || cl != c[0] || s != c[1] {
			t.Fatalf("SizeOf(SizeMark(%d, %d)) = %d, %d, %v", c[0], c[1], cl, s, ok)
		}
		if IsJobsEnd(&back) {
			t.Fatal("a size mark read as the jobs' end")
		}
		if _, ok := MarkOf(&back); ok {
			t.Fatal("a size mark read as a far-future mark")
		}
	}
	end := Rec{Op: Meta, Queue: JobsEndMark}
	if _, _, ok := SizeOf(&end); ok || !IsJobsEnd(&end) {
		t.Fatal("the jobs' end mark misread")
	}
	for _, r := range []Rec{{Op: Add, Queue: JobsEndMark}, {Op: Add, Queue: SizeMark(1, 1)}, {Op: Meta, Queue: FarMark(3)},
		{Op: Meta, Queue: []byte("\x00snapshot-size:")}, {Op: Meta, Queue: append(SizeMark(1, 1), 0)}} {
		if _, _, ok := SizeOf(&r); ok || IsJobsEnd(&r) {
			t.Fatalf("%v %q read as a snapshot mark", r.Op, r.Queue)
		}
	}
}
