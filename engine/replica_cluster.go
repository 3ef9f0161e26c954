package engine

// What the cluster layer needs beyond the Replicator seam (replica.go).

// SnapshotSettled is Snapshot taken only if the engine is Settled, checked
// and captured under one hold of the lock, so no write slips in between.
// A follower always is; a leader under load rarely is (ok false).
func (e *Engine) SnapshotSettled() (data []byte, ok bool) {
	e.mu.Lock()
	j := &e.j
	// proposing: a batch taken from pend is not yet in flight.
	settled := len(j.pend) == 0 && !j.proposing
	if settled {
		j.dmu.Lock()
		settled = j.durable >= j.ticket && !e.repl.failed.Load()
		j.dmu.Unlock()
	}
	defer e.mu.Unlock()
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
