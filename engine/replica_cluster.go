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
	// Idle: a batch taken from the pending one is in flight too.
	settled := e.journal.Idle()
	if !settled {
		return nil, false
	}
	return e.snapshotLocked(), true
}

// Drain waits until every batch given to the Replicator has committed or
// failed. For a node that just stopped leading (it takes no new writes).
func (e *Engine) Drain() { e.journal.Drain() }

// Quiesce gives a leader under load a moment when it is Settled, for a
// snapshot: it holds the lock (writes and the timer wait), proposes what is
// pending itself, waits until every batch in flight has committed, and then
// calls fn with the snapshot, still under the lock. It gives up (false) if
// that takes longer than timeout, a batch fails, or the engine follows.
// Writes wait for one commit round plus the snapshot's encoding.
func (e *Engine) Quiesce(timeout time.Duration, fn func(snapshot []byte)) bool {
	return e.quiesce(timeout, func() { fn(e.snapshotLocked()) })
}

// quiesce is Quiesce calling fn under the lock once the engine is settled.
func (e *Engine) quiesce(timeout time.Duration, fn func()) bool {
	if e.opts.Replicator == nil || e.mu.held {
		return false
	}
	jn := e.journal
	deadline := time.Now().Add(timeout)
	e.mu.Lock()
	defer e.mu.Unlock()
	for jn.Proposing() { // the flusher holds a batch it took before us: it goes first
		e.mu.Unlock()
		time.Sleep(100 * time.Microsecond)
		e.mu.Lock()
		if time.Now().After(deadline) {
			return false
		}
	}
	if e.repl.following.Load() || !jn.Quiesce(deadline) {
		return false
	}
	fn()
	return true
}
