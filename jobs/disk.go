package jobs

// Payloads on disk (docs/decisions/payloads-on-disk.md): a job due far
// ahead keeps, instead of its payload's arena bytes, where the payload
// lies in the log: the segment (modulo 65,536, as a home) and the offset,
// in the data word, with FlagOnDisk set. The length stays where PlenOf
// reads it, so a job's size, its queue's bytes and the segment's live
// bytes do not change when its payload goes to disk or comes back. A job
// with a client id keeps its id in the arena, in a block of its own that
// the data word names, and the locator in SID, which a client id's job
// does not use otherwise (decisions/payloads-on-disk.md, "Client ids").
// Only payloads of a small block (id and payload at most MaxSmall bytes)
// go; the rest stay as they are.
//
// Every reader of a job's payload goes through Payload, which reads a
// payload on disk back (Disk) into a fresh slice; every freeing of it
// through Free or FreeData, which give nothing to the arena for one.

// FlagOnDisk says the job's payload is in the log: its data word (a
// server id's) or its SID (a client id's) is a locator, not an arena ref.
const FlagOnDisk uint8 = 1 << 7

// Locator bits: below the payload length's 17 (PackData's small layout),
// the offset in the segment's file (30 bits: segments up to 1 GiB) and
// the segment above it.
const (
	locOffBits = 30
	// MaxLocOffset bounds the offset of a payload a Locator can name.
	MaxLocOffset = 1<<locOffBits - 1
)

// DiskReader reads payloads back from the log; the engine's is the
// journal's (journal.Payloads). It must be safe under the owner's lock:
// it takes no lock the owner's callers hold.
type DiskReader interface {
	ReadPayload(seg uint16, off int64, n int) ([]byte, error)
}

// diskState is what a Table keeps of its payloads on disk.
type diskState struct {
	Disk  DiskReader // nil: no payload is on disk
	Jobs  int64      // jobs whose payload is on disk
	Bytes int64      // their payloads' bytes
	Reads uint64     // payloads read back from disk (Payload and Load)
	Fails uint64     // reads that failed (the payload came back empty)
	join  []byte     // a client id's id and payload, joined to go back in one block (Unspill)
}

// CanSpill says the job in j may keep its payload on disk at offset off.
func CanSpill(j *Job, off int64) bool {
	n := j.Plen()
	return j.Flags&FlagOnDisk == 0 && n > 0 && n <= MaxSmall && off >= 0 && off <= MaxLocOffset &&
		RefOf(j.Data)&bigFlag == 0
}

// Spill makes j keep, instead of its payload's arena bytes, the locator of
// the copy at offset off of segment seg (which the caller checked holds
// the same bytes: CanSpill first). O(1).
func (t *Table) Spill(j *Job, seg uint16, off int64) {
	n := int(j.Plen())
	if j.IDLen == 0 {
		t.Arena.Free(j.Data, n)
		t.Keep(j, nil, seg, off, n)
		return
	}
	old := j.Data
	t.Keep(j, t.Arena.Bytes(old, int(j.IDLen)), seg, off, n) // the id's copy first
	t.Arena.Free(old, int(j.IDLen)+n)
}

// Keep makes j, whose data word is not set yet, keep its payload of n
// bytes at offset off of segment seg without ever holding it in memory:
// replay's, which knows where each record lies (CanSpill's limits are the
// caller's to check). id is its client id (nil: a server id), copied into
// the arena. O(1).
func (t *Table) Keep(j *Job, id []byte, seg uint16, off int64, n int) {
	loc := uint64(seg)<<locOffBits | uint64(off)
	if id == nil {
		j.Data = PackData(loc, n)
	} else {
		j.Data, j.SID = PackData(t.Arena.Alloc(id), n), loc
	}
	j.Flags |= FlagOnDisk
	t.disk.Jobs++
	t.disk.Bytes += int64(n)
}

// LocOf returns where j's payload lies on disk.
func LocOf(j *Job) (seg uint16, off int64, n int) {
	ref := RefOf(j.Data)
	if j.IDLen > 0 {
		ref = j.SID
	}
	return uint16(ref >> locOffBits), int64(ref & MaxLocOffset), int(j.Plen())
}

// Unspill gives j its payload back in the arena: payload, read from where
// its locator says. O(len(payload)).
func (t *Table) Unspill(j *Job, payload []byte) {
	if j.IDLen == 0 {
		t.dropLoc(j)
		j.Data = PackData(t.Arena.Alloc(payload), len(payload))
		return
	}
	idRef := j.Data
	t.disk.join = append(append(t.disk.join[:0], t.Arena.Bytes(idRef, int(j.IDLen))...), payload...)
	t.dropLoc(j)
	j.Data = PackData(t.Arena.Alloc(t.disk.join), len(payload))
	t.Arena.Free(idRef, int(j.IDLen))
}

// dropLoc forgets j's locator (and its id's block's ref: the caller's).
func (t *Table) dropLoc(j *Job) {
	j.Flags &^= FlagOnDisk
	t.disk.Jobs--
	t.disk.Bytes -= int64(j.Plen())
	j.Data = 0
	if j.IDLen > 0 {
		j.SID = 0
	}
}

// FreeData gives back j's id and payload (the arena's, or a locator and
// a client id's block), for a caller that stores them again (a move, a
// dead letter). O(1).
func (t *Table) FreeData(j *Job) {
	if j.Flags&FlagOnDisk != 0 {
		if j.IDLen > 0 {
			t.Arena.Free(j.Data, int(j.IDLen))
		}
		t.dropLoc(j)
		return
	}
	t.Arena.Free(j.Data, int(j.IDLen)+int(j.Plen()))
}

// readDisk reads j's payload back from disk into a fresh slice. A failed
// read is counted and returns an empty payload: the locator named a
// segment the log keeps until the job is restated, so it is an I/O error.
func (t *Table) readDisk(j *Job) []byte {
	seg, off, n := LocOf(j)
	t.disk.Reads++
	if t.disk.Disk == nil {
		t.disk.Fails++
		return nil
	}
	b, err := t.disk.Disk.ReadPayload(seg, off, n)
	if err != nil {
		t.disk.Fails++
		return nil
	}
	return b
}

// SetDisk sets the reader of payloads on disk.
func (t *Table) SetDisk(d DiskReader) { t.disk.Disk = d }

// DiskInfo is what INFO and /metrics show of payloads on disk.
type DiskInfo struct {
	Jobs, Bytes  int64
	Reads, Fails uint64
}

// DiskInfo returns the figures of payloads on disk.
func (t *Table) DiskInfo() DiskInfo {
	return DiskInfo{Jobs: t.disk.Jobs, Bytes: t.disk.Bytes, Reads: t.disk.Reads, Fails: t.disk.Fails}
}

// Back is a payload on disk to read back: the job (slot, add order, data
// word and locator, to find it unchanged) and, once read, the payload.
type Back struct {
	S              uint32
	Seq, Data, Loc uint64
	Payload        []byte
}

// BackOf is the Back of the job in slot s, whose payload is on disk.
func BackOf(s uint32, j *Job) Back {
	seg, off, _ := LocOf(j)
	return Back{S: s, Seq: j.Seq, Data: j.Data, Loc: uint64(seg)<<locOffBits | uint64(off)}
}

// DueOnDisk appends to out the jobs of slots [from, from+n) whose payload
// is on disk and that are due by window, and returns where it stopped:
// a read-ahead's chunk, under the owner's lock. O(n).
func (t *Table) DueOnDisk(from, n uint32, window int64, out []Back) ([]Back, uint32) {
	end := min(from+n, t.Len())
	for s := from; s < end; s++ {
		if j := t.At(s); j.Flags&FlagOnDisk != 0 && j.Due <= window {
			out = append(out, BackOf(s, j))
		}
	}
	return out, end
}

// InMemoryBeyond appends to out the slots of [from, from+n) whose jobs are
// delayed beyond by with a payload that may be on disk but is in memory
// (CanSpill), and returns where it stopped: after a restart, the jobs
// replay could not keep on disk (moved beyond the horizon after their add
// was logged), for the owner to restate. O(n).
func (t *Table) InMemoryBeyond(from, n uint32, by int64, out []uint32) ([]uint32, uint32) {
	end := min(from+n, t.Len())
	for s := from; s < end; s++ {
		if j := t.At(s); j.State == StateDelayed && j.Due > by && CanSpill(j, 0) {
			out = append(out, s)
		}
	}
	return out, end
}

// ReadBack reads b's payload from disk: without the owner's lock.
func (t *Table) ReadBack(b *Back) {
	if t.disk.Disk != nil {
		b.Payload, _ = t.disk.Disk.ReadPayload(uint16(b.Loc>>locOffBits), int64(b.Loc&MaxLocOffset), int(PlenOf(b.Data)))
	}
}

// PutBack gives b's job its payload back in memory if it is still the job
// DueOnDisk found, its payload still on disk, and the read succeeded.
func (t *Table) PutBack(b *Back) {
	if b.S >= t.Len() || b.Payload == nil {
		return // a FLUSHALL meanwhile, or a failed read (a pop reads it then)
	}
	if j := t.At(b.S); j.Flags&FlagOnDisk != 0 && j.Seq == b.Seq && j.Data == b.Data && BackOf(b.S, j).Loc == b.Loc {
		t.Unspill(j, b.Payload)
	}
}
