package engine

import (
	"github.com/delayd/delayd/latetrace"
	"github.com/delayd/delayd/queue"
)

// Blocking pops follow Redis's design (blocked.c): pop first and park only if
// every named queue is empty. Each queue keeps a FIFO of waiters and each
// waiter knows its links, so unblocking is O(keys). A waiter is resolved
// exactly once, under the engine's lock: served a job, cancelled (timeout or
// the client left), or released by shutdown.

// Waiter is a client parked in a blocking pop.
type Waiter struct {
	ready chan struct{} // gets one value when resolved
	links []waitLink
	mode  PopMode
	move  *moveTo  // BLMOVE and BRPOPLPUSH: move the job rather than pop it
	done  bool     // guarded by Engine.mu
	d     Delivery // written before ready is signalled
	got   bool     // d holds a job (false: released by shutdown)
	count int      // DELAY.MPOP: up to this many jobs (mpop.go)
	// allow, if set (Guard), is asked under the lock before the waiter is
	// served; false resolves it without a job and with refused set, the
	// job left where it was.
	allow   func() bool
	refused bool
	more    []Delivery // DELAY.MPOP: the jobs after d
	// one holds the link of a waiter on a single queue (DELAY.POP and BLPOP
	// with one key, what workers send), so parking allocates the waiter and
	// its channel and no slice.
	one [1]waitLink
}

// waitLink is a waiter's place in one queue's FIFO (queue.Waiters).
type waitLink = queue.WaitLink[*Waiter]

// Ready is signalled once when the waiter is served or released by shutdown;
// then Result tells which.
func (w *Waiter) Ready() <-chan struct{} { return w.ready }

// Result is the job the waiter was served; ok is false when it was released
// without one (shutdown). Call it only after Ready fired.
func (w *Waiter) Result() (Delivery, bool) {
	if traceOn {
		latetrace.Woken(w, w.d.Ticket)
	}
	return w.d, w.got
}

// Refused reports whether the waiter was resolved because its Guard said
// no when a job was there for it. Call it only after Ready fired.
func (w *Waiter) Refused() bool { return w.refused }

// Guard makes serving the waiter ask allow first, under the engine's lock
// (so allow must be quick and take no lock the engine's callers hold): a
// blocked client whose rights were taken away while it waited is answered
// with an error and the job stays, as Redis 7.2 re-checks a blocked
// command's permissions when it runs it again.
func (e *Engine) Guard(w *Waiter, allow func() bool) {
	e.mu.Lock()
	w.allow = allow
	e.mu.Unlock()
}

// PopOrWait pops as Pop does (mode says from which end, and whether the job
// is reserved); when every queue is empty it parks a waiter on all of them
// instead and returns it. The caller must end the wait with Ready, or with
// CancelWait (timeout, client gone). DELAY.POP and BLPOP/BRPOP waiters of a
// queue share one FIFO.
func (e *Engine) PopOrWait(names [][]byte, mode PopMode) (Delivery, *Waiter, error) {
	return e.PopOrWaitInto(names, mode, nil)
}

// PopOrWaitInto is PopOrWait with a Scratch for the job it pops at once
// (see Delivery); a parked waiter's job gets memory of its own.
func (e *Engine) PopOrWaitInto(names [][]byte, mode PopMode, to *Scratch) (Delivery, *Waiter, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	to.Reset()
	if d, ok := e.popLocked(names, mode, to, 0); ok {
		return d, nil, nil
	}
	w, err := e.wait(names, mode)
	return Delivery{}, w, err
}

// wait parks a waiter on every named queue, after a pop found them all
// empty. Called with mu held.
func (e *Engine) wait(names [][]byte, mode PopMode) (*Waiter, error) {
	if e.closed {
		return nil, ErrClosed
	}
	if err := e.replWritable(); err != nil {
		return nil, err
	}
	if e.mu.held {
		// Inside a transaction a blocking pop is its non-blocking form, as
		// in Redis: nothing could arrive while the transaction holds the lock.
		return nil, ErrInTransaction
	}
	w := &Waiter{ready: make(chan struct{}, 1), mode: mode}
	if len(names) == 1 {
		w.links = w.one[:]
	} else {
		w.links = make([]waitLink, len(names))
	}
	for i, name := range names {
		qi, _ := e.queueFor(name, true)
		w.links[i].W = w
		e.park(&w.links[i], qi)
	}
	e.stats.WaitersNow++
	return w, nil
}

// park appends a waiter's link to the tail of queue qi's FIFO. O(1).
func (e *Engine) park(l *waitLink, qi uint32) { e.queues[qi].waiters.Park(l, qi) }

// CancelWait ends a wait that timed out or whose client left. If the waiter
// was served in the meantime, it returns that job: the caller either replies
// with it (timeout) or hands it back with Requeue (client gone).
func (e *Engine) CancelWait(w *Waiter) (Delivery, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if w.done {
		return w.d, w.got
	}
	e.resolve(w, false)
	return Delivery{}, false
}

// serve hands ready jobs of queue qi to its waiters, oldest first. Inside a
// transaction it only notes the queue: Atomic serves it at the end.
func (e *Engine) serve(qi uint32) {
	if e.inTx {
		if e.queues[qi].waiters.Len() > 0 {
			e.txServe = append(e.txServe, qi)
		}
		return
	}
	e.serveWaiters(qi)
}

// serveWaiters is serve's loop: it hands out jobs now.
func (e *Engine) serveWaiters(qi uint32) {
	if e.j.replaying || e.repl.following.Load() {
		// Replayed and replicated records only rebuild state: a pop made
		// here would be logged nowhere (a follower, or a node that just
		// stopped leading and still has clients parked until they are
		// unblocked, would hand out a job the group still holds).
		return
	}
	for {
		q := &e.queues[qi]
		if q.waiters.Len() == 0 || e.replWritable() != nil || !e.canTake(qi) {
			// A follower (or a leader that must be rebuilt) serves no one:
			// the pop would be a record no leader made.
			return
		}
		w := q.waiters.First().W
		if w.allow != nil && !w.allow() {
			w.refused = true
			e.resolve(w, false)
			continue
		}
		if w.move == nil {
			w.d = e.takeFrom(qi, w.mode)
			e.takeMore(w, qi)
			e.resolve(w, true)
			continue
		}
		var to uint32
		w.d, to = e.moveFrom(qi, w.move.dst, w.move.ends)
		e.resolve(w, true) // first, so that a move onto its own queue does not serve it twice
		e.serve(to)
	}
}

// resolve unlinks a waiter from every queue it waits on, exactly once.
func (e *Engine) resolve(w *Waiter, got bool) {
	if w.done {
		return
	}
	w.done, w.got = true, got
	for i := range w.links {
		l := &w.links[i]
		e.queues[l.Q].waiters.Unlink(l)
	}
	for i := range w.links {
		e.releaseQueue(w.links[i].Q)
	}
	e.stats.WaitersNow--
	if traceOn && got {
		e.traceServe(w)
	}
	w.ready <- struct{}{}
}

// parked is the FIFO of blocked clients of one queue, kept across a reset
// of the engine's state (reloadLocked, FLUSHALL).
type parked struct {
	name  string
	links []*waitLink
}

// parkedWaiters lists every queue's waiters, in FIFO order. O(queues +
// waiters).
func (e *Engine) parkedWaiters() []parked {
	var waiting []parked
	for i := range e.queues {
		q := &e.queues[i]
		if !q.live || q.waiters.Len() == 0 {
			continue
		}
		p := parked{name: q.name}
		for l := q.waiters.First(); l != nil; l = l.Next() {
			p.links = append(p.links, l)
		}
		waiting = append(waiting, p)
	}
	return waiting
}

// repark puts the waiters parkedWaiters listed back in their queues, in the
// same order, after a reset; then jobs due by now fire and serve them, and
// the timer goroutine re-reads its deadline.
func (e *Engine) repark(waiting []parked) {
	e.parkAgain(waiting)
	e.advanceLocked(e.nowMs())
	for _, p := range waiting {
		if qi, ok := e.queueFor([]byte(p.name), false); ok {
			e.serve(qi)
		}
	}
	e.armed = 0
	e.poke(0)
}

// parkAgain is repark without serving anyone: for a replay, which moves
// time only to its records' times, and a follower, which serves no one.
func (e *Engine) parkAgain(waiting []parked) {
	for _, p := range waiting {
		qi, _ := e.queueFor([]byte(p.name), true)
		for _, l := range p.links {
			e.park(l, qi)
		}
	}
}
