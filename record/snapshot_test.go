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
