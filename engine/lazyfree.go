package engine

import (
	"time"

	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/queue"
)

// Lazy free: DEL (and UNLINK, its twin) of a big queue must not hold the
// lock for the whole of it (a second for 3M jobs), as Redis's lazyfree
// frees a big key's value away from its main thread. DEL detaches the
// queue from its name instead: the name is free at once (an add to it
// makes a new queue, with a new index), and the old queue, doomed, is not
// live: no lookup, SCAN, INFO count, metric or waiter reaches it, since
// each goes by name or skips queues that are not live. A goroutine then
// frees its jobs in batches of a bounded hold of the lock, sleeping a
// millisecond between them, and frees the queue's index when
// it is empty, never before: a client id's index entry hashes (queue
// index, id), so while the index is doomed no new queue can share it.
//
// What the batches must not change is what the log says: the DEL record
// is one record and replay applies it synchronously (delQueue), so a live
// engine with a queue being freed must behave as if the queue were gone:
//   - its delayed jobs never fire and its reservations never expire (no
//     dead-lettering, no redelivery): advanceLocked drops them (dropFired);
//   - UNIQUE tombstones are made at DEL time, with the DEL record's time,
//     as replay makes them: an add of the same id right after the DEL is
//     refused live as on replay;
//   - a log rewrite and a cluster snapshot skip doomed jobs;
//   - server ids stay in the sids table until their job is freed: harmless, since
//     a server id is never made twice and lookup checks the job's queue.
//
// The list of doomed queues and the pace of freeing (a batch's bounds, the
// pause between batches) are queue.Doomed's; the goroutine and the freeing
// are the engine's.
//
// FLUSHALL needs none of this: it drops the state whole (resetState), the
// slab holds no pointers, and Go's concurrent collector reclaims the rest.

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
