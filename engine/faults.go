package engine

import (
	"errors"

	"github.com/delayd/delayd/record"
)

// What happens when the disk fails the journal (the journal package's
// fault.go, docs/decisions/journal-leaf.md): a write that fails is undone
// and writes are refused; the flusher probes a full disk every
// journal.ProbeEvery and writes resume once a probe succeeds; a failed
// fsync stops writes until a restart. Reads, pops and blocked clients are
// served meanwhile; pops are not logged while writes are refused, so after
// a restart such a job is delivered again rather than lost.

// probeLog appends a record that changes nothing (the id counters as they
// are) and fsyncs it. It reports whether writes are accepted again; a
// failure that cannot be retried ends the probing. Called by the flusher.
func (e *Engine) probeLog() bool {
	jn := e.journal
	e.mu.Lock()
	if !jn.Retrying() {
		e.mu.Unlock()
		return true // nothing to probe, or nothing a probe could fix
	}
	r := record.Rec{Op: record.Meta, Time: e.nowMs(), SID: e.lastSID, Seq: e.seq}
	b := r.Encode(nil)
	e.mu.Unlock()

	if ok, stop := jn.Probe(b); !ok {
		return stop
	}
	e.mu.Lock()
	if !jn.Resume() {
		// The background fsync (everysec) failed while the probe ran: that
		// failure stands.
		e.mu.Unlock()
		return true
	}
	// Firings that came due while writes were refused were dropped; make
	// them now, every one, whatever the MISFIRE policy (as after a reload).
	e.armSchedules(true)
	e.mu.Unlock()
	e.opts.Logger.Warn().Str("file", e.j.path).Msg("append-only log writable again: writes resumed")
	// Pops served while writes were refused were not logged: a rewrite
	// writes the live set out so a restart does not deliver them again. If
	// it fails (the disk is still nearly full) they are delivered again,
	// never lost.
	if err := e.Rewrite(); err != nil && !errors.Is(err, ErrRewriteRunning) {
		e.opts.Logger.Warn().Err(err).Msg("log rewrite after writes resumed not started")
	}
	return true
}

// fsyncFailed stops writes for good after a background fsync (appendfsync
// everysec, on the syncer) failed: the writes it covered were acknowledged
// and may be lost, and the server must not go on acknowledging as if they
// were not. A batch the flusher writes meanwhile fails too: the Writer's
// fsync failure is sticky, so its write is undone and gets the error.
func (e *Engine) fsyncFailed(err error) {
	e.mu.Lock()
	e.journal.Break(err)
	e.mu.Unlock()
	e.opts.Logger.Error().Err(err).Str("file", e.j.path).Msg("background fsync failed: writes are refused until a restart")
}
