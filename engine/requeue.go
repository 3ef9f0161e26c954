package engine

import (
	"slices"

	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/record"
)

// DELAY.REQUEUE key id|ALL [to-key]: dead-lettered jobs go back to work
// (docs/decisions/operating-queues.md). A dead letter's origin and where a
// requeue sends it are jobs.Table's (DeadLetter, Requeue, Requeued;
// docs/decisions/requeue-options.md); this file logs one record.Requeue per
// job, never a cancel plus an add, and applies it as a move (relocate,
// move.go) that then sets the options.

// RequeueDead requeues the ready job id of a queue (every ready job with
// id nil) to its origin queue or, with to not nil, to to. It returns how
// many jobs moved and the log ticket to wait for. O(1) for one id; O(ready
// jobs of the queue) for all.
func (e *Engine) RequeueDead(name, id, to []byte) (int, uint64, error) {
	if len(to) > MaxKey {
		return 0, 0, ErrKeyTooLong
	}
	wr, err := e.begin(0)
	if err != nil {
		return 0, 0, err
	}
	defer wr.end()
	if err := e.gateAllows(record.Requeue); err != nil {
		return 0, 0, err
	}
	qi, ok := e.queueFor(name, false)
	if !ok {
		return 0, 0, nil
	}
	var slots []uint32
	if id != nil {
		if s, ok := e.jobs.Lookup(&e.queues[qi].run, qi, id); ok && e.jobs.At(s).State == jobs.StateReady {
			slots = append(slots, s)
		}
	} else {
		e.queues[qi].Order.Each(&e.jobs.Slab, func(s uint32) bool {
			slots = append(slots, s)
			return true
		})
	}
	var ticket uint64
	var targets []uint32 // served once every job is in place, as RPUSH serves
	n := 0
	for _, s := range slots {
		r, ok := e.requeueRec(s, to)
		if !ok {
			continue
		}
		ticket = e.logRec(&r) // encodes r before the move frees the id it aliases
		if t := e.requeueJob(s, &r); !slices.Contains(targets, t) {
			targets = append(targets, t) // few: the origin queues of one dead-letter queue
		}
		n++
	}
	for _, t := range targets {
		if e.queues[t].live {
			e.serve(t)
		}
	}
	return n, ticket, nil
}

// requeueRec builds the requeue record of the ready job in slot s, to to
// or, with to nil, to its origin; ok is false when it has neither.
func (e *Engine) requeueRec(s uint32, to []byte) (record.Rec, bool) {
	var buf [jobs.SIDLen]byte
	dst, ackTimeout, retry, deadLetter, ok := e.jobs.Requeue(s, to)
	if !ok {
		return record.Rec{}, false
	}
	j := e.jobs.At(s)
	src := e.queues[j.Queue].name
	r := record.Rec{Op: record.Requeue, Time: e.recNow(), Queue: []byte(src), SID: j.SID, Dst: dst, DSID: j.SID,
		AckTimeout: ackTimeout, Retry: retry, DeadLetter: deadLetter}
	id := e.jobs.ID(j, &buf)
	if j.IDLen > 0 {
		r.ID, r.DID = id, id
	}
	if src != string(r.Dst) {
		if t, ok := e.queueFor(r.Dst, false); ok {
			if _, taken := e.lookup(t, id); taken {
				r.DID, r.DSID = nil, e.newSID(r.Dst, r.Time)
			}
		}
	}
	e.seq++
	r.Seq = e.seq
	return r, true
}

// requeueJob applies a requeue record to the ready job in slot s, live or
// replayed, and returns its new queue's index (whose waiters the caller
// serves).
func (e *Engine) requeueJob(s uint32, r *record.Rec) uint32 {
	to := e.relocate(s, r) // r.flags is 0: the tail of the ready list
	e.jobs.Requeued(s, r.AckTimeout, r.Retry, r.DeadLetter)
	return to
}

// applyRequeue replays a requeue record.
func (e *Engine) applyRequeue(r *record.Rec) {
	s, ok := e.find(r)
	if !ok || e.jobs.At(s).State != jobs.StateReady {
		return
	}
	e.serve(e.requeueJob(s, r))
}
