package engine

import (
	"errors"
	"time"

	"github.com/delayd/delayd/aof"
)

// What the journal does when the disk fails it (docs/decisions/faults.md):
//
//   - A write(2) that fails (ENOSPC, EDQUOT, EIO on write) is rolled back by
//     aof to the log's last good size, so nothing past what was acknowledged
//     is in the file. The writes in flight are undone and get an error,
//     writes are refused, and every probeEvery the flusher appends a
//     harmless record and fsyncs it; once both succeed writes resume.
//   - An fsync that fails, under any policy, stops writes until a restart:
//     the kernel may have dropped the dirty pages and cleared the error, so
//     no later fsync can say what reached the disk.
//
// Reads, pops and blocked clients are served meanwhile; pops are not
// logged while writes are refused, so after a restart such a job is
// delivered again rather than lost.

// probeEvery is how often a full disk is probed, as Redis retries a failed
// AOF write once a second.
const probeEvery = time.Second

// probeLog appends a record that changes nothing (the id counters as they
// are) and fsyncs it. It reports whether writes are accepted again; a
// failure that cannot be retried ends the probing. Called by the flusher.
func (e *Engine) probeLog() bool {
	j := &e.j
	e.mu.Lock()
	if j.broken == nil || !j.retry {
		e.mu.Unlock()
		return true // nothing to probe, or nothing a probe could fix
	}
	r := rec{op: opMeta, time: e.nowMs(), sid: e.lastSID, seq: e.seq}
	b := r.encode(nil)
	e.mu.Unlock()

	j.wmu.Lock()
	j.log.Append(b)
	err := j.log.Flush()
	size := j.log.Size()
	j.wmu.Unlock()
	fsyncErr := false
	if err == nil {
		err = e.syncLog()
		fsyncErr = err != nil
	}
	j.dmu.Lock()
	j.size = size
	if err != nil {
		j.lastErr = err
	}
	j.dmu.Unlock()

	e.mu.Lock()
	if err != nil {
		if fsyncErr || errors.Is(err, aof.ErrWriterFailed) {
			j.broken, j.retry = err, false
		}
		retry := j.retry
		e.mu.Unlock()
		if !retry {
			e.opts.Logger.Error().Err(err).Str("file", j.path).Msg("append-only log probe failed for good: writes are refused until a restart")
		}
		return !retry
	}
	if !j.retry {
		// The background fsync (everysec) failed while the probe ran: that
		// failure stands.
		e.mu.Unlock()
		return true
	}
	j.broken, j.retry = nil, false
	// Firings that came due while writes were refused were dropped; make
	// them now, every one, whatever the MISFIRE policy (as after a reload).
	e.armSchedules(true)
	e.mu.Unlock()
	e.opts.Logger.Warn().Str("file", j.path).Msg("append-only log writable again: writes resumed")
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
	j := &e.j
	e.mu.Lock()
	j.broken, j.retry = err, false
	if j.rewriting {
		j.aborted = true
	}
	e.mu.Unlock()
	e.opts.Logger.Error().Err(err).Str("file", j.path).Msg("background fsync failed: writes are refused until a restart")
}
