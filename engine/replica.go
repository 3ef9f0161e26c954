package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/journal"
	"github.com/delayd/delayd/record"
)

// Replication (cluster mode; docs/decisions/replication.md). The engine
// does not know Raft: it knows a Replicator, the journal's sink in place of
// the log file. The leader decides and applies as a single node does, so
// its state runs ahead of the committed log by the batches in flight
// (Settled says when it does not). A follower applies committed batches
// with ApplyBatch as replay applies the log, its clock the time of the last
// record applied; so that it fires what the leader fired, the leader logs
// the time its wheel advances to (replTime). A new leader's clock never
// reads before the last time it replicated.

// ErrNotLeader refuses a write or a pop on a follower.
var ErrNotLeader = errors.New("this node is not the leader")

// ErrNotCommitted is a write's answer in cluster mode when its batch did
// not commit before leadership changed (journal.ErrNotCommitted).
var ErrNotCommitted = journal.ErrNotCommitted

// errLeading refuses ApplyBatch and Restore on a leader: its state is its
// own writes, and a record applied under them would be applied twice or
// out of order.
var errLeading = errors.New("engine: committed records are applied on a follower only (Follow or Reset first)")

// Proposal is a batch handed to consensus; Error blocks until it is
// committed (nil) or failed. raft.ApplyFuture is one.
type Proposal = journal.Proposal

// Replicator takes the engine's batches in cluster mode: the journal's
// sink in place of the log file (journal.Replicator).
type Replicator = journal.Replicator

// replState is the engine's side of replication: its role and its clock.
// The batches in flight are the journal's.
type replState struct {
	following atomic.Bool // refuse writes; time is the replicated clock
	// now is a follower's clock: the time of the last record applied. On a
	// leader it is the floor its own clock never reads below.
	now atomic.Int64
	// lastTime is the latest time of a record applied (guarded by mu).
	lastTime int64
	// gen counts Resets: the records committed after a capture
	// (CaptureTo) no longer follow it once the state was replaced.
	gen atomic.Uint64
	// snapJobs: Restore is filing a snapshot's own jobs into an engine
	// that held none, each distinct (presizeRestore). Guarded by mu.
	snapJobs bool
	// capture is the capture reading a frozen copy of the jobs after the
	// lock was let go (replica_capture.go), nil when none. Guarded by mu.
	capture *captureRun
}

// Following reports whether the engine is a follower.
func (e *Engine) Following() bool { return e.repl.following.Load() }

// Follow makes the engine a follower: writes and pops get ErrNotLeader, and
// its clock stops at the time its wheel reached. Blocked clients stay
// parked, never served (the caller unblocks them with the role change
// error, as Redis does). Batches in flight still commit or fail; if one
// fails the engine must be rebuilt before it leads again.
func (e *Engine) Follow() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.repl.following.Load() {
		return
	}
	if e.wheel != nil {
		e.repl.now.Store(e.wheel.Now())
	}
	e.repl.following.Store(true)
	e.disarmSchedules()
}

// Lead makes a follower the leader: its own clock runs again, never below
// the replicated time, jobs due while no node led become ready now (late,
// never early), reservations keep their absolute deadlines, blocked clients
// still parked are served, and writes are accepted. The caller must first
// have applied every committed entry (raft's Barrier).
func (e *Engine) Lead() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.wheel == nil {
		e.wheel = e.newJobWheel(e.nowMs())
	}
	e.repl.now.Store(max(e.repl.now.Load(), e.wheel.Now()))
	e.repl.following.Store(false)
	e.advanceLocked(e.nowMs())
	e.serveParked()
	e.armSchedules(false)
	e.armed = 0
	e.poke(0)
}

// serveParked serves the clients parked on every queue, as if a job had
// just arrived in each. Called with mu held. O(queues).
func (e *Engine) serveParked() {
	for qi := range e.queues { // serving may add queues: they have no waiters
		if q := &e.queues[qi]; q.live && q.waiters.Len() > 0 {
			e.serve(uint32(qi))
		}
	}
}

// Settled reports whether every write applied has been committed: no batch
// is pending or in flight, so the state is exactly the committed log's.
func (e *Engine) Settled() bool { return e.journal.Settled() }

// ApplyBatch applies one committed batch on a follower, as replay applies
// the log. A malformed batch returns an error with the records before the
// bad one applied: the state no longer follows the log, and the node must
// be rebuilt. O(records).
func (e *Engine) ApplyBatch(b []byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.repl.following.Load() {
		return errLeading
	}
	j := &e.j
	j.replaying = true
	defer e.endApply()
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return record.ErrBad
		}
		if err := e.replayRecord(b[k : k+int(n)]); err != nil {
			return err
		}
		b = b[k+int(n):]
	}
	return nil
}

// endApply ends applying records on a follower: a unit cut short is
// dropped (a batch holds whole units, so one never spans batches), and the
// clock moves to the last record's time. Called with mu held.
func (e *Engine) endApply() {
	e.j.replaying = false
	e.dropTornUnit()
	t := e.repl.lastTime
	if e.wheel != nil {
		t = max(t, e.wheel.Now())
	}
	e.repl.now.Store(t)
}

// Reset drops every job and queue and makes the engine a follower, before a
// Restore or a rebuild: from now on its state comes from records only.
// Blocked clients stay parked. Ids and add order start again from what is
// restored.
func (e *Engine) Reset() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.wheel != nil && !e.repl.following.Load() {
		e.repl.now.Store(e.wheel.Now())
	}
	e.repl.following.Store(true)
	e.repl.gen.Add(1)
	waiting := e.parkedWaiters()
	e.resetState() // the first record restored sets the wheel's time, as replay does
	e.lastSID, e.seq, e.repl.lastTime = 0, 0, 0
	e.changedAll()
	e.parkAgain(waiting)
}

// Restore applies a snapshot written by Snapshot on top of the current
// state (normally just Reset), on a follower. A snapshot that does not end
// with Snapshot's end mark (cut short) is an error; so is any error of r.
// After an error the state is partial: Reset it before anything else.
// O(jobs).
func (e *Engine) Restore(r io.Reader) error {
	sr := record.NewSnapReader(r)
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.repl.following.Load() {
		return errLeading
	}
	e.j.replaying = true
	defer e.endApply()
	defer func() { e.repl.snapJobs = false }()
	for first := true; ; first = false {
		buf, err := sr.Next()
		if err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
		if buf == nil { // the end mark
			break
		}
		if first {
			e.repl.snapJobs = e.presizeRestore(buf)
		} else if e.repl.snapJobs && len(buf) > 0 && buf[0] == record.Meta {
			var r record.Rec
			if r.Decode(buf) == nil && record.IsJobsEnd(&r) {
				e.repl.snapJobs = false // what follows is the log after the capture
			}
		}
		if err := e.replayRecord(buf); err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
	}
	if e.wheel == nil {
		e.wheel = e.newJobWheel(e.nowMs())
	}
	return nil
}

// presizeRestore sizes the id index for the jobs a snapshot says it
// holds (record.SizeMark on its first record), when the engine holds none:
// grown one power of two at a time, the index moved every job again at
// each step and a lookup probed both tables while it moved, most of a
// restore's time at millions of jobs (docs/decisions/raft-snapshots.md).
// It says whether the snapshot's jobs, up to its record.JobsEndMark, may be
// filed without a lookup (place: distinct jobs, and none before them).
// Called with mu held.
func (e *Engine) presizeRestore(first []byte) bool {
	var r record.Rec
	if r.Decode(first) != nil || e.njobs > 0 {
		return false
	}
	clients, sids, ok := record.SizeOf(&r)
	const most = 1 << 31 // slots are uint32: a bad hint must not map a huge table
	if !ok || clients > most || sids > most {
		return false
	}
	e.jobs.ReserveIDs(int(clients))
	e.jobs.ReserveSIDs(int(sids))
	return true
}

// replaced finds the job an add of id to queue qi replaces: none among a
// snapshot's own jobs restored into an empty engine (snapJobs), where a
// lookup was a third of a restore's time, each probe a miss in the job
// table.
func (e *Engine) replaced(qi uint32, id []byte) (uint32, bool) {
	if e.repl.snapJobs {
		return 0, false
	}
	return e.jobs.Lookup(&e.queues[qi].run, qi, id)
}

// Snapshot encodes every job, as the log rewrite writes them, each record
// as a uvarint length then the record, and a zero length as the end mark,
// to be read back by Restore. It is exact only when the engine is Settled
// (a follower always is); it runs under the lock, O(jobs), so writes wait
// for it.
func (e *Engine) Snapshot() []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.snapshotLocked()
}

func (e *Engine) snapshotLocked() []byte { return e.appendSnapshot(nil) }

// appendSnapshot appends the snapshot to out. Called with mu held.
func (e *Engine) appendSnapshot(out []byte) []byte {
	var now int64
	if e.wheel != nil {
		now = e.wheel.Now()
	} else {
		now = e.nowMs() // just Reset: no job
	}
	var buf []byte
	e.snapshotRecs(now, func(r *record.Rec) {
		buf = r.Encode(buf[:0])
		out = record.AppendSnap(out, buf)
	})
	return record.EndSnap(out)
}

// snapshotRecs hands put a snapshot's records at now, in the order replay
// must see them: the meta record, the state records, then every job.
// Called with mu held.
func (e *Engine) snapshotRecs(now int64, put func(*record.Rec)) {
	e.snapshotHead(now, put)
	if e.wheel != nil {
		// One record for every job: declared in the closure, each escaped
		// to the heap through put (a func value), an allocation a job and
		// a quarter of a capture's time under the lock at 10M jobs.
		var r record.Rec
		e.eachJob(func(s uint32, ready bool) {
			r = e.wholeRec(s, ready, now)
			put(&r)
		})
	}
	put(&record.Rec{Op: record.Meta, Time: now, SID: e.lastSID, Seq: e.seq, Queue: record.JobsEndMark})
}

// snapshotHead hands put the records a snapshot begins with: the meta
// record (with the jobs' count) and the state records. Called with mu
// held.
func (e *Engine) snapshotHead(now int64, put func(*record.Rec)) {
	clients := e.jobs.ClientIDs()
	size := record.SizeMark(uint64(clients), uint64(max(e.njobs-clients, 0)))
	put(&record.Rec{Op: record.Meta, Time: now, SID: e.lastSID, Seq: e.seq, Queue: size})
	for _, r := range e.stateRecs(now) {
		put(&r)
	}
}

// eachJob calls fn for every job in the order replay must see them: each
// ready list in order (ready true), then every delayed and reserved job.
// Called with mu held.
func (e *Engine) eachJob(fn func(s uint32, ready bool)) {
	for qi := range e.queues {
		if !e.queues[qi].live {
			continue // being freed (lazyfree.go)
		}
		e.queues[qi].Order.Each(&e.jobs.Slab, func(s uint32) bool {
			fn(s, true)
			return true
		})
	}
	for s := range e.jobs.Len() {
		if j := e.jobs.At(s); e.queues[j.Queue].live && (j.State == jobs.StateDelayed || j.State == jobs.StateReserved) {
			fn(uint32(s), false)
		}
	}
}

// replTime logs the time a leader's wheel is about to advance to, before
// anything fires: a follower applying it fires the same jobs at the same
// time, before the records that follow (a blocked client served). Without
// it a follower would fire them only at the next write, after records the
// leader made later, and a leader stepping down would hold jobs moved by a
// clock no follower saw. Called with mu held. One small record per advance
// that has work, which is at most one per tick.
func (e *Engine) replTime(now int64) {
	if e.opts.Replicator == nil || e.repl.following.Load() {
		return
	}
	e.logRec(&record.Rec{Op: record.Meta, Time: now, SID: e.lastSID, Seq: e.seq})
}

// replFlusher is the flusher of cluster mode: the journal proposes each
// batch as one entry and does not wait for it (consensus batches and
// pipelines them); replCommitter waits for them in order and marks their
// tickets durable.
func (e *Engine) replFlusher() { e.journal.RunProposer(e.logQuit) }

func (e *Engine) replCommitter() {
	defer close(e.logDone)
	e.journal.RunCommitter()
}

// Rebuilt clears the failure that refused writes after a batch did not
// commit; the cluster layer calls it once the state is the committed log's
// again (after Reset, Restore and ApplyBatch). Every ticket given out
// before it that has not committed yet fails with ErrNotCommitted now,
// whether its batch was pending, being proposed or in flight, so no reply
// waits on a state that is gone; and no batch of that state is proposed
// after it returns. If the engine leads, parked clients are served.
func (e *Engine) Rebuilt() {
	if e.opts.Replicator == nil {
		return
	}
	e.journal.Rebuilt()

	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.repl.following.Load() {
		e.advanceLocked(e.nowMs()) // the pops' records carry its time
		e.serveParked()
		e.armSchedules(true)
		e.armed = 0
		e.poke(0)
	}
}

// ReplFailed reports whether a batch did not commit and the engine, ahead
// of the log, refuses writes until it is rebuilt (Rebuilt).
func (e *Engine) ReplFailed() bool { return e.journal != nil && e.journal.ReplFailed() }

// replWritable refuses a write or a pop on a follower, or while a failed
// batch leaves the state ahead of the log. Two atomic loads: it guards
// every write and every serving of a blocked client.
func (e *Engine) replWritable() error {
	if e.repl.following.Load() || (e.journal != nil && e.journal.ReplFailed()) {
		return ErrNotLeader
	}
	return nil
}
