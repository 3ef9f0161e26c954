package journal

import (
	"sync/atomic"
	"time"
)

// In cluster mode the sink is a Replicator: the proposer step proposes each
// group-commit batch as one entry and does not wait for it (consensus
// batches and pipelines them); the committer step waits for them in order
// and marks their tickets durable. A ticket is durable when its batch is
// committed. Once a batch has failed nothing more is proposed: those
// records were applied to a state being dropped, and the owner rebuilds
// it, then calls Rebuilt.

// Proposal is a batch handed to consensus; Error blocks until it is
// committed (nil) or failed. raft.ApplyFuture is one.
type Proposal interface{ Error() error }

// Replicator takes the batches in cluster mode. Propose must keep the
// order of its calls, and may block (back pressure), but must return:
// Rebuilt waits for a call in progress. The batch is the caller's again
// once Propose returns (the next batch is gathered in its array): a
// replicator copies what it keeps. Each record in it is a uvarint length
// then the record.
type Replicator interface {
	Propose(batch []byte) Proposal
}

type replState struct {
	// inFlight counts the batches proposed and not yet answered (guarded
	// by dmu); the proposer proposes no more than Options.Window at once,
	// so that under load the records gather into fewer, larger entries
	// (Raft's cost is per entry: encoding, the log store's B-tree, the
	// state machine's call) instead of many small ones.
	inFlight int
	// failed: a batch did not commit, so the owner's state is ahead of
	// the log until Rebuilt; writes are refused and nothing more is
	// proposed.
	failed atomic.Bool
	// pmu is held by the proposer from deciding to propose a batch until
	// Propose returns, and by Rebuilt, so that no batch of a dropped state
	// is proposed once Rebuilt returns. A one-slot channel rather than a
	// sync.Mutex: Propose may block, and a test's fake clock (synctest)
	// sees a goroutine waiting on a channel as blocked, not on a mutex.
	pmu chan struct{}
	// stale is the last ticket given out before the last Rebuilt (guarded
	// by dmu): batches up to it have been answered already.
	stale    uint64
	inflight chan inflight
}

type inflight struct {
	p           Proposal
	first, last uint64
}

// notProposed is the outcome of a batch the proposer did not propose: the
// state it was applied to is being dropped.
type notProposed struct{}

func (notProposed) Error() error { return ErrNotCommitted }

// ReplFailed reports whether a batch failed and the owner has not been
// Rebuilt since. One atomic load.
func (j *Journal) ReplFailed() bool { return j.repl.failed.Load() }

// RunProposer is the cluster mode flusher, run on the owner's goroutine
// until quit is closed: it proposes each batch as one entry. It ends the
// committer's input when it returns.
func (j *Journal) RunProposer(quit <-chan struct{}) {
	r := &j.repl
	defer close(r.inflight)
	for {
		closing := false
		select {
		case <-j.kick:
		case <-quit:
			closing = true
		}
		// Wait for room in the window before taking the batch, so that
		// the writes made meanwhile go out with it.
		j.dmu.Lock()
		for w := j.opts.Window; w > 0 && r.inFlight >= w && !r.failed.Load() && !closing; {
			j.dcond.Wait()
		}
		j.dmu.Unlock()
		j.mu.Lock()
		batch, first, last := j.takeBatch()
		j.proposing = len(batch) > 0
		j.mu.Unlock()
		if len(batch) > 0 {
			r.pmu <- struct{}{}
			j.propose(batch, first, last)
			<-r.pmu
			j.mu.Lock()
			j.proposing = false
			j.recycle(batch)
			j.mu.Unlock()
		}
		if closing {
			return
		}
	}
}

// takeBatch takes the pending records for proposing; the writes that
// come meanwhile gather in the array of the batch proposed before, so that
// a leader's batches cost no allocation and no growing once warm (two
// arrays, as the single node's flusher). Called with mu held.
func (j *Journal) takeBatch() (batch []byte, first, last uint64) {
	batch, first, last = j.pend, j.pendFirst, j.ticket
	j.pend, j.rspare = j.rspare, nil
	return batch, first, last
}

// recycle keeps a proposed batch's array for the batch after next, unless
// a burst made it large. Called with mu held, after Propose returned.
func (j *Journal) recycle(batch []byte) {
	if cap(batch) <= 4<<20 {
		j.rspare = batch[:0]
	}
}

// propose hands one batch to the Replicator (or, once a batch has failed,
// or for a state Rebuilt dropped, answers it ErrNotCommitted without
// proposing it) and queues it for the committer. The caller holds pmu, so
// batches are proposed in the order they were taken.
func (j *Journal) propose(batch []byte, first, last uint64) {
	r := &j.repl
	j.dmu.Lock()
	r.inFlight++
	dropped := r.failed.Load() || last <= r.stale
	j.dmu.Unlock()
	var p Proposal = notProposed{}
	if !dropped {
		p = j.opts.Replicator.Propose(batch)
	}
	r.inflight <- inflight{p, first, last}
}

// RunCommitter marks tickets durable as their batches commit, on the
// owner's goroutine, until RunProposer has returned. A batch that fails
// (leadership lost) fails its tickets and every one after it: the owner's
// state is ahead of the log now, writes are refused, and the cluster layer
// rebuilds it from the committed log. The outcome of a batch Rebuilt
// already answered changes nothing.
func (j *Journal) RunCommitter() {
	r := &j.repl
	for f := range r.inflight {
		err := f.p.Error()
		j.dmu.Lock()
		r.inFlight--
		switch {
		case f.last <= r.stale:
		case err != nil || r.failed.Load():
			if !r.failed.Load() {
				r.failed.Store(true)
				j.lastErr = err
				j.opts.Logger.Warn().Err(err).Uint64("first_ticket", f.first).Msg("replication: a batch did not commit; writes are refused until the node is rebuilt")
			}
			j.failTickets(f.first, f.last)
		}
		j.durable = max(j.durable, f.last)
		j.dmu.Unlock()
		j.dcond.Broadcast()
	}
}

// failTickets records tickets first..last as failed, merged into the last
// range when they follow it, so that a failure followed by many batches in
// flight stays one range however many there were. Called with dmu held.
func (j *Journal) failTickets(first, last uint64) {
	if n := len(j.failed); n > 0 && j.failed[n-1][1]+1 >= int64(first) {
		j.failed[n-1][1] = max(j.failed[n-1][1], int64(last))
		return
	}
	j.failed = append(j.failed, [2]int64{int64(first), int64(last)})
	if len(j.failed) > 64 {
		j.failed = j.failed[1:]
	}
}

// Rebuilt clears the failure that refused writes after a batch did not
// commit. Every ticket given out before it that has not committed yet
// fails with ErrNotCommitted now, whether its batch was pending, being
// proposed or in flight, so no reply waits on a state that is gone; and no
// batch of that state is proposed after it returns.
func (j *Journal) Rebuilt() {
	r := &j.repl
	r.pmu <- struct{}{} // a Propose in progress finishes first
	j.mu.Lock()
	last := j.ticket
	j.pend = nil // applied to the state just dropped
	j.mu.Unlock()
	j.dmu.Lock()
	r.stale = last
	if j.durable < last {
		j.failTickets(j.durable+1, last)
		j.durable = last
	}
	r.failed.Store(false)
	j.dmu.Unlock()
	<-r.pmu
	j.dcond.Broadcast()
}

// Settled reports whether every record appended has been committed: none
// is pending or in flight, and no batch failed.
func (j *Journal) Settled() bool {
	j.mu.Lock()
	pending, last := len(j.pend) > 0, j.ticket
	j.mu.Unlock()
	if pending {
		return false
	}
	j.dmu.Lock()
	defer j.dmu.Unlock()
	return j.durable >= last && !j.repl.failed.Load()
}

// Idle is Settled, and no batch is between being taken and proposed. The
// owner calls it under its lock, so that nothing is appended meanwhile.
func (j *Journal) Idle() bool {
	j.mu.Lock()
	idle := len(j.pend) == 0 && !j.proposing
	last := j.ticket
	j.mu.Unlock()
	if !idle {
		return false
	}
	j.dmu.Lock()
	defer j.dmu.Unlock()
	return j.durable >= last && !j.repl.failed.Load()
}

// Drain waits until every batch given out so far has committed or failed.
func (j *Journal) Drain() {
	j.mu.Lock()
	last := j.ticket
	if len(j.pend) > 0 {
		j.Wake()
	}
	j.mu.Unlock()
	j.dmu.Lock()
	for j.durable < last {
		j.dcond.Wait()
	}
	j.dmu.Unlock()
}

// Proposing reports whether the proposer holds a batch it took and has not
// proposed yet.
func (j *Journal) Proposing() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.proposing
}

// Quiesce proposes what is pending itself, over the window, and waits
// until every batch in flight has committed. It gives up (false) past
// deadline, if a batch fails, or if a rebuild is under way. The owner
// calls it under its lock once Proposing is false, so nothing is appended
// meanwhile and no batch is taken before this one.
func (j *Journal) Quiesce(deadline time.Time) bool {
	r := &j.repl
	if r.failed.Load() {
		return false
	}
	j.mu.Lock()
	pending := len(j.pend) > 0
	j.mu.Unlock()
	if pending {
		select {
		case r.pmu <- struct{}{}:
		default:
			return false // a rebuild is under way
		}
		j.mu.Lock()
		batch, first, last := j.takeBatch()
		j.mu.Unlock()
		j.propose(batch, first, last) // over the window, once: the proposer waits meanwhile
		j.mu.Lock()
		j.recycle(batch)
		j.mu.Unlock()
		<-r.pmu
	}
	last := j.Ticket()
	stop := time.AfterFunc(time.Until(deadline), func() {
		j.dmu.Lock()
		j.dcond.Broadcast()
		j.dmu.Unlock()
	})
	defer stop.Stop()
	j.dmu.Lock()
	defer j.dmu.Unlock()
	for j.durable < last && time.Now().Before(deadline) {
		j.dcond.Wait()
	}
	return j.durable >= last && !r.failed.Load()
}
