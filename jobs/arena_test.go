package jobs

import (
	"bytes"
	"testing"
)

// TestDataWordKeepsPayloadLength: the payload length a job keeps in its
// data word's spare bits comes back exactly, for small and big blocks, up
// to the engine's largest payload (64 MiB), and the arena reads and frees through the packed word.
// maxPayload is the engine's largest payload (engine.MaxPayload).
const maxPayload = 64 << 20

func TestDataWordKeepsPayloadLength(t *testing.T) {
	var a Arena
	defer a.Release()
	// Spread refs over several chunks, so chunk numbers above 0 are packed too.
	var filler []uint64
	for range 3 * chunkSize / 64 {
		filler = append(filler, a.Alloc(make([]byte, 64)))
	}
	for _, idLen := range []int{0, 5} {
		for _, plen := range []int{0, 1, 16, maxClass - 5, maxClass, maxClass + 1, 1 << 20, maxPayload} {
			b := make([]byte, idLen+plen)
			for i := range b {
				b[i] = byte(i*7 + idLen)
			}
			data := PackData(a.Alloc(b), plen)
			if got := PlenOf(data); got != uint32(plen) {
				t.Fatalf("id %d, payload %d: PlenOf = %d", idLen, plen, got)
			}
			if got := a.Bytes(data, len(b)); !bytes.Equal(got, b) {
				t.Fatalf("id %d, payload %d: bytes through the data word differ", idLen, plen)
			}
			j := Job{Data: data, IDLen: uint16(idLen)}
			if got := DataSize(&j); len(b) > 0 && got < int64(len(b)) {
				t.Fatalf("id %d, payload %d: DataSize %d", idLen, plen, got)
			}
			a.Free(data, len(b))
		}
	}
	for _, r := range filler {
		a.Free(PackData(r, 64), 64)
	}
	if a.InUse != 0 {
		t.Fatalf("%d bytes in use after freeing everything", a.InUse)
	}
}
