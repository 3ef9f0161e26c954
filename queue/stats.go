package queue

import "github.com/delayd/delayd/jobs"

// Stats counts a queue's jobs by state, and what happened to them while the
// queue existed: DELAY.STATS, INFO and /metrics.
type Stats struct {
	Delayed, Ready, Reserved int
	Paused                   bool  // DELAY.PAUSE: a name's, so also when the queue is empty
	Latency                  int64 // ms the oldest ready job has waited since its due time, 0 with none

	Added, Deliveries, Redeliveries, Acks, Nacks, Expired, DeadLettered uint64
}

// Stats returns the queue's counts and its latency at now. Paused is left
// to the caller: a pause belongs to the name (Limits).
func (q *Queue) Stats(t *jobs.Slab, now int64) Stats {
	return Stats{Delayed: q.Delayed, Ready: q.Ready, Reserved: q.Reserved, Latency: q.Latency(t, now),
		Added: q.Added, Deliveries: q.Deliveries, Redeliveries: q.Redeliveries, Acks: q.Acks, Nacks: q.Nacks,
		Expired: q.Expired, DeadLettered: q.DeadLettered}
}

// Latency is how long, at now, the oldest ready job has waited since its
// due time, in ms (0 with none): the figure worker fleets scale on, and the
// lateness the next pop would record. The oldest is the head of the ready
// order, or the oldest of its lanes' heads; a job behind a head is not
// looked at (docs/decisions/queue-latency.md). O(1), O(lanes) with
// priorities or groups.
func (q *Queue) Latency(t *jobs.Slab, now int64) int64 {
	due, ok := q.Order.OldestDue(t)
	if !ok {
		return 0
	}
	return max(now-due, 0)
}
