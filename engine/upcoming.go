package engine

// DELAY.UPCOMING key [count]: the next delayed jobs of a queue, by due time.

// Upcoming is one delayed job as DELAY.UPCOMING shows it.
type Upcoming struct {
	ID      []byte
	Due     int64 // unix ms
	Payload []byte
}

// Upcoming returns up to count delayed jobs of a queue, the next to become
// ready first (by due time, then add order: the order they will be ready
// in). The one wheel holds every queue's delayed jobs and reservations, in
// buckets that are not sorted, so this walks its buckets in time order and
// keeps the count earliest of the queue's jobs in a bounded heap
// (wheel.Earliest), stopping once no later bucket can hold an earlier one,
// or once it has seen all the queue's delayed jobs. Cost: O(J log count)
// where J is the jobs of every queue due before the count-th of this one
// (all of them, when the queue has fewer than count), plus O(buckets).
func (e *Engine) Upcoming(queueName []byte, count int) []Upcoming {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advanceLocked(e.nowMs())
	qi, ok := e.queueFor(queueName, false)
	if !ok || count <= 0 || e.queues[qi].delayed == 0 {
		return nil
	}
	hs := e.wheel.Earliest(nil, count, e.queues[qi].delayed, func(h uint32) bool {
		j := e.jobs.at(h)
		return j.queue == qi && j.state == stateDelayed
	})
	out := make([]Upcoming, len(hs))
	var buf [sidLen]byte
	for i, s := range hs {
		j := e.jobs.at(s)
		out[i] = Upcoming{ID: append([]byte(nil), e.idOf(j, &buf)...), Due: j.due,
			Payload: append([]byte(nil), e.payloadOf(j)...)}
	}
	return out
}
