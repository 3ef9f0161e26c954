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
	if j.hasDL {
		delete(e.deadLetters, s)
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

// lookup finds the slot of (q, id). O(1) expected.
func (e *Engine) lookup(q uint32, id []byte) (uint32, bool) {
	var buf [sidLen]byte
	for s := e.index[e.hashKey(q, id)]; s != 0; s = e.jobs.at(s - 1).hnext {
		j := e.jobs.at(s - 1)
		if j.queue == q && bytes.Equal(e.idOf(j, &buf), id) {
			return s - 1, true
		}
	}
	return 0, false
}

func (e *Engine) indexInsert(s uint32, id []byte) {
	h := e.hashKey(e.jobs.at(s).queue, id)
	e.jobs.at(s).hnext = e.index[h]
	e.index[h] = s + 1
}

func (e *Engine) indexDelete(s uint32, id []byte) {
	h := e.hashKey(e.jobs.at(s).queue, id)
	p := e.index[h]
	if p == s+1 {
		if n := e.jobs.at(s).hnext; n != 0 {
			e.index[h] = n
		} else {
			delete(e.index, h)
		}
		return
	}
	for p != 0 {
		pj := e.jobs.at(p - 1)
		if pj.hnext == s+1 {
			pj.hnext = e.jobs.at(s).hnext
			return
		}
		p = pj.hnext
	}
}
