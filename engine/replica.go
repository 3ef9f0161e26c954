package engine

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/delayd/delayd/wheel"
)

// Replication (cluster mode). The engine does not know Raft: it knows a
// Replicator, which takes its batches of records where the append-only log
// would, and it can be a leader or a follower.
//
// The leader decides. It applies each write to its own state as in single
// node mode (so the job a pop takes, reservation deadlines and server ids
// are decided once, by the leader's clock), and its flusher proposes each
// group-commit batch as one entry. A reply waits for its ticket as before;
// in cluster mode a ticket is durable when its batch is committed. The
// leader's state is therefore ahead of the committed log by the batches in
// flight ("speculative"): Settled says when it is not, which is when a
// snapshot of it is exact.
//
// A follower applies committed batches with ApplyBatch, as replay applies
// the log: each record first moves the wheel to the leader's time in it, so
// jobs fire and reservations expire exactly as on the leader, and no
// follower's own clock moves a job (its clock reads the time of the last
// record it applied). A follower refuses writes and pops with ErrNotLeader.
//
// A leader that loses leadership may hold effects that never commit: the
// cluster layer then rebuilds it from its last snapshot and the committed
// log (Reset, Restore, ApplyBatch) before it follows.

// ErrNotLeader refuses a write or a pop on a follower.
var ErrNotLeader = errors.New("this node is not the leader")

// ErrNotCommitted is a write's answer in cluster mode when its batch did
// not commit before leadership changed. It was applied on the old leader
// only, which rebuilds without it; the new leader may still commit it (an
// entry a leader appended can outlive it), so the client cannot know, and
// retries: an add without an ID may then be there twice, never lost.
var ErrNotCommitted = errors.New("the write may not have been committed: leadership changed")

// Proposal is a batch handed to consensus; Error blocks until it is
// committed (nil) or failed. raft.ApplyFuture is one.
type Proposal interface{ Error() error }

// Replicator takes the engine's batches in cluster mode. Propose must keep
// the order of its calls, and may block (back pressure); the batch is the
// replicator's to keep (the engine never reuses it). Each record in it is a
// uvarint length then the record, as ApplyBatch reads them.
type Replicator interface {
	Propose(batch []byte) Proposal
}

// replState is the engine's side of replication.
type replState struct {
	following atomic.Bool  // refuse writes; time is the replicated clock
	now       atomic.Int64 // the follower's clock: the time of the last record applied
	inflight  chan inflight
}

type inflight struct {
	p           Proposal
	first, last uint64
}

// Following reports whether the engine is a follower.
func (e *Engine) Following() bool { return e.repl.following.Load() }

// Follow makes the engine a follower: writes and pops get ErrNotLeader, and
// its clock stops at the time of the last record it applied. Blocked
// clients stay parked (the caller unblocks them with the role change
// error, as Redis does).
func (e *Engine) Follow() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.wheel != nil {
		e.repl.now.Store(e.wheel.Now())
	}
	e.repl.following.Store(true)
}

// Lead makes a follower the leader: its own clock runs again, jobs due
// while no node led become ready now (late, never early), reservations keep
// their absolute deadlines, and writes are accepted. The caller must first
// have applied every committed entry (raft's Barrier).
func (e *Engine) Lead() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.repl.following.Store(false)
	if e.wheel == nil {
		e.wheel = wheel.New(e.opts.Tick, e.nowMs())
	}
	e.advanceLocked(e.nowMs())
	for qi := range e.queues {
		if e.queues[qi].live && e.queues[qi].whead != nil {
			e.serve(uint32(qi)) // clients still parked from before get the jobs ready now
		}
	}
	e.armed = 0
	e.poke(0)
}

// Settled reports whether every write applied has been committed: no batch
// is pending or in flight, so the state is exactly the committed log's.
func (e *Engine) Settled() bool {
	e.mu.Lock()
	pending, last := len(e.j.pend) > 0, e.j.ticket
	e.mu.Unlock()
	if pending {
		return false
	}
	j := &e.j
	j.dmu.Lock()
	defer j.dmu.Unlock()
	return j.durable >= last && !j.replFailed
}

// ApplyBatch applies one committed batch on a follower (or on a leader
// rebuilding itself), as replay applies the log. O(records).
func (e *Engine) ApplyBatch(b []byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.applyBatchLocked(b)
}

func (e *Engine) applyBatchLocked(b []byte) error {
	j := &e.j
	j.replaying = true
	defer func() { j.replaying = false }()
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return errBadRecord
		}
		if err := e.replayRecord(b[k : k+int(n)]); err != nil {
			return err
		}
		b = b[k+int(n):]
	}
	e.dropTornUnit() // a batch holds whole units: parts never span batches
	if e.wheel != nil && e.repl.following.Load() {
		e.repl.now.Store(e.wheel.Now())
	}
	return nil
}

// Reset drops every job and queue (blocked clients stay parked), before a
// Restore or a rebuild. Ids and add order start again from what is restored.
func (e *Engine) Reset() {
	e.mu.Lock()
	defer e.mu.Unlock()
	waiting := e.parkedWaiters()
	e.resetState()
	e.lastSID, e.seq = 0, 0
	e.changedAll()
	// The first record restored sets the wheel's time, as replay does.
	e.wheel = nil
	for _, p := range waiting {
		qi, _ := e.queueFor([]byte(p.name), true)
		for _, l := range p.links {
			e.park(l, qi)
		}
	}
}

// Restore applies a snapshot written by Snapshot on top of the current
// state (normally just Reset).
func (e *Engine) Restore(r io.Reader) error {
	br := bufio.NewReaderSize(r, 1<<20)
	var buf []byte
	e.mu.Lock()
	defer e.mu.Unlock()
	for {
		n, err := binary.ReadUvarint(br)
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
		if n > 1<<30 {
			return errBadRecord
		}
		if uint64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(br, buf); err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
		// A record, framed as in a batch.
		rec := binary.AppendUvarint(nil, n)
		if err := e.applyBatchLocked(append(rec, buf...)); err != nil {
			return err
		}
	}
	if e.wheel == nil {
		e.wheel = wheel.New(e.opts.Tick, e.nowMs())
	}
	return nil
}

// Snapshot encodes every job, as the log rewrite writes them, each record
// as a uvarint length then the record, to be read back by Restore. It is
// exact only when the engine is Settled (a follower always is); it runs
// under the lock, O(jobs), so writes wait for it.
func (e *Engine) Snapshot() []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.snapshotLocked()
}

func (e *Engine) snapshotLocked() []byte {
	if e.wheel == nil {
		return nil
	}
	now := e.wheel.Now()
	var out, buf []byte
	put := func(r *rec) {
		buf = r.encode(buf[:0])
		out = binary.AppendUvarint(out, uint64(len(buf)))
		out = append(out, buf...)
	}
	put(&rec{op: opMeta, time: now, sid: e.lastSID, seq: e.seq})
	e.eachJob(func(s uint32, flags byte, deadline int64) {
		r := e.addRecOf(s, flags)
		r.time, r.deadline = now, deadline
		put(r)
	})
	return out
}

// eachJob calls fn for every job in the order replay must see them: each
// ready list in order, then every delayed and reserved job, with the flags
// and deadline of its add record. Called with mu held.
func (e *Engine) eachJob(fn func(s uint32, flags byte, deadline int64)) {
	for qi := range e.queues {
		for s := e.queues[qi].head; s != 0; s = e.jobs.at(s - 1).next {
			fn(s-1, flagReady, 0)
		}
	}
	for s := range e.jobs.n {
		switch e.jobs.at(s).state {
		case stateDelayed:
			fn(uint32(s), 0, 0)
		case stateReserved:
			deadline, _ := e.wheel.Due(uint32(s))
			fn(uint32(s), flagReserved, deadline)
		}
	}
}

// replFlusher is the flusher of cluster mode: it proposes each batch as one
// entry and does not wait for it (consensus batches and pipelines them);
// replCommitter waits for them in order and marks their tickets durable.
func (e *Engine) replFlusher() {
	j := &e.j
	defer close(e.repl.inflight)
	for {
		closing := false
		select {
		case <-j.kick:
		case <-e.logQuit:
			closing = true
		}
		e.mu.Lock()
		batch, first, last := j.pend, j.pendFirst, j.ticket
		j.pend = nil // the replicator keeps the batch: never reuse it
		j.proposing = len(batch) > 0
		e.mu.Unlock()
		if len(batch) > 0 {
			e.repl.inflight <- inflight{e.opts.Replicator.Propose(batch), first, last}
			e.mu.Lock()
			j.proposing = false
			e.mu.Unlock()
		}
		if closing {
			return
		}
	}
}

// replCommitter marks tickets durable as their batches commit. A batch
// that fails (leadership lost) fails its tickets and every one after it:
// the state is ahead of the log now, writes are refused, and the cluster
// layer rebuilds the engine from the committed log.
func (e *Engine) replCommitter() {
	j := &e.j
	defer close(j.done)
	for f := range e.repl.inflight {
		err := f.p.Error()
		j.dmu.Lock()
		if err != nil || j.replFailed {
			if !j.replFailed {
				j.replFailed = true
				j.lastErr = err
				e.opts.Logger.Warn().Err(err).Uint64("first_ticket", f.first).Msg("replication: a batch did not commit; writes are refused until the node is rebuilt")
			}
			j.failed = append(j.failed, [2]int64{int64(f.first), int64(f.last)})
			if len(j.failed) > 64 {
				j.failed = j.failed[1:]
			}
		}
		j.durable = max(j.durable, f.last)
		j.dmu.Unlock()
		j.dcond.Broadcast()
	}
}

// Rebuilt clears the failure that refused writes after a batch did not
// commit; the cluster layer calls it once the state is the committed
// log's again. Tickets given out before stay failed.
func (e *Engine) Rebuilt() {
	j := &e.j
	e.mu.Lock()
	// Records still pending were applied to the state just dropped: their
	// writes fail, as those of the batches in flight did.
	first, last := j.pendFirst, j.ticket
	pending := len(j.pend) > 0
	j.pend = nil
	e.mu.Unlock()
	j.dmu.Lock()
	if pending {
		j.failed = append(j.failed, [2]int64{int64(first), int64(last)})
		j.durable = max(j.durable, last)
	}
	j.replFailed = false
	j.dmu.Unlock()
	j.dcond.Broadcast()
}

// replWritable refuses a write on a follower, or while failed batches
// leave the state ahead of the log. Called with mu held.
func (e *Engine) replWritable() error {
	if e.repl.following.Load() {
		return ErrNotLeader
	}
	if e.opts.Replicator == nil {
		return nil
	}
	j := &e.j
	j.dmu.Lock()
	failed := j.replFailed
	j.dmu.Unlock()
	if failed {
		return ErrNotLeader
	}
	return nil
}
