package engine

import (
	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/record"
)

// Moving a job in time by its id: DELAY.RESCHEDULE, DELAY.RESCHEDULEAT,
// DELAY.PROMOTE. The job stays where it is stored (same slot, id, payload,
// options, deliveries); only its place in time changes, in one step under
// the lock and one move record in the log, so no crash or concurrent pop
// can see it gone or twice (a cancel plus an add, which job libraries make
// users do, loses the job if the add fails). The move record sets due, add
// order, deliveries and where the job is outright, as a NACK's does.

// RescheduleArgs say where DELAY.RESCHEDULE(AT) moves a job to: Delay ms
// from now, or, with At, the absolute unix ms Due.
type RescheduleArgs struct {
	Queue, ID []byte
	Delay     int64
	At        bool
	Due       int64
}

// Reschedule moves a delayed or ready job to a new due time: delayed until
// then, or, when the time is now or past, ready now at the tail of its
// ready list. It reports false (and changes nothing) when there is no such
// job or it is reserved. O(1).
func (e *Engine) Reschedule(a RescheduleArgs) (bool, uint64, error) {
	wr, err := e.begin(0)
	if err != nil {
		return false, 0, err
	}
	defer wr.end()
	now := wr.now
	s, ok := e.movable(a.Queue, a.ID, true)
	if !ok {
		return false, 0, nil
	}
	due := a.Due
	switch {
	case a.At:
	case a.Delay > 0:
		due = e.laterMs(a.Delay)
	default:
		due = now
	}
	qi := e.jobs.At(s).Queue
	ticket, ready := e.moveTo(s, now, due)
	if ready {
		e.serve(qi)
	}
	return true, ticket, nil
}

// Promote makes the named delayed jobs ready now, each at the tail of its
// ready list in the order given, and returns how many moved. Ready and
// reserved jobs, and ids with no job, are left alone. O(1) per id.
func (e *Engine) Promote(queueName []byte, ids [][]byte) (int, uint64, error) {
	wr, err := e.begin(0)
	if err != nil {
		return 0, 0, err
	}
	defer wr.end()
	now := wr.now
	var ticket uint64
	n := 0
	qi := uint32(0)
	for _, id := range ids {
		s, ok := e.movable(queueName, id, false)
		if !ok {
			continue
		}
		qi = e.jobs.At(s).Queue
		ticket, _ = e.moveTo(s, now, now)
		n++
	}
	if n > 0 {
		// Once, after every move is logged: the pops it makes follow them.
		e.serve(qi)
	}
	return n, ticket, nil
}

// movable finds a job that may be moved in time: delayed, or ready too when
// readyToo is set.
func (e *Engine) movable(queueName, id []byte, readyToo bool) (uint32, bool) {
	qi, ok := e.queueFor(queueName, false)
	if !ok {
		return 0, false
	}
	s, ok := e.lookup(qi, id)
	if !ok {
		return 0, false
	}
	switch e.jobs.At(s).State {
	case jobs.StateDelayed:
		return s, true
	case jobs.StateReady:
		return s, readyToo
	}
	return 0, false
}

// moveTo takes the job in slot s out of the wheel or its ready list and puts
// it back due at due: delayed, or ready at the tail when due is not after
// now. It gets a new add order, so among jobs due the same millisecond it
// comes after those already there, as an add would. The move is logged
// before the job is placed. It reports whether the job is ready (the caller
// serves the queue's waiters). O(1).
func (e *Engine) moveTo(s uint32, now, due int64) (uint64, bool) {
	j := e.jobs.At(s)
	e.detach(s)
	e.seq++
	j.Seq, j.Due = e.seq, due
	r := e.recFor(record.Move, s)
	r.Due, r.Seq, r.Deliveries = due, j.Seq, j.Deliveries
	if due > now && e.wheel.Add(s, due, j.Seq) {
		e.markDelayed(s)
		e.poke(due)
		return e.logRec(&r), false
	}
	r.Flags = record.FlagReady
	ticket := e.logRec(&r)
	e.pushReady(s, false)
	return ticket, true
}
