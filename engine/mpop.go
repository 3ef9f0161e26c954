package engine

// DELAY.MPOP: up to n ready jobs of the first queue that has one, as Redis's
// BLMPOP takes up to n elements of the first non-empty list. Each job is
// taken as DELAY.POP takes it (reserved if it has an ack timeout, else
// removed), each logged as its own pop. A blocked MPOP waits in the same
// FIFO as every other pop of its queues; when it is served it takes up to
// n of what is ready then, in one hold of the lock.

// MPopOrWait takes up to count ready jobs of the first of names that has
// one; when none has, it parks a waiter (as PopOrWait does) that takes up
// to count when served: its jobs are Result's then More's. Inside a
// transaction it never parks (ErrInTransaction). O(names + count).
func (e *Engine) MPopOrWait(names [][]byte, count int) ([]Delivery, *Waiter, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	count = max(count, 1)
	d, ok := e.popLocked(names, PopDelay, nil, 0)
	if !ok {
		w, err := e.wait(names, PopDelay)
		if w != nil {
			w.count = count
		}
		return nil, w, err
	}
	// The rest from the same queue only, as BLMPOP does, and as a served
	// waiter takes them (takeMore): one clock read and advance served the
	// first pop, and none is needed per job after it in this hold of the
	// lock (each was a map lookup, a clock read and a wheel advance).
	qi, live := e.queueFor(d.Queue, false)
	out := make([]Delivery, 1, min(count, 64))
	out[0] = d
	// The first pop may have emptied and freed the queue: then qi is no
	// queue of its own (0 names whichever queue sits there) and nothing
	// more is taken.
	for live && len(out) < count && e.canTake(qi) {
		out = append(out, e.takeFrom(qi, PopDelay))
	}
	return out, nil, nil
}

// takeMore gives a waiter served a job of queue qi (serveWaiters) the rest
// of the jobs it asked for, from the same queue, while it has ready ones.
func (e *Engine) takeMore(w *Waiter, qi uint32) {
	// canTake applies the queue's limits (and spends a RATE token) for
	// each job, as each DELAY.POP would.
	for len(w.more)+1 < w.count && e.canTake(qi) {
		w.more = append(w.more, e.takeFrom(qi, w.mode))
	}
}

// More is the jobs a waiter parked by MPopOrWait got after the one Result
// returns, in the order taken. Call it only after Ready fired or CancelWait
// returned a job.
func (w *Waiter) More() []Delivery { return w.more }
