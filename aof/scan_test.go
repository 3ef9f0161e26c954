package aof

import (
	"bytes"
	"os"
	"testing"
	"unsafe"
)

// ReadRange reads back the records a Writer flushed, with their payloads'
// offsets, across its buffer's refills and for a record bigger than it;
// it stops before a record that straddles its end or is torn, and goes on
// from there.
func TestReadRange(t *testing.T) {
	fs := NewMemFS()
	w, err := Create(fs, "/log")
	if err != nil {
		t.Fatal(err)
	}
	var want [][]byte
	for i := range 3000 {
		p := bytes.Repeat([]byte{byte(i)}, 1+i%700)
		if i == 1500 {
			p = bytes.Repeat([]byte{'b'}, 3<<20) // past the 1 MiB buffer
		}
		want = append(want, p)
		w.Append(p)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	size := w.Size()
	f, err := fs.OpenFile("/log", os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got int
	var buf []byte
	read := func(from, to int64) int64 {
		var next int64
		var err error
		buf, next, err = ReadRange(f, buf, from, to, func(off int64, p []byte) {
			b := make([]byte, len(p))
			if _, err := f.ReadAt(b, off); err != nil || !bytes.Equal(b, p) || (got < len(want) && !bytes.Equal(p, want[got])) {
				t.Fatalf("record %d at %d: %d bytes, %v", got, off, len(p), err)
			}
			got++
		})
		if err != nil {
			t.Fatal(err)
		}
		return next
	}
	mid := read(HeaderSize, size/3) // stops before the record that straddles size/3
	if mid > size/3 || got == 0 {
		t.Fatalf("read to %d of %d, %d records", mid, size/3, got)
	}
	if end := read(mid, size); end != size || got != len(want) {
		t.Fatalf("ended at %d of %d with %d of %d records", end, size, got, len(want))
	}
	if cap(buf) > rangeBuf {
		t.Fatalf("the 3 MiB record's buffer (%d bytes) was kept", cap(buf))
	}
	// A record cut short (a batch being written, or a torn tail): read up
	// to it, then nothing.
	w.Append([]byte("torn"))
	w.Flush()
	if end := read(size, w.Size()-1); end != size {
		t.Fatalf("read past a record cut short to %d", end)
	}
	if end := read(size, w.Size()); end != w.Size() || got != len(want)+1 {
		t.Fatalf("then whole: to %d of %d", end, w.Size())
	}
	// A tail reads a little each call: one buffer serves them all.
	read(HeaderSize, HeaderSize+4096)
	kept := unsafe.SliceData(buf)
	if cap(buf) != rangeBuf {
		t.Fatalf("the buffer handed back holds %d bytes, want %d", cap(buf), rangeBuf)
	}
	read(HeaderSize, HeaderSize+4096)
	if unsafe.SliceData(buf) != kept {
		t.Fatal("a call made a new buffer instead of reusing the one handed in")
	}
}
