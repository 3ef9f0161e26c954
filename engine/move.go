package engine

import (
	"bytes"
	"slices"

	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/record"
)

// Reliable list moves: LMOVE, BLMOVE, RPOPLPUSH, BRPOPLPUSH move a ready job
// from one queue's ready list to another's, and LREM removes ready jobs by
// payload (Redis's reliable-queue pattern). A move is one log record
// (record.LMove), never a pop plus an add, and not a delivery: what the job
// keeps is in docs/decisions/lists-keyspace.md.

// MoveEnds says which end of the source a move takes the job from and
// which end of the destination it puts it at (LEFT: head, RIGHT: tail).
type MoveEnds struct {
	FromRight, ToRight bool
}

// Move moves the ready job at one end of src to one end of dst and returns
// it (Payload is what LMOVE replies); ok is false when src has no ready job.
// src and dst may be the same queue: the job goes round. O(1).
func (e *Engine) Move(src, dst []byte, ends MoveEnds) (Delivery, bool, error) {
	if len(dst) > MaxKey {
		return Delivery{}, false, ErrKeyTooLong
	}
	wr, err := e.begin(0)
	if err != nil {
		return Delivery{}, false, err
	}
	defer wr.end()
	qi, ok := e.queueFor(src, false)
	if !ok || !e.canTake(qi) {
		return Delivery{}, false, nil
	}
	d, to := e.moveFrom(qi, dst, ends)
	e.serve(to)
	return d, true, nil
}

// MoveOrWait is Move, or, when src has no ready job, a waiter parked in
// src's FIFO with the waiters of every other blocking pop: a job arriving in
// src is moved for the oldest waiter first, under the engine's lock, so a
// waiter whose client then leaves has not lost it (it is in dst).
func (e *Engine) MoveOrWait(src, dst []byte, ends MoveEnds) (Delivery, *Waiter, error) {
	if len(dst) > MaxKey {
		return Delivery{}, nil, ErrKeyTooLong
	}
	wr, err := e.begin(0)
	if err != nil {
		return Delivery{}, nil, err
	}
	defer wr.end()
	if qi, ok := e.queueFor(src, false); ok && e.canTake(qi) {
		d, to := e.moveFrom(qi, dst, ends)
		e.serve(to)
		return d, nil, nil
	}
	// Inside a transaction a blocking move is LMOVE, as in Redis (wait
	// refuses with ErrInTransaction).
	w, err := e.wait([][]byte{src}, PopDelay)
	if err != nil {
		return Delivery{}, nil, err
	}
	w.move = &moveTo{dst: append([]byte(nil), dst...), ends: ends}
	return Delivery{}, w, nil
}

// moveTo is what a waiter parked by MoveOrWait does with the job it gets.
type moveTo struct {
	dst  []byte
	ends MoveEnds
}

// moveFrom moves the job at one end of queue qi's (non-empty) ready list to
// dst, logging the move first, and returns it with dst's index. The caller
// serves dst's waiters (after resolving its own waiter, if any). O(1).
func (e *Engine) moveFrom(qi uint32, dst []byte, ends MoveEnds) (Delivery, uint32) {
	var buf [jobs.SIDLen]byte
	s := e.nextReady(qi, ends.FromRight)
	j := e.jobs.At(s)
	src := e.queues[qi].name
	id := e.jobs.ID(j, &buf)
	r := record.Rec{Op: record.LMove, Time: e.recNow(), Queue: []byte(src), SID: j.SID, Dst: dst, DSID: j.SID}
	if j.IDLen > 0 {
		r.ID, r.DID = id, id
	}
	if src != string(dst) {
		if to, ok := e.queueFor(dst, false); ok {
			if _, taken := e.lookup(to, id); taken {
				r.DID, r.DSID = nil, e.newSID(dst, r.Time)
			}
		}
	}
	e.seq++
	r.Seq = e.seq
	if !ends.ToRight {
		r.Flags = record.FlagHead
	}
	d := Delivery{Queue: []byte(src), Payload: append([]byte(nil), e.jobs.Payload(j)...), moved: true}
	d.Ticket = e.logRec(&r) // encodes r before relocate frees the id it aliases
	to := e.relocate(s, &r)
	d.ID = append([]byte(nil), e.jobs.ID(e.jobs.At(s), &buf)...)
	return d, to
}

// relocate applies a move record to the ready job in slot s: the job leaves
// its queue's ready list and joins dst's, with the record's id and add
// order. Live moves and replay both come here. It returns dst's index.
func (e *Engine) relocate(s uint32, r *record.Rec) uint32 {
	var buf, nbuf [jobs.SIDLen]byte
	j := e.jobs.At(s)
	from := j.Queue
	e.detach(s)
	to, _ := e.queueFor(r.Dst, true) // may grow e.queues: no queue pointer is held here
	newID := r.DID
	if newID == nil {
		newID = jobs.RenderSID(&nbuf, r.DSID)
	}
	oldID := e.jobs.ID(j, &buf)
	if from != to || !bytes.Equal(oldID, newID) {
		e.jobs.Delete(&e.queues[from].run, s, oldID)
		e.queues[from].Bytes -= jobs.DataSize(j)
		if !bytes.Equal(oldID, newID) {
			payload := append([]byte(nil), e.jobs.Payload(j)...)
			e.jobs.FreeData(j)
			j.SID, j.IDLen = r.DSID, uint16(len(r.DID))
			j.Data = e.storeData(r.DID, payload)
			e.lastSID = max(e.lastSID, r.DSID)
		}
		grp, prio := e.laneOf(s)
		e.queues[from].Order.Leave(&e.jobs.Slab, s) // the job keeps its group and priority in dst
		j.Queue = to
		e.queues[to].Join(&e.jobs.Slab, s, grp, prio)
		e.queues[to].Bytes += jobs.DataSize(j)
		e.jobs.Insert(s, newID)
	}
	j.Seq = r.Seq
	e.seq = max(e.seq, r.Seq)
	e.pushReady(s, r.Flags&record.FlagHead != 0)
	e.releaseQueue(from)
	return to
}

// applyLMove replays a move record.
func (e *Engine) applyLMove(r *record.Rec) {
	s, ok := e.find(r)
	if !ok || e.jobs.At(s).State != jobs.StateReady {
		return
	}
	e.serve(e.relocate(s, r))
}

// Rem removes ready jobs whose payload equals payload, as LREM does: count
// > 0 the first count from the head, < 0 the first -count from the tail, 0
// all. Each removal is logged as a pop. It returns how many went. O(ready
// jobs of the queue).
func (e *Engine) Rem(name []byte, count int64, payload []byte) (int, uint64, error) {
	wr, err := e.begin(0)
	if err != nil {
		return 0, 0, err
	}
	defer wr.end()
	qi, ok := e.queueFor(name, false)
	if !ok {
		return 0, 0, nil
	}
	fromTail := count < 0
	limit := count
	if fromTail {
		limit = -count
	}
	// The matches in pop order (LRANGE's), then taken from the end asked.
	var match []uint32
	e.queues[qi].Order.Each(&e.jobs.Slab, func(s uint32) bool {
		if bytes.Equal(e.jobs.Payload(e.jobs.At(s)), payload) {
			match = append(match, s)
			return fromTail || limit == 0 || int64(len(match)) < limit
		}
		return true
	})
	if fromTail {
		slices.Reverse(match)
		if limit > 0 && int64(len(match)) > limit {
			match = match[:limit]
		}
	}
	var ticket uint64
	for _, s := range match {
		r := e.recFor(record.Pop, s)
		ticket = e.logRec(&r) // encodes r before remove frees the id it aliases
		e.remove(s)
	}
	n := len(match)
	return n, ticket, nil
}
