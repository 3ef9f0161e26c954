package queue

import "github.com/delayd/delayd/jobs"

// Queue is one queue's own state: its ready order, its counts of jobs by
// state, its limit, and the counters DELAY.STATS shows. The engine embeds
// it in the entry it keeps per queue, with what is the engine's (the name,
// the waiters, the watch, the push run).
//
// Delayed, Ready and the counters are the engine's to keep: it moves jobs
// between the wheel and the ready order, and says so here. Reserved moves
// with the group's count (Reserve, Unreserve), and a take goes through
// CanTake and Take, which apply the limit.
type Queue struct {
	Order                    Order // its ready jobs, in pop order
	Delayed, Ready, Reserved int
	Limit                    *Limit // non-nil while the name has a limit or a pause
	Bytes                    int64  // arena bytes of its jobs' ids and payloads (MEMORY USAGE)
	// Counters for DELAY.STATS; like the queue, they go when it empties.
	Added, Deliveries, Redeliveries, Acks, Nacks, Expired, DeadLettered uint64
}

// Jobs is the queue's jobs in every state: while it is not 0 (or clients
// wait on it) the engine keeps the queue.
func (q *Queue) Jobs() int { return q.Delayed + q.Ready + q.Reserved }

// Reserve counts the job in slot s, just taken, as reserved, in the queue
// and in its group, which it may bring to its GROUPCONCURRENCY. O(1).
func (q *Queue) Reserve(t *jobs.Slab, s uint32) {
	q.Reserved++
	q.Order.Reserve(t, s)
}

// Unreserve ends the reservation of the job in slot s (acked, handed back,
// expired or removed). It says whether the queue may have room it did not
// have: the job's group was held, or the queue has a limit, whose
// CONCURRENCY may have been reached. O(1).
func (q *Queue) Unreserve(t *jobs.Slab, s uint32) bool {
	q.Reserved--
	return q.Order.Unreserve(t, s) || q.Limit != nil
}

// CanTake says whether a pop may take a job at now: the queue has a ready
// job its order lets go and its limit has room. When only the limit's RATE
// refuses, retryAt is when a token comes back (0 otherwise): the caller
// sets a timer for it, since nothing else will say the queue has room.
func (q *Queue) CanTake(now int64) (ok bool, retryAt int64) {
	if q.Order.First() == 0 {
		return false, 0
	}
	if q.Limit == nil {
		return true, 0
	}
	return q.Limit.allows(q.Reserved, now)
}

// Take returns the slot a pop from the head (or the tail) takes, and
// spends a token of the limit's RATE at now. CanTake must have said yes.
func (q *Queue) Take(now int64, tail bool) uint32 {
	if l := q.Limit; l != nil && l.spec.Rate > 0 {
		l.spendToken(now)
	}
	if tail {
		return q.Order.Last() - 1
	}
	return q.Order.First() - 1
}

// Join puts the job in slot s, new to the queue and in no list, in the
// lane of its group and priority. O(1).
func (q *Queue) Join(t *jobs.Slab, s uint32, grp []byte, prio uint8) {
	q.Order.join(t, s, grp, prio, q.Reserved)
}

// SetLimit attaches a name's limit (nil: none) and applies its
// GROUPCONCURRENCY to the order. O(groups).
func (q *Queue) SetLimit(l *Limit) {
	q.Limit = l
	var gc uint32
	if l != nil {
		gc = uint32(l.spec.GroupConcurrency)
	}
	q.Order.setGroupCap(gc, q.Reserved)
}
