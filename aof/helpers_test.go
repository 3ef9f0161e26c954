package aof

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// replayAll replays path and returns copies of the payloads.
func replayAll(fs FS, path string) ([][]byte, Result, error) {
	var got [][]byte
	res, err := Replay(fs, path, func(p []byte) error {
		got = append(got, slices.Clone(p))
		return nil
	})
	return got, res, err
}

// writeLog writes a new log at path holding payloads, flushed and fsynced.
func writeLog(t testing.TB, fs FS, path string, payloads [][]byte) {
	t.Helper()
	w, err := OpenAppend(fs, path, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range payloads {
		w.Append(p)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// encode returns the bytes of a log holding payloads.
func encode(payloads [][]byte) []byte {
	b := fileHeader()
	for _, p := range payloads {
		b = appendRecord(b, p)
	}
	return b
}

// randPayloads returns n payloads of random bytes with lengths in [minLen, maxLen].
func randPayloads(rng *rand.Rand, n, minLen, maxLen int) [][]byte {
	ps := make([][]byte, n)
	for i := range ps {
		p := make([]byte, minLen+rng.IntN(maxLen-minLen+1))
		for j := range p {
			p[j] = byte(rng.Uint32())
		}
		ps[i] = p
	}
	return ps
}

func samePayloads(t testing.TB, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("replayed %d records, want %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("record %d: got %d bytes %.16x..., want %d bytes %.16x...", i, len(got[i]), got[i], len(want[i]), want[i])
		}
	}
}
