package engine

import (
	"io"
	"time"

	"github.com/delayd/delayd/record"
)

// A cluster's snapshot streamed (docs/decisions/raft-snapshots.md): the
// state is encoded under one hold of the lock at an instant the caller can
// name a Raft index for, straight into a writer in pieces of a MiB (no
// copy of the whole state in memory), and the lock is let go at once. The
// records the group commits after that index, read after it, make it the
// state at any later index: the caller labels the snapshot with the last
// of them, so Raft need not catch the engine at a settled instant.

// captureFlush is how much encoded state a capture keeps before handing
// it to its writer.
var captureFlush = 1 << 20 // a variable for its tests

// CaptureTo writes the state (Snapshot's records, without the end mark)
// to w at an instant when it is the committed state: a leader (lead)
// first waits (Quiesce, at most timeout) until every batch it made has
// committed; a follower's caller must keep committed batches from being
// applied during the call. mark runs under the lock at that instant,
// before anything is written: the caller reads there the index the state
// is exact at, or says no (false). ok is false when it gave up (timeout,
// mark, or the engine's role not lead's). w is written under the lock:
// give it a buffered file, not a socket. O(jobs) under the lock; the
// generation it returns is Generation's at the capture.
func (e *Engine) CaptureTo(lead bool, timeout time.Duration, w io.Writer, mark func() bool) (gen uint64, ok bool, err error) {
	capture := func() {
		if !mark() {
			return
		}
		ok, gen = true, e.repl.gen.Load()
		err = e.writeSnapshot(w)
	}
	if lead {
		e.quiesce(timeout, capture)
		return gen, ok, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.repl.following.Load() {
		capture()
	}
	return gen, ok, err
}

// Generation counts the times the state was replaced (Reset, before a
// Restore or a rebuild): the records committed after a capture follow it
// only while it has not changed.
func (e *Engine) Generation() uint64 { return e.repl.gen.Load() }

// writeSnapshot writes what appendSnapshot appends, but the end mark, to
// w in pieces of captureFlush. Called with mu held.
func (e *Engine) writeSnapshot(w io.Writer) error {
	now := e.nowMs() // just Reset: no job
	if e.wheel != nil {
		now = e.wheel.Now()
	}
	out := make([]byte, 0, captureFlush+64<<10)
	var buf []byte
	var err error
	put := func(r *record.Rec) {
		buf = r.Encode(buf[:0])
		out = record.AppendSnap(out, buf)
		if len(out) >= captureFlush && err == nil {
			_, err = w.Write(out)
			out = out[:0]
		}
	}
	e.snapshotRecs(now, put)
	if err == nil {
		_, err = w.Write(out)
	}
	return err
}
