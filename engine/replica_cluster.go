package engine

import "time"

// What the cluster layer needs beyond the Replicator seam (replica.go).

// SnapshotSettled is Snapshot taken only if the engine is Settled, checked
// and captured under one hold of the lock, so no write slips in between.
// A follower always is; a leader under load rarely is (ok false).
func (e *Engine) SnapshotSettled() (data []byte, ok bool) {
	// Never wait long for the lock: the caller is Raft's state machine
	// goroutine, and the lock may be held by Quiesce, which waits for that
	// goroutine (a leader's snapshot); a busy engine is simply not settled.
	deadline := time.Now().Add(50 * time.Millisecond)
	for !e.mu.m.TryLock() {
		if time.Now().After(deadline) {
			return nil, false
		}
		time.Sleep(time.Millisecond)
	}
	defer e.mu.m.Unlock()
	j := &e.j
	// proposing: a batch taken from pend is not yet in flight.
	settled := len(j.pend) == 0 && !j.proposing
	if settled {
		j.dmu.Lock()
		settled = j.durable >= j.ticket && !e.repl.failed.Load()
		j.dmu.Unlock()
	}
	if !settled {
		return nil, false
	}
	return e.snapshotLocked(), true
}

// Drain waits until every batch given to the Replicator has committed or
// failed. For a node that just stopped leading (it takes no new writes).
func (e *Engine) Drain() {
	e.mu.Lock()
	last := e.j.ticket
	if len(e.j.pend) > 0 {
		select {
		case e.j.kick <- struct{}{}:
		default:
		}
	}
	e.mu.Unlock()
	j := &e.j
	j.dmu.Lock()
	for j.durable < last {
		j.dcond.Wait()
	}
	j.dmu.Unlock()
}

// Quiesce gives a leader under load a moment when it is Settled, for a
// snapshot: it holds the lock (writes and the timer wait), proposes what is
// pending itself, waits until every batch in flight has committed, and then
// calls fn with the snapshot, still under the lock. It gives up (false) if
// that takes longer than timeout, a batch fails, or the engine follows.
// Writes wait for one commit round plus the snapshot's encoding.
func (e *Engine) Quiesce(timeout time.Duration, fn func(snapshot []byte)) bool {
	j, r := &e.j, &e.repl
	if e.opts.Replicator == nil || e.mu.held {
		return false
	}
	deadline := time.Now().Add(timeout)
	e.mu.Lock()
	defer e.mu.Unlock()
	for j.proposing { // the flusher holds a batch it took before us: it goes first
		e.mu.Unlock()
		time.Sleep(100 * time.Microsecond)
		e.mu.Lock()
		if time.Now().After(deadline) {
			return false
		}
	}
	if r.following.Load() || r.failed.Load() {
		return false
	}
	if len(j.pend) > 0 {
		select {
		case r.pmu <- struct{}{}:
		default:
			return false // a rebuild is under way
		}
		batch, first, last := j.pend, j.pendFirst, j.ticket
		j.pend = nil
		e.propose(batch, first, last) // over the window, once: the flusher waits for the lock meanwhile
		<-r.pmu
	}
	last := j.ticket
	stop := time.AfterFunc(time.Until(deadline), func() {
		j.dmu.Lock()
		j.dcond.Broadcast()
		j.dmu.Unlock()
	})
	defer stop.Stop()
	j.dmu.Lock()
	for j.durable < last && time.Now().Before(deadline) {
		j.dcond.Wait()
	}
	settled := j.durable >= last && !r.failed.Load()
	j.dmu.Unlock()
	if !settled {
		return false
	}
	fn(e.snapshotLocked())
	return true
}
