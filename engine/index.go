package engine

import (
	"bytes"
	"hash/maphash"
)

// Slots, ids and the index: where a job lives and how (queue, id) finds it.

func (e *Engine) allocSlot() uint32 {
	if e.free != 0 {
		s := e.free - 1
		e.free = e.jobs.at(s).next
		*e.jobs.at(s) = job{}
		return s
	}
	if b := e.j.build; b != nil && int(e.jobs.n>>pageBits) == len(e.jobs.pages) {
		// The replay's index builder reads the page table when its
		// table grows (a rehash reads each job's id): it must be idle
		// while the table of pages changes (replay.go).
		b.sync()
	}
	return e.jobs.add()
}

func (e *Engine) freeSlot(s uint32) {
	j := e.jobs.at(s)
	if j.flags&jobDL != 0 {
		delete(e.deadLetters, s)
	}
	if j.flags&(jobUnique|jobDebounce) != 0 {
		delete(e.ident.jobs, s)
	}
	if j.flags&jobOrigin != 0 {
		delete(e.origins, s)
	}
	if j.flags&jobReason != 0 {
		delete(e.reasons, s)
	}
	e.arena.free(j.data, int(j.idLen)+int(j.plen()))
	*j = job{next: e.free}
	e.free = s + 1
}

// idOf returns the job's id; buf backs a server id's rendering.
func (e *Engine) idOf(j *job, buf *[sidLen]byte) []byte {
	if j.idLen == 0 {
		return renderSID(buf, j.sid)
	}
	return e.arena.bytes(j.data, int(j.idLen))
}

func (e *Engine) payloadOf(j *job) []byte {
	n := j.plen()
	if n == 0 {
		return nil
	}
	return e.arena.bytes(j.data, int(j.idLen)+int(n))[j.idLen:]
}

func (c *core) hashKey(q uint32, id []byte) uint64 {
	return maphash.Bytes(c.seed, id) ^ (uint64(q)+1)*0x9e3779b97f4a7c15
}

// The index has three parts. Server ids made live (DELAY.ADD without ID,
// LPUSH, RPUSH) go to their queue's push run (pushrun.go), in the order
// they were made. The rest are in two slotTables (slottable.go). Server-made
// ids are unique across every queue, so e.sids files them by the id alone:
// adding one hashes no bytes, and a lookup compares a uint64 (and then
// checks the job's queue). Client ids go into e.index by a hash of
// (queue, id), compared by queue and bytes.

// sidKey and clientKey recompute, from the job, the hash a slot was filed
// under: the tables store slots only, and ask when they rebuild.
func (c *core) sidKey(s uint32) uint64 { return c.jobs.at(s).sid }

func (c *core) clientKey(s uint32) uint64 {
	j := c.jobs.at(s)
	return c.hashKey(j.queue, c.arena.bytes(j.data, int(j.idLen)))
}

// initIndex gives the tables their key functions (New).
func (c *core) initIndex() {
	c.sids.key, c.sids.grouped = c.sidKey, true
	c.index.key = c.clientKey
}

// lookup finds the slot of (q, id). O(1) expected.
func (e *Engine) lookup(q uint32, id []byte) (uint32, bool) {
	if sid, ok := parseSID(id); ok {
		if s, ok := e.queues[q].run.find(sid); ok {
			return s, true
		}
		s, ok := e.sids.find(sid, func(s uint32) bool {
			j := e.jobs.at(s)
			return j.idLen == 0 && j.sid == sid
		})
		if ok && e.jobs.at(s).queue == q {
			return s, true
		}
		if !e.sidLike {
			return 0, false // no client id reads as a server id
		}
	}
	return e.index.find(e.hashKey(q, id), func(s uint32) bool {
		j := e.jobs.at(s)
		return j.queue == q && j.idLen > 0 && bytes.Equal(e.arena.bytes(j.data, int(j.idLen)), id)
	})
}

// fileInRun makes the job in slot s, with a server id above
// every id in its queue's run, findable by its id (pushrun.go).
func (e *Engine) fileInRun(s uint32) {
	j := e.jobs.at(s)
	e.queues[j.queue].run.add(j.sid, s)
	j.flags |= jobInRun
}

// indexInsert makes the job in slot s findable by its id.
func (e *Engine) indexInsert(s uint32, id []byte) {
	j := e.jobs.at(s)
	if j.idLen == 0 {
		e.sids.insert(s, j.sid)
		return
	}
	e.index.insert(s, e.hashKey(j.queue, id))
}

// indexDelete undoes indexInsert; the job must still have the queue and id
// it was inserted with. id is read for a client id only: a server id is
// unfiled by its number, and its caller may pass nil.
func (e *Engine) indexDelete(s uint32, id []byte) {
	j := e.jobs.at(s)
	if j.flags&jobInRun != 0 {
		e.queues[j.queue].run.remove(j.sid, s)
		j.flags &^= jobInRun
		return
	}
	if j.idLen == 0 {
		e.sids.remove(s, j.sid)
		return
	}
	e.index.remove(s, e.hashKey(j.queue, id))
}
