package aof

import (
	"bytes"
	"encoding/binary"
	"flag"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.aof from the current writer")

// goldenRecords are the records of testdata/golden.aof.
func goldenRecords() [][]byte {
	pattern := make([]byte, 300) // a length that needs two bytes
	for i := range pattern {
		pattern[i] = byte(i * 7)
	}
	return [][]byte{
		[]byte("a"),
		[]byte("DELAY.ADD q 1700000000000 hello"),
		pattern,
		{0, 0, 0, 0}, // zeros inside a payload are data, not zero fill
	}
}

// TestGolden pins the format: what the Writer writes for fixed records must be
// testdata/golden.aof byte for byte. Run with -update only when the format
// changes on purpose, and bump Version.
func TestGolden(t *testing.T) {
	path := filepath.Join(t.TempDir(), "golden.aof")
	writeLog(t, OS, path, goldenRecords())
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "golden.aof")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestGolden -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the writer's bytes differ from %s: the on-disk format changed\ngot  %x\nwant %x", golden, got, want)
	}
	recs, res, err := replayAll(OS, golden)
	if err != nil {
		t.Fatal(err)
	}
	samePayloads(t, recs, goldenRecords())
	if res.Size != int64(len(want)) || res.TornBytes != 0 {
		t.Fatalf("Result = %+v, want Size %d and no torn bytes", res, len(want))
	}
}

// TestFormat spells the format out independently of the encoder: the header,
// then length, CRC-32C over length and payload, payload.
func TestFormat(t *testing.T) {
	got := encode([][]byte{[]byte("hi")})
	want := []byte{'D', 'L', 'Y', 'D', 1, 0, 0, 0, 2, 0, 0, 0}
	sum := crc32.Checksum([]byte{2, 0, 0, 0, 'h', 'i'}, crc32.MakeTable(crc32.Castagnoli))
	want = binary.LittleEndian.AppendUint32(want, sum)
	want = append(want, 'h', 'i')
	if !bytes.Equal(got, want) {
		t.Fatalf("encode = %x, want %x", got, want)
	}
}
