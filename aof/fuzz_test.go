package aof

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

// FuzzReplay feeds arbitrary bytes to Replay as a log file. It must never
// panic; it either succeeds, leaving exactly the good prefix, which is the
// canonical encoding of the records it returned, or reports a *CorruptError
// at an offset inside the file and changes nothing. Repair then always yields
// a log that replays cleanly.
func FuzzReplay(f *testing.F) {
	if golden, err := os.ReadFile("testdata/golden.aof"); err == nil {
		f.Add(golden)
	}
	l := newLayout([][]byte{[]byte("one"), []byte("two two"), bytes.Repeat([]byte("3"), 40)})
	for _, c := range corruptions(l) {
		f.Add(c.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const path = "/fuzz.aof"
		fs := NewMemFS()
		fs.WriteFile(path, data)
		got, res, err := replayAll(fs, path)
		after, _ := fs.ReadFile(path)
		if err != nil {
			var ce *CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Replay error %v is not a *CorruptError", err)
			}
			if ce.Offset < 0 || ce.Offset >= int64(len(data)) || ce.Offset != res.Size {
				t.Fatalf("corruption at %d (Size %d) in a %d-byte file", ce.Offset, res.Size, len(data))
			}
			if !bytes.Equal(after, data) {
				t.Fatal("Replay changed a corrupt log")
			}
		} else {
			if res.Records != len(got) || res.Size+res.TornBytes != int64(len(data)) || !bytes.Equal(after, data[:res.Size]) {
				t.Fatalf("Result %+v for %d records, a %d-byte file, %d bytes left", res, len(got), len(data), len(after))
			}
			if res.Size != 0 && !bytes.Equal(encode(got), after) {
				t.Fatal("the good prefix is not the encoding of the records replayed")
			}
			// And the records replay the same through the Writer.
			w, err := OpenAppend(fs, "/again.aof", 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range got {
				w.Append(p)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			again, res2, err := replayAll(fs, "/again.aof")
			if err != nil || res2.TornBytes != 0 {
				t.Fatalf("replay of the re-encoded records: %+v, %v", res2, err)
			}
			samePayloads(t, again, got)
		}

		fs.WriteFile(path, data)
		cut, err := Repair(fs, path)
		if err != nil {
			t.Fatalf("Repair: %v", err)
		}
		repaired, _, err := replayAll(fs, path)
		if err != nil {
			t.Fatalf("Replay after Repair: %v", err)
		}
		if cut != res.Size {
			t.Fatalf("Repair cut at %d, Replay stopped at %d", cut, res.Size)
		}
		samePayloads(t, repaired, got)
	})
}
