package engine

import (
	"time"

	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/queue"
)

// Lazy free (docs/decisions/lazy-free.md): DEL detaches a queue from its
// name in O(1), and a goroutine frees its jobs in batches. The DEL record
// is one record, applied at once on replay, so a live engine with a queue
// being freed behaves as if it were gone: its delayed jobs never fire nor
// its reservations expire (dropFired), its tombstones are made at DEL time,
// a rewrite and a snapshot skip it. The doomed queues and the pace of
// freeing are queue.Doomed's; the goroutine and the freeing are the
// engine's. FLUSHALL needs none of this: it drops the state whole.

// lazyState is the doomed queues (queue.Doomed) and their freer.
type lazyState struct {
	queue.Doomed
	running bool          // the freer goroutine runs
	done    chan struct{} // closed when it ends (Stop waits)
}

// doom detaches queue qi from its name and leaves its jobs to the freer
// (DEL, live). at is the DEL record's time. O(1) plus the clients blocked
// on the name and the jobs with UNIQUE or DEBOUNCE (of any queue).
func (e *Engine) doom(qi uint32, at int64) {
	e.dropFar(qi)
	q := &e.queues[qi]
	if q.watch != nil || e.watches.All {
		e.changed(q) // once for the queue, as WATCH and tracking want
	}
	if len(e.jobs.Idents) > 0 {
		for s := range e.jobs.Idents {
			if e.jobs.At(s).Queue == qi {
				e.entomb(s, at)
			}
		}
	}
	n := q.Jobs()
	delete(e.byName, q.name)
	q.live, q.watch, q.Limit = false, nil, nil
	e.njobs -= n
	e.lazy.Doom(qi, n)
	if q.waiters.Len() > 0 {
		// Blocked clients stay blocked, now on a new queue of the name.
		nq, _ := e.queueFor([]byte(q.name), true) // may grow e.queues: q is stale from here
		e.queues[nq].waiters = e.queues[qi].waiters.Move(nq)
	}
	if !e.lazy.running {
		e.lazy.running = true
		e.lazy.done = make(chan struct{})
		go e.lazyFree(e.lazy.done)
	}
}

// lazyFree is the freer goroutine: it runs while queues are doomed.
func (e *Engine) lazyFree(done chan struct{}) {
	defer close(done)
	h := &Engine{core: e.core, mu: engineLock{m: &e.core.mutex}} // never a transaction's handle
	for {
		h.mu.Lock()
		if h.lazy.Len() == 0 || h.closed {
			h.lazy.running = false
			h.mu.Unlock()
			return
		}
		start := time.Now()
		n := h.freeSome(start)
		h.lazy.Ran(n, time.Since(start))
		h.mu.Unlock()
		time.Sleep(queue.Pause)
	}
}

// freeSome frees one batch of the oldest doomed queue's jobs, and the queue
// itself once it holds none, and returns how many jobs it freed. Called
// with mu held.
func (e *Engine) freeSome(start time.Time) int {
	qi, scan := e.lazy.Oldest()
	q := &e.queues[qi]
	n := 0
	for !queue.Over(n, start) {
		s := q.Order.First()
		if s == 0 {
			break
		}
		e.remove(s - 1)
		n++
	}
	if q.Order.First() == 0 && q.Jobs() > 0 {
		end := min(*scan+queue.Scan, e.jobs.Len())
		for ; *scan < end && !queue.Over(n, start); *scan++ {
			if j := e.jobs.At(*scan); j.State != jobs.StateFree && j.Queue == qi {
				e.remove(*scan)
				n++
			}
		}
		if *scan >= e.jobs.Len() {
			*scan = 0 // not reached with jobs left: no job joins a doomed queue
		}
	}
	if q.Jobs() == 0 {
		*q = queueEntry{}
		e.qfree = append(e.qfree, qi)
		e.lazy.Freed()
	}
	return n
}

// dropFired frees a job of a doomed queue that the wheel just let go of (a
// delay or a reservation ended): it must not become ready or expire into
// anything, as it would not have on replay, where the DEL removed it.
func (e *Engine) dropFired(s uint32) {
	j := e.jobs.At(s)
	q := &e.queues[j.Queue]
	switch j.State {
	case jobs.StateDelayed:
		q.Delayed--
	case jobs.StateReserved:
		e.unreserve(j.Queue, s)
	}
	j.State = jobs.StateFree // detach has nothing left to undo
	e.remove(s)
}

// resetLazy forgets the doomed queues (resetState: their indices mean
// nothing now); a running freer finds nothing and ends.
func (e *Engine) resetLazy() { e.lazy.Reset() }
