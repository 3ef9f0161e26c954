package engine

import (
	"cmp"
	"slices"
)

// Queue latency: how long the oldest ready job of a queue has waited, the
// figure worker fleets scale on (Sidekiq's and asynq's queue latency).
//
// It is measured from the job's due time: now minus due of the job at the
// head of the ready order, 0 with no ready job. For the jobs that became
// ready by falling due, and those added with no delay, the due time is the
// moment they became ready, so this is how long they have waited for a
// worker; it is also the lateness the next pop would record (the lateness
// histogram's figure), so the two never disagree. A job handed back (NACK
// without delay, an expired reservation) keeps its due time: it counts as
// late since then, which is what it is to whoever scheduled it. The job
// record (64 bytes, full) has no room for a separate "ready since" time.
//
// The head is the job a plain queue's next pop takes: O(1). A queue with
// priorities or groups has a head per lane (a lane is FIFO); the oldest of
// those heads is taken, O(lanes), so a low-priority or a held group's job
// waiting behind busier lanes shows. A job behind a head is not looked at.

// latency is queue qi's latency at now, in ms.
func (e *Engine) latency(qi uint32, now int64) int64 {
	due, ok := e.queues[qi].Order.OldestDue(&e.jobs.Slab)
	if !ok {
		return 0
	}
	return max(now-due, 0)
}

// QueueLatency is a queue's latency, in ms.
type QueueLatency struct {
	Name    string
	Ready   int   // its ready jobs
	Latency int64 // ms
}

// Latencies returns the n queues with the oldest ready jobs, the oldest
// first (ties by name), and the largest latency of all queues, in ms.
// Queues with no ready job are left out. O(Q log Q) in the queues with a
// ready job, plus the lanes of queues with priorities or groups.
func (e *Engine) Latencies(n int) (top []QueueLatency, most int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.nowMs()
	for i := range e.queues {
		q := &e.queues[i]
		if !q.live || q.Ready == 0 {
			continue
		}
		l := e.latency(uint32(i), now)
		most = max(most, l)
		if n > 0 {
			top = append(top, QueueLatency{Name: q.name, Ready: q.Ready, Latency: l})
		}
	}
	slices.SortFunc(top, func(a, b QueueLatency) int {
		return cmp.Or(cmp.Compare(b.Latency, a.Latency), cmp.Compare(a.Name, b.Name))
	})
	return top[:min(len(top), n)], most
}
