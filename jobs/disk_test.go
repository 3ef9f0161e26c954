package jobs

import (
	"bytes"
	"fmt"
	"testing"
)

// fakeLog is a DiskReader over one segment held in memory.
type fakeLog struct{ seg []byte }

func (f *fakeLog) ReadPayload(seg uint16, off int64, n int) ([]byte, error) {
	if seg != 3 || off < 0 || int(off)+n > len(f.seg) {
		return nil, fmt.Errorf("no payload at %d:%d+%d", seg, off, n)
	}
	return bytes.Clone(f.seg[off : off+int64(n)]), nil
}

// A job's payload goes to disk and back, a client id's as a server id's:
// the id stays readable and findable meanwhile, the payload reads from
// the log, a read-ahead's Back puts it back, and every path gives the
// arena back what it took (Spill, Unspill, FreeData, Keep, Free).
func TestPayloadOnDiskWithEachKindOfID(t *testing.T) {
	for _, id := range [][]byte{nil, []byte("order-7"), bytes.Repeat([]byte("i"), 200)} {
		tb := newTable(t)
		run := tb.NewRun()
		log := &fakeLog{seg: []byte("......the payload of the job......")}
		tb.SetDisk(log)
		payload := []byte("the payload of the job")
		const off = 6
		base := tb.Arena.InUse
		s := add(tb, nil, 0, id, 42, payload)
		j := tb.At(s)
		j.State = StateDelayed
		var buf [SIDLen]byte
		wantID := string(tb.ID(j, &buf))
		if !CanSpill(j, off) {
			t.Fatalf("id %q: CanSpill false", id)
		}
		check := func(when string) {
			t.Helper()
			if got := string(tb.ID(j, &buf)); got != wantID {
				t.Fatalf("id %q %s: ID %q", id, when, got)
			}
			if got, ok := tb.Lookup(&run, 0, []byte(wantID)); !ok || got != s {
				t.Fatalf("id %q %s: Lookup %d %v", id, when, got, ok)
			}
			if got := tb.Payload(j); !bytes.Equal(got, payload) {
				t.Fatalf("id %q %s: Payload %q", id, when, got)
			}
			if j.Plen() != uint32(len(payload)) || DataSize(j) != DataSize(&Job{IDLen: uint16(len(id)), Data: PackData(0, len(payload))}) {
				t.Fatalf("id %q %s: length %d, size %d", id, when, j.Plen(), DataSize(j))
			}
		}
		for round := range 2 {
			tb.Spill(j, 3, off)
			if j.Flags&FlagOnDisk == 0 || tb.DiskInfo().Jobs != 1 || tb.DiskInfo().Bytes != int64(len(payload)) {
				t.Fatalf("id %q: not on disk: %+v", id, tb.DiskInfo())
			}
			if seg, o, n := LocOf(j); seg != 3 || o != off || n != len(payload) {
				t.Fatalf("id %q: LocOf %d %d %d", id, seg, o, n)
			}
			if id != nil && j.ServerID() != 0 {
				t.Fatalf("id %q: ServerID %d", id, j.ServerID())
			}
			check("on disk")
			if round == 0 {
				b := BackOf(s, j)
				tb.ReadBack(&b)
				tb.PutBack(&b)
			} else {
				tb.Unspill(j, tb.Payload(j))
			}
			if j.Flags&FlagOnDisk != 0 || tb.DiskInfo().Jobs != 0 {
				t.Fatalf("id %q round %d: still on disk", id, round)
			}
			check("back")
		}
		// Replay's Keep, then FreeData as a move does.
		tb.Spill(j, 3, off)
		tb.FreeData(j)
		if tb.DiskInfo().Jobs != 0 || j.SID != 0 && id != nil {
			t.Fatalf("id %q: FreeData left %+v, SID %d", id, tb.DiskInfo(), j.SID)
		}
		tb.Keep(j, id, 3, off, len(payload))
		check("kept")
		tb.Delete(&run, s, id)
		tb.Free(s)
		if tb.Arena.InUse != base || tb.DiskInfo().Jobs != 0 {
			t.Fatalf("id %q: arena %d after, %d before; %+v", id, tb.Arena.InUse, base, tb.DiskInfo())
		}
	}
}
