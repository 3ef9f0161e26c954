package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/delayd/delayd/bucket"
)

// A backup's capture (docs/decisions/backup.md): the snapshot a Raft
// snapshot or a restore uses, taken at a point a client can name. The copy
// under the lock is the only pause writes see; the caller frames, writes
// and sends it after the lock is released.

// Capture is the state captured for a backup.
type Capture struct {
	// Data is prefix zero bytes (room for the caller's header) followed by
	// the snapshot (Snapshot's stream, end mark included).
	Data []byte
	// Index is, on a cluster's leader, the Raft index the state is exact
	// at: it holds every write committed up to it and nothing after.
	Index uint64
	// Held is how long the lock was held: how long writes waited.
	Held time.Duration
}

// ErrBackupBusy is a leader's backup given up: no moment came within the
// timeout when every write applied had committed.
var ErrBackupBusy = errors.New("the leader found no settled moment for the backup in time (writes in flight); try again")

// Backup captures the state on a single node. The capture is exact at the
// moment it takes the lock: every write applied before it is in, none after
// (every write acknowledged before the command arrived was applied before
// it). It then waits until the log holds the records applied before the
// capture, so a backup never holds a write that a failed log write would
// undo. O(jobs) under the lock: writes wait for the encoding.
func (e *Engine) Backup(prefix int) (Capture, error) {
	if e.mu.held {
		return Capture{}, ErrInTransaction
	}
	if e.opts.Replicator != nil {
		return Capture{}, errors.New("engine: a cluster node's backup is taken on the leader (BackupLeader)")
	}
	buf := e.captureBuf(prefix)
	if e.far.set != nil {
		e.far.work.Lock() // until the far jobs are read (far.go)
		defer e.far.work.Unlock()
	}
	e.mu.Lock()
	start := time.Now()
	c := Capture{Data: e.appendSnapshot(buf)}
	var cp *bucket.Checkpoint
	var cpAt uint64
	now := e.nowMs()
	if e.far.set != nil {
		cp, cpAt = e.captureFar(now)
	}
	ticket := e.journal.Ticket()
	c.Held = time.Since(start)
	e.mu.Unlock()
	if err := e.WaitDurable(ticket); err != nil {
		return Capture{}, fmt.Errorf("the log did not take the writes before the backup: %w", err)
	}
	if cp != nil {
		ft := e.pauseTimer() // the far jobs are read and copied without the lock, paced (farPacer)
		if ft != nil {
			defer ft.Close()
		}
		var err error
		if c.Data, err = e.appendFar(c.Data, cp, cpAt, now, ft); err != nil {
			return Capture{}, fmt.Errorf("the far-future jobs: %w", err)
		}
	}
	return c, nil
}

// BackupLeader captures the state on a cluster's leader at a moment when
// every write it applied has committed (Quiesce), so the capture is exact
// at a Raft index: at, called then under the lock, returns it (or an error
// to give up). Every write acknowledged before the call is in; nothing
// proposed after it. Writes wait for one commit round plus the encoding.
func (e *Engine) BackupLeader(prefix int, timeout time.Duration, at func() (uint64, error)) (Capture, error) {
	if e.opts.Replicator == nil {
		return Capture{}, errors.New("engine: BackupLeader needs a cluster node (Backup)")
	}
	var c Capture
	var err error
	var start time.Time
	buf := e.captureBuf(prefix)
	held := e.quiesce(timeout, func() {
		start = time.Now()
		if c.Index, err = at(); err != nil {
			return
		}
		c.Data = e.appendSnapshot(buf)
		c.Held = time.Since(start)
	})
	if err == nil && !held {
		if e.Following() {
			err = ErrNotLeader
		} else {
			err = ErrBackupBusy
		}
	}
	if err != nil {
		return Capture{}, err
	}
	return c, nil
}

// captureBuf returns the buffer a capture appends to: prefix zero bytes,
// and room for a snapshot of the jobs there are now (64 bytes a job, more
// than most take), its pages touched here, outside the lock: the first
// write to fresh memory is a page fault, and a capture under the lock would
// otherwise take one every 4 KiB while writes wait.
func (e *Engine) captureBuf(prefix int) []byte {
	e.mu.Lock()
	n := e.njobs
	e.mu.Unlock()
	b := make([]byte, prefix, prefix+min(n*64+4096, 1<<30))
	room := b[:cap(b)]
	for i := 0; i < len(room); i += 4096 {
		room[i] = 0
	}
	return b
}
