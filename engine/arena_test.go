package engine

import (
	"bytes"
	"testing"
)

// TestDataWordKeepsPayloadLength: the payload length a job keeps in its
// data word's spare bits comes back exactly, for small and big blocks, up
// to MaxPayload, and the arena reads and frees through the packed word.
func TestDataWordKeepsPayloadLength(t *testing.T) {
	var a arena
	defer a.release()
	// Spread refs over several chunks, so chunk numbers above 0 are packed too.
	var filler []uint64
	for range 3 * chunkSize / 64 {
		filler = append(filler, a.alloc(make([]byte, 64)))
	}
	for _, idLen := range []int{0, 5} {
		for _, plen := range []int{0, 1, 16, maxClass - 5, maxClass, maxClass + 1, 1 << 20, MaxPayload} {
			b := make([]byte, idLen+plen)
			for i := range b {
				b[i] = byte(i*7 + idLen)
			}
			data := packData(a.alloc(b), plen)
			if got := plenOf(data); got != uint32(plen) {
				t.Fatalf("id %d, payload %d: plenOf = %d", idLen, plen, got)
			}
			if got := a.bytes(data, len(b)); !bytes.Equal(got, b) {
				t.Fatalf("id %d, payload %d: bytes through the data word differ", idLen, plen)
			}
			j := job{data: data, idLen: uint16(idLen)}
			if got := dataSize(&j); len(b) > 0 && got < int64(len(b)) {
				t.Fatalf("id %d, payload %d: dataSize %d", idLen, plen, got)
			}
			a.free(data, len(b))
		}
	}
	for _, r := range filler {
		a.free(packData(r, 64), 64)
	}
	if a.inUse != 0 {
		t.Fatalf("%d bytes in use after freeing everything", a.inUse)
	}
}
