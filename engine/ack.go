package engine

import (
	"unsafe"

	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/record"
)

// At-least-once delivery: a reservation's ack deadline sits in the job
// wheel, as Kafka's purgatory holds a delayed operation; it completes early
// (ACK, NACK, TOUCH) or expires when the wheel fires it. A job is in one
// place at a time, so one wheel entry serves its due time and its deadline.

// reserveAt makes the job in slot s reserved until deadline. The job must be
// out of every list (detached).
func (e *Engine) reserveAt(s uint32, deadline int64) {
	j := e.jobs.At(s)
	j.State = jobs.StateReserved
	q := &e.queues[j.Queue]
	q.Reserve(&e.jobs.Slab, s)
	if q.watch != nil || e.watches.All {
		e.changed(q)
	}
	if !e.wheel.Add(s, deadline, j.Seq) {
		// The deadline is already past (a replayed reservation whose time
		// went by while the server was down): it expires on the next advance.
		e.wheel.Add(s, e.wheel.Now()+1, j.Seq)
	}
	e.poke(deadline)
}

// endDelivery ends a delivery that got no ACK (its ack timeout passed, or a
// NACK): the job is delivered again, now (delay 0, tail of the ready list)
// or at due; or, with no redelivery left, it goes to its dead-letter queue or
// is dropped. The job must be detached. now is the engine time.
//
// An expiry is not logged (replay derives it); a NACK is, as its effects,
// logged before a waiter can take the job so that replay sees them in the
// order they happened. It returns the ticket of the last record. A NACK's
// reason, already the job's (jobs.Table.SetReason), rides its move record.
func (e *Engine) endDelivery(s uint32, now, due int64, logIt bool, reason []byte) uint64 {
	defer e.serveFreed() // the reservation that ended may have made room
	j := e.jobs.At(s)
	if j.Retry >= 0 && int64(j.Deliveries) > int64(j.Retry) {
		return e.exhausted(s, logIt)
	}
	e.seq++
	j.Seq = e.seq
	var ticket uint64
	log := func(flags byte) {
		if logIt {
			r := e.recFor(record.Move, s)
			r.Due, r.Seq, r.Deliveries, r.Flags = j.Due, j.Seq, j.Deliveries, flags
			r.Reason = reason
			ticket = e.logRec(&r)
		}
	}
	if due > now && e.wheel.Add(s, due, j.Seq) {
		j.Due = due
		e.markDelayed(s)
		e.poke(due)
		log(0)
		return ticket
	}
	e.pushReady(s, false)
	log(record.FlagReady)
	e.serve(j.Queue)
	return ticket
}

// exhausted moves a job with no redelivery left to its dead-letter queue as a
// ready job, keeping its id unless the id is taken there (then it gets the
// next server id), or drops it with a log line that names it. The job keeps
// its payload and deliveries; in the dead-letter queue a pop removes it.
func (e *Engine) exhausted(s uint32, logIt bool) uint64 {
	var buf [jobs.SIDLen]byte
	var ticket uint64
	j := e.jobs.At(s)
	from := j.Queue
	id := append([]byte(nil), e.jobs.ID(j, &buf)...)
	if logIt {
		r := e.recFor(record.Cancel, s) // the job leaves its queue...
		ticket = e.logRec(&r)
	}
	e.entombEnded(s, logIt)
	dl, ok := e.jobs.DeadLetter(s, []byte(e.queues[from].name))
	if !ok {
		if !e.j.replaying {
			e.opts.Logger.Warn().Bytes("queue", []byte(e.queues[from].name)).Bytes("id", id).
				Uint32("deliveries", j.Deliveries).Msg("job dropped: no redelivery left and no dead-letter queue")
		}
		e.stats.Dropped++
		e.remove(s)
		return ticket
	}
	e.stats.DeadLettered++
	e.queues[from].DeadLettered++
	payload := append([]byte(nil), e.jobs.Payload(j)...)
	e.jobs.Delete(&e.queues[from].run, s, id)
	e.queues[from].Bytes -= jobs.DataSize(j)
	e.jobs.FreeData(j)
	grp, prio := e.laneOf(s) // kept in the dead-letter queue, under its own limits
	e.queues[from].Order.Leave(&e.jobs.Slab, s)
	to, _ := e.queueFor(dl, true)
	j.Queue = to
	e.queues[to].Join(&e.jobs.Slab, s, grp, prio)
	if _, taken := e.lookup(to, id); taken {
		// Not time based, so replay makes the same id as the live server did.
		e.lastSID = e.jobs.FreeSID(&e.queues[to].run, to, e.lastSID+1)
		j.SID, j.IDLen = e.lastSID, 0
		id = append(id[:0], jobs.RenderSID(&buf, e.lastSID)...)
	}
	if j.IDLen > 0 {
		j.Data = e.storeData(id, payload)
	} else {
		j.Data = e.storeData(nil, payload)
	}
	e.queues[to].Bytes += jobs.DataSize(j)
	e.jobs.Insert(s, id)
	e.seq++
	j.Seq = e.seq
	e.releaseQueue(from)
	e.pushReady(s, false)
	if logIt {
		r := e.addRec(s, record.FlagReady)
		ticket = e.logRec(&r) // ...and joins the dead-letter queue
	}
	e.serve(to)
	return ticket
}

// reserved finds a reserved job; the engine is advanced first so a deadline
// that has passed has expired, whether or not the timer has run yet.
func (e *Engine) reserved(queueName, id []byte) (uint32, bool) {
	qi, ok := e.queueFor(queueName, false)
	if !ok {
		return 0, false
	}
	s, ok := e.jobs.Lookup(&e.queues[qi].run, qi, id)
	if !ok || e.jobs.At(s).State != jobs.StateReserved {
		return 0, false
	}
	return s, true
}

// Ack deletes reserved jobs and returns how many there were. O(1) per id.
func (e *Engine) Ack(queueName []byte, ids [][]byte) (int, uint64, error) {
	wr, err := e.begin(0)
	if err != nil {
		return 0, 0, err
	}
	defer wr.end()
	now := wr.now
	var ticket uint64
	n := 0
	for _, id := range ids {
		if s, ok := e.reserved(queueName, id); ok {
			e.queues[e.jobs.At(s).Queue].Acks++
			e.observeAck(s, now)
			r := e.recFor(record.Cancel, s)
			ticket = e.logRec(&r)
			e.remove(s)
			n++
		}
	}
	e.stats.Acked += uint64(n)
	e.serveFreed()
	return n, ticket, nil
}

// Nack ends a reserved job's delivery: it is ready again now (delay 0) or
// delayed for delay ms, or, with no redelivery left, dead-lettered or
// dropped. O(1).
func (e *Engine) Nack(queueName, id []byte, delay int64) (bool, uint64, error) {
	return e.NackReason(queueName, id, delay, nil)
}

// NackReason is Nack that also gives the job its last failure reason
// (DELAY.NACK ... ERROR text; at most MaxReason bytes, nil or empty: the
// reason stays as it was). O(1) plus the reason's length.
func (e *Engine) NackReason(queueName, id []byte, delay int64, reason []byte) (bool, uint64, error) {
	if len(reason) > MaxReason {
		return false, 0, ErrReasonTooLong
	}
	wr, err := e.begin(0)
	if err != nil {
		return false, 0, err
	}
	defer wr.end()
	now := wr.now
	s, ok := e.reserved(queueName, id)
	if !ok {
		return false, 0, nil
	}
	e.stats.Nacked++
	e.queues[e.jobs.At(s).Queue].Nacks++
	e.detach(s)
	due := now
	if delay > 0 {
		due = e.laterMs(delay)
	}
	e.jobs.SetReason(s, reason)
	return true, e.endDelivery(s, now, due, true, reason), nil
}

// addRec is the add record that recreates the job in slot s as it is
// (record.Whole), stamped as a record made now.
func (e *Engine) addRec(s uint32, flags byte) record.Rec {
	q := &e.queues[e.jobs.At(s).Queue]
	return record.Whole(&e.jobs, &q.Queue, s, unsafe.Slice(unsafe.StringData(q.name), len(q.name)), e.recNow(), flags)
}

// wholeRec is the add record a rewrite, a snapshot or a compaction writes
// of the job in slot s as it is, at now: a reservation with its deadline,
// a ready job as ready if ready says its place in line is kept (else as
// delayed, which replay's wheel orders by due and add order).
func (e *Engine) wholeRec(s uint32, ready bool, now int64) record.Rec {
	var flags byte
	var deadline int64
	switch st := e.jobs.At(s).State; {
	case st == jobs.StateReserved:
		flags = record.FlagReserved
		deadline, _ = e.wheel.Due(s)
	case ready && st == jobs.StateReady:
		flags = record.FlagReady
	}
	r := e.addRec(s, flags)
	r.Time, r.Deadline = now, deadline
	return r
}

// Touch starts a reserved job's ack deadline again, from now. O(1).
func (e *Engine) Touch(queueName, id []byte) (bool, uint64, error) {
	wr, err := e.begin(0)
	if err != nil {
		return false, 0, err
	}
	defer wr.end()
	s, ok := e.reserved(queueName, id)
	if !ok {
		return false, 0, nil
	}
	j := e.jobs.At(s)
	e.detach(s)
	e.seq++
	j.Seq = e.seq
	deadline := e.laterMs(int64(j.AckTimeout))
	e.reserveAt(s, deadline)
	r := e.recFor(record.Reserve, s)
	r.Due, r.Deliveries, r.Seq = deadline, j.Deliveries, j.Seq
	return true, e.logRec(&r), nil
}

// applyReserve and applyMove replay the records of the same names: each sets
// the job's state outright, so they also apply cleanly on top of a newer
// snapshot of the job (a rewrite's tail).
func (e *Engine) applyReserve(r *record.Rec) {
	if s, ok := e.takeOut(r); ok {
		e.reserveAt(s, r.Due)
	}
}

func (e *Engine) applyMove(r *record.Rec) {
	s, ok := e.takeOut(r)
	if !ok {
		return
	}
	j := e.jobs.At(s)
	j.Due = r.Due // a move sets the due time too (RESCHEDULE, PROMOTE)
	e.jobs.SetReason(s, r.Reason)
	switch {
	case r.Flags&record.FlagHead != 0:
		e.pushReady(s, true)
	case r.Flags&record.FlagReady == 0 && r.Due > r.Time && e.wheel.Add(s, r.Due, r.Seq):
		j.Due = r.Due
		e.markDelayed(s)
		return
	default:
		e.pushReady(s, false)
	}
	e.serve(j.Queue)
}

// takeOut finds the job a reserve or move record names, takes it out of
// wherever it is, and gives it the record's deliveries and add order.
func (e *Engine) takeOut(r *record.Rec) (uint32, bool) {
	s, ok := e.find(r)
	if !ok {
		return 0, false
	}
	e.detach(s)
	j := e.jobs.At(s)
	j.Deliveries, j.Seq = r.Deliveries, r.Seq
	e.seq = max(e.seq, r.Seq)
	return s, true
}

// find looks up the job a record names.
func (e *Engine) find(r *record.Rec) (uint32, bool) {
	var buf [jobs.SIDLen]byte
	id := r.ID
	if id == nil {
		id = jobs.RenderSID(&buf, r.SID)
	}
	qi, ok := e.queueFor(r.Queue, false)
	if !ok {
		return 0, false
	}
	return e.lookup(qi, id)
}
