package jobs

import (
	"bytes"
	"hash/maphash"
)

// Table is where every job lives and how (queue, id) finds it: the slab of
// records, the arena of their ids and payloads, the free slot list, the id
// index, and the side tables some jobs keep by slot. The engine holds one
// and applies what its answers mean (timers, the log, waiters); the Table
// calls nothing back, so freeing a slot is done here, in full.
//
// The index has three parts. Server ids made live (DELAY.ADD without ID,
// LPUSH, RPUSH) go to their queue's push run (pushrun.go), in the order
// they were made: the engine keeps a PushRun in each queue and passes it
// in. The rest are in two slotTables (slottable.go). Server-made ids are
// unique across every queue, so sids files them by the id alone: adding one
// hashes no bytes, and a lookup compares a uint64 (and then checks the
// job's queue). Client ids go into index by a hash of (queue, id), compared
// by queue and bytes.
//
// A Table must not be copied once Init has run: its index tables ask it
// for keys.
type Table struct {
	Slab  // the records, by slot (embedded: At is the hottest call of the engine)
	Arena Arena

	free  uint32    // free slot list head, slot+1
	sids  slotTable // server-made ids
	index slotTable // client ids, by hash(queue, id)
	seed  maphash.Seed
	runs  RunPages // the pages of the queues' push runs

	// SIDLike is set once a client id that reads as a server id is stored:
	// only then can a new server id collide, and need a lookup.
	SIDLike bool

	// Side tables by slot, for the few jobs that use an option (the job's
	// Flags say which hold it), rather than spending bytes of every record.
	DeadLetters map[uint32][]byte  // FlagDL: the dead-letter queue's name
	Idents      map[uint32]Ident   // FlagUnique, FlagDebounce
	Origins     map[uint32]*Origin // FlagOrigin: where a dead-lettered job came from
	Reasons     map[uint32]string  // FlagReason: the last failure reason

	disk diskState // payloads kept in the log instead (disk.go)
}

// Ident is what a UNIQUE or DEBOUNCE job carries beyond its record.
type Ident struct {
	UniqueTTL     int64 // ms the id stays taken after the job ends; 0: not unique
	DebounceUntil int64 // unix ms its due time may not pass; 0: no debounce
}

// Origin is where a dead-lettered job came from, so DELAY.REQUEUE can send
// it back with its options.
type Origin struct {
	Queue      []byte
	AckTimeout int64
	Retry      int64
	DeadLetter []byte // nil: none
}

// Init readies an empty table: a fresh hash seed, and the index tables'
// key functions. The Table must not move afterwards.
func (t *Table) Init() {
	t.seed = maphash.MakeSeed()
	t.sids.key, t.sids.grouped = t.sidKey, true
	t.index.key = t.clientKey
	t.DeadLetters = make(map[uint32][]byte)
}

// Alloc returns a zeroed slot, from the free list or a new one at the end.
// O(1).
func (t *Table) Alloc() uint32 {
	if t.free != 0 {
		s := t.free - 1
		t.free = t.At(s).Next
		*t.At(s) = Job{}
		return s
	}
	return t.Add()
}

// AllocGrows says whether the next Alloc maps a new page of the slab, which
// changes the page table: a goroutine reading jobs beside the table's
// owner (the engine's replay index builder) must be idle first. O(1).
func (t *Table) AllocGrows() bool { return t.free == 0 && t.addGrows() }

// Free gives slot s back: its id and payload to the arena, and what the
// side tables its flags name hold of it. The job must be out of the index.
func (t *Table) Free(s uint32) {
	j := t.At(s)
	if j.Flags&FlagDL != 0 {
		delete(t.DeadLetters, s)
	}
	if j.Flags&(FlagUnique|FlagDebounce) != 0 {
		delete(t.Idents, s)
	}
	if j.Flags&FlagOrigin != 0 {
		delete(t.Origins, s)
	}
	if j.Flags&FlagReason != 0 {
		delete(t.Reasons, s)
	}
	t.FreeData(j)
	*j = Job{Next: t.free}
	t.free = s + 1
}

// ID returns the job's id; buf backs a server id's rendering.
func (t *Table) ID(j *Job, buf *[SIDLen]byte) []byte {
	if j.IDLen == 0 {
		return RenderSID(buf, j.SID)
	}
	return t.Arena.Bytes(j.Data, int(j.IDLen))
}

// Payload returns the job's payload, aliasing the arena (or read back
// from disk: FlagOnDisk).
func (t *Table) Payload(j *Job) []byte {
	n := j.Plen()
	if n == 0 {
		return nil
	}
	if j.Flags&FlagOnDisk != 0 {
		return t.readDisk(j) // a fresh slice (disk.go)
	}
	return t.Arena.Bytes(j.Data, int(j.IDLen)+int(n))[j.IDLen:]
}

func (t *Table) hashKey(q uint32, id []byte) uint64 {
	return maphash.Bytes(t.seed, id) ^ (uint64(q)+1)*0x9e3779b97f4a7c15
}

// sidKey and clientKey recompute, from the job, the hash a slot was filed
// under: the tables store slots only, and ask when they rebuild.
func (t *Table) sidKey(s uint32) uint64 { return t.peek(s).SID }

func (t *Table) clientKey(s uint32) uint64 {
	j := t.peek(s)
	return t.hashKey(j.Queue, t.Arena.Bytes(j.Data, int(j.IDLen)))
}

// NewRun returns an empty push run for a new queue, drawing its blocks
// from the table's pages.
func (t *Table) NewRun() PushRun { return PushRun{pages: &t.runs} }

// Lookup finds the slot of (q, id); run is queue q's push run. O(1)
// expected.
func (t *Table) Lookup(run *PushRun, q uint32, id []byte) (uint32, bool) {
	if sid, ok := ParseSID(id); ok {
		if s, ok := run.Find(sid); ok {
			return s, true
		}
		s, ok := t.sids.find(sid, func(s uint32) bool {
			j := t.peek(s)
			return j.IDLen == 0 && j.SID == sid
		})
		if ok && t.peek(s).Queue == q {
			return s, true
		}
		if !t.SIDLike {
			return 0, false // no client id reads as a server id
		}
	}
	return t.index.find(t.hashKey(q, id), func(s uint32) bool {
		j := t.peek(s)
		return j.Queue == q && j.IDLen > 0 && bytes.Equal(t.Arena.Bytes(j.Data, int(j.IDLen)), id)
	})
}

// FileInRun makes the job in slot s, with a server id above every id in
// its queue's run, findable by its id.
func (t *Table) FileInRun(run *PushRun, s uint32) {
	j := t.At(s)
	run.Add(j.SID, s)
	j.Flags |= FlagInRun
}

// Insert makes the job in slot s findable by its id.
func (t *Table) Insert(s uint32, id []byte) {
	j := t.At(s)
	if j.IDLen == 0 {
		t.sids.insert(s, j.SID)
		return
	}
	t.index.insert(s, t.hashKey(j.Queue, id))
}

// InsertSID files the server id sid of slot s, as Insert would: for a
// goroutine that files ids beside the owner, which must not touch the sids
// table meanwhile (the engine's replay index builder).
func (t *Table) InsertSID(s uint32, sid uint64) { t.sids.insert(s, sid) }

// Delete undoes Insert or FileInRun; the job must still have the queue and
// id it was filed with, and run be its queue's. id is read for a client id
// only: a server id is unfiled by its number, and its caller may pass nil.
func (t *Table) Delete(run *PushRun, s uint32, id []byte) {
	j := t.At(s)
	if j.Flags&FlagInRun != 0 {
		run.Remove(j.SID, s)
		j.Flags &^= FlagInRun
		return
	}
	if j.IDLen == 0 {
		t.sids.remove(s, j.SID)
		return
	}
	t.index.remove(s, t.hashKey(j.Queue, id))
}

// ReserveSIDs makes room for n server ids in all, if none is filed yet, so
// that filing them rebuilds nothing (a replay's estimate of its job count).
func (t *Table) ReserveSIDs(n int) {
	if t.sids.len() == 0 {
		t.sids.reserve(n)
	}
}

// ReserveIDs makes room for n client ids in all, if none is filed yet:
// ReserveSIDs's twin, for a restore that knows its job count.
func (t *Table) ReserveIDs(n int) {
	if t.index.len() == 0 {
		t.index.reserve(n)
	}
}

// ClientIDs is how many client ids are filed. O(1).
func (t *Table) ClientIDs() int { return t.index.len() }

// IndexBytes is the memory of the id index's tables (the push runs are
// counted with their queues). O(1).
func (t *Table) IndexBytes() int64 { return t.index.bytes() + t.sids.bytes() }

// Release gives back the memory mapped outside the Go heap (slab, arena,
// index tables, kept run pages) and empties the table but for its side
// tables, seed and key functions; the queues' push runs are the caller's
// to release. Nothing read from it before stays valid.
func (t *Table) Release() {
	t.Slab.Release()
	t.free = 0
	t.Arena.Release()
	t.sids.release()
	t.index.release()
	t.runs.Release()
}

// Reset empties the side tables, for a table whose slots are about to be
// reused from 0 (a reload).
func (t *Table) Reset() {
	t.DeadLetters = make(map[uint32][]byte)
	t.Idents, t.Origins, t.Reasons = nil, nil, nil
	t.disk.Jobs, t.disk.Bytes = 0, 0 // Disk is set once, and read without the owner's lock
}
