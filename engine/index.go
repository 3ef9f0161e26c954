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
	e.arena.free(j.data, int(j.idLen)+int(j.plen))
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
	if j.plen == 0 {
		return nil
	}
	return e.arena.bytes(j.data, int(j.idLen)+int(j.plen))[j.idLen:]
}

func (e *Engine) hashKey(q uint32, id []byte) uint64 {
	return maphash.Bytes(e.seed, id) ^ (uint64(q)+1)*0x9e3779b97f4a7c15
}

// The index has two parts. Server-made ids are unique across every queue,
// so they key e.sids directly: adding one is a single map write, with no
// bytes to hash and nothing to compare (the job's queue is checked on
// lookup). Client ids go by a hash of (queue, id) into e.index, chained
// through job.hnext, because different keys may share a hash.

// lookup finds the slot of (q, id). O(1) expected.
func (e *Engine) lookup(q uint32, id []byte) (uint32, bool) {
	if sid, ok := parseSID(id); ok {
		if s, ok := e.sids[sid]; ok && e.jobs.at(s-1).queue == q {
			return s - 1, true
		}
		if !e.sidLike {
			return 0, false // no client id reads as a server id
		}
	}
	for s := e.index[e.hashKey(q, id)]; s != 0; s = e.jobs.at(s - 1).hnext {
		j := e.jobs.at(s - 1)
		if j.queue == q && j.idLen > 0 && bytes.Equal(e.arena.bytes(j.data, int(j.idLen)), id) {
			return s - 1, true
		}
	}
	return 0, false
}

// indexInsert makes the job in slot s findable by its id.
func (e *Engine) indexInsert(s uint32, id []byte) {
	j := e.jobs.at(s)
	if j.idLen == 0 {
		e.sids[j.sid] = s + 1
		return
	}
	h := e.hashKey(j.queue, id)
	j.hnext = e.index[h]
	e.index[h] = s + 1
}

// indexDelete undoes indexInsert; the job must still have the queue and id
// it was inserted with.
func (e *Engine) indexDelete(s uint32, id []byte) {
	j := e.jobs.at(s)
	if j.idLen == 0 {
		delete(e.sids, j.sid)
		return
	}
	h := e.hashKey(j.queue, id)
	p := e.index[h]
	if p == s+1 {
		if n := j.hnext; n != 0 {
			e.index[h] = n
		} else {
			delete(e.index, h)
		}
		return
	}
	for p != 0 {
		pj := e.jobs.at(p - 1)
		if pj.hnext == s+1 {
			pj.hnext = j.hnext
			return
		}
		p = pj.hnext
	}
}
