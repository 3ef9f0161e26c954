package engine

import "github.com/delayd/delayd/jobs"

// DELAY.UPCOMING key [count] [AFTER due id]: the next delayed jobs of a
// queue, by due time; DELAY.RESERVED key [count] [AFTER deadline id]: its
// reserved jobs, by ack deadline. The order, the cursor and the slab scan
// are jobs.Listing's; the engine walks the wheel.

// Cursor is where a page of DELAY.UPCOMING or DELAY.RESERVED starts: after
// the job ID, whose due time (ack deadline) was Time (jobs.Cursor).
type Cursor = jobs.Cursor

// Upcoming is one delayed job as DELAY.UPCOMING shows it.
type Upcoming struct {
	ID      []byte
	Due     int64 // unix ms
	Payload []byte
	seq     uint64
}

// upcomingWalkShare: the wheel walk may visit at most one job slot in this
// many before Upcoming scans the slab instead. A walk follows bucket lists
// through nodes scattered in memory, a cache miss per job; the scan reads
// the slab in order, about 60 times faster per job (1M jobs: 170 ms against
// 2.8 ms on the reference machine), so past this share the scan is cheaper.
const upcomingWalkShare = 64

// Upcoming returns up to count delayed jobs of a queue, the next to become
// ready first (by due time, then add order). One wheel holds every queue's
// jobs, unsorted within a bucket, so it walks the buckets in time order into
// a bounded heap (wheel.Earliest) and falls back on a slab scan past one job
// slot in upcomingWalkShare (docs/decisions/operating-queues.md). Cost:
// O(min(J, S/64) log count), J the jobs visited and S the job slots, plus
// O(S) when the walk gives up.
func (e *Engine) Upcoming(queueName []byte, count int) []Upcoming {
	return e.UpcomingAfter(queueName, count, nil)
}

// UpcomingAfter is Upcoming from a cursor (nil: from the start): the next
// page of a listing. Same cost, but the walk can no longer stop once it has
// seen every job of the queue: a page deep in a long queue costs the slab
// scan, O(S).
func (e *Engine) UpcomingAfter(queueName []byte, count int, after *Cursor) []Upcoming {
	e.mu.Lock()
	defer e.mu.Unlock()
	hs := e.earliestOf(queueName, count, jobs.StateDelayed, after)
	if len(hs) == 0 && e.far.set == nil {
		return nil
	}
	out := make([]Upcoming, len(hs))
	var buf [jobs.SIDLen]byte
	for i, s := range hs {
		j := e.jobs.At(s)
		out[i] = Upcoming{ID: append([]byte(nil), e.jobs.ID(j, &buf)...), Due: j.Due,
			Payload: append([]byte(nil), e.jobs.Payload(j)...), seq: j.Seq}
	}
	if e.far.set != nil {
		return e.farUpcoming(queueName, count, after, out)
	}
	return out
}

// Reservation is one reserved job as DELAY.RESERVED shows it.
type Reservation struct {
	ID          []byte
	AckDeadline int64 // unix ms
	Deliveries  uint32
	Payload     []byte
}

// Reserved returns up to count reserved jobs of a queue, the first whose
// ack deadline passes first: the reservation deadlines ride the same wheel
// as due times, so this is Upcoming's walk with another filter. Same cost.
func (e *Engine) Reserved(queueName []byte, count int) []Reservation {
	return e.ReservedAfter(queueName, count, nil)
}

// ReservedAfter is Reserved from a cursor (nil: from the start), as
// UpcomingAfter.
func (e *Engine) ReservedAfter(queueName []byte, count int, after *Cursor) []Reservation {
	e.mu.Lock()
	defer e.mu.Unlock()
	hs := e.earliestOf(queueName, count, jobs.StateReserved, after)
	if len(hs) == 0 {
		return nil
	}
	out := make([]Reservation, len(hs))
	var buf [jobs.SIDLen]byte
	for i, s := range hs {
		j := e.jobs.At(s)
		deadline, _ := e.wheel.Due(s)
		out[i] = Reservation{ID: append([]byte(nil), e.jobs.ID(j, &buf)...), AckDeadline: deadline,
			Deliveries: j.Deliveries, Payload: append([]byte(nil), e.jobs.Payload(j)...)}
	}
	return out
}

// earliestOf returns the slots of up to count jobs of the named queue in
// state (delayed or reserved: the two the wheel holds), the first the
// wheel lets go of first, after the cursor (nil: from the first): the
// wheel walk within its budget, else the slab scan. Called with mu held.
func (e *Engine) earliestOf(queueName []byte, count int, state uint8, after *Cursor) []uint32 {
	e.advanceLocked(e.nowMs())
	qi, ok := e.queueFor(queueName, false)
	if !ok || count <= 0 {
		return nil
	}
	l := jobs.Listing{T: &e.jobs, Queue: qi, State: state}
	of := e.queues[qi].Delayed
	if state == jobs.StateReserved {
		of = e.queues[qi].Reserved
		l.Deadline = func(s uint32) int64 { d, _ := e.wheel.Due(s); return d }
	}
	if of == 0 {
		return nil
	}
	var from func(s uint32) bool // nil: from the first
	admit, walkOf := l.Mine, of
	if after != nil {
		from = l.After(&e.queues[qi].run, after)
		admit = func(s uint32) bool { return l.Mine(s) && from(s) }
		walkOf = -1 // how many jobs lie after the cursor is not known
	}
	hs, ok := e.wheel.Earliest(nil, count, walkOf, max(int(e.jobs.Len())/upcomingWalkShare, 1024), admit)
	if !ok {
		hs = l.Scan(count, of, from)
	}
	return hs
}
