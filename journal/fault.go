package journal

import (
	"errors"
	"time"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/hist"
)

// What the journal does when the disk fails it:
//
//   - A write(2) that fails (ENOSPC, EDQUOT, EIO on write) is rolled back by
//     aof to the log's last good size, so nothing past what was acknowledged
//     is in the file. The writes in flight are undone and get an error
//     (Undo), writes are refused, and every ProbeEvery the owner's flusher
//     appends a harmless record and fsyncs it (Probe); once both succeed
//     writes resume (Resume).
//   - An fsync that fails, under any policy, stops writes until a restart
//     (Break): the kernel may have dropped the dirty pages and cleared the
//     error, so no later fsync can say what reached the disk.

// ProbeEvery is how often a full disk is probed, as Redis retries a failed
// AOF write once a second.
const ProbeEvery = time.Second

// Undo fails every ticket from first on (the batch whose write failed and
// every one given out after it), drops what is pending, and refuses writes
// with err. The owner calls it from Env.Failed with its lock held, then
// makes its state match the log. A write that aof rolled back (a full
// disk) may be retried; a failed fsync (fsyncErr, or a Writer failed for
// good) may not, as Postgres learned.
func (j *Journal) Undo(first uint64, err error, fsyncErr bool) {
	j.seg.fails.Add(1)
	j.mu.Lock()
	last := j.ticket
	j.pend = j.pend[:0]
	j.broken.Store(&err)
	j.retry = !fsyncErr && !errors.Is(err, aof.ErrWriterFailed)
	if j.rewriting {
		j.aborted = true // its tail holds the writes being undone
	}
	j.mu.Unlock()
	j.dmu.Lock()
	j.failed = append(j.failed, [2]int64{int64(first), int64(last)})
	if len(j.failed) > 64 {
		j.failed = j.failed[1:]
	}
	j.durable = max(j.durable, last)
	j.lastErr = err
	j.dmu.Unlock()
	j.dcond.Broadcast()
}

// Break refuses writes with err for good (a failed fsync, a reload that
// failed). Called by the owner with its lock held.
func (j *Journal) Break(err error) {
	j.mu.Lock()
	j.broken.Store(&err)
	j.retry = false
	if j.rewriting {
		j.aborted = true
	}
	j.mu.Unlock()
}

// Retrying reports whether writes are refused by a failure a probe may end.
func (j *Journal) Retrying() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.Broken() && j.retry
}

// Probe appends rec (a record that changes nothing) and fsyncs it, the
// flusher's step while a full disk refuses writes. It reports whether the
// write and fsync succeeded (the owner then calls Resume under its lock),
// and whether probing should stop (a failure no probe can end).
func (j *Journal) Probe(rec []byte) (ok, stop bool) {
	j.wmu.Lock()
	j.log.Append(rec)
	err := j.log.Flush()
	size := j.seg.sealed.Load() + j.log.Size()
	j.wmu.Unlock()
	fsyncErr := false
	if err == nil {
		err = j.Sync()
		fsyncErr = err != nil
	}
	j.dmu.Lock()
	j.info.Size = size
	if err != nil {
		j.lastErr = err
	}
	j.dmu.Unlock()
	if err == nil {
		return true, false
	}
	j.mu.Lock()
	if fsyncErr || errors.Is(err, aof.ErrWriterFailed) {
		j.broken.Store(&err)
		j.retry = false
	}
	retry := j.retry
	j.mu.Unlock()
	if !retry {
		j.opts.Logger.Error().Err(err).Str("file", j.opts.Path).Msg("append-only log probe failed for good: writes are refused until a restart")
	}
	return false, !retry
}

// Resume accepts writes again after a probe succeeded, unless a failure
// that cannot end (the background fsync) came meanwhile. Called by the
// owner with its lock held.
func (j *Journal) Resume() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.retry {
		return false
	}
	j.broken.Store(nil)
	j.retry = false
	return true
}

// Sync fsyncs the log and logs a slow fsync with its duration. It may run
// on the syncer while the flusher writes (aof.Writer allows Sync to).
func (j *Journal) Sync() error {
	_, err := j.sync(false)
	return err
}

// sync is Sync, with the fsync held on the caller's P if raw
// (aof.Writer.SyncRaw); it reports how long the fsync took.
func (j *Journal) sync(raw bool) (time.Duration, error) {
	// smu is held through the fsync: a rewrite's switch closes the old log
	// under smu, and an fsync of a log closed under it would fail and be
	// taken for a disk error (the new log was fsynced before it was
	// installed). wmu only reads which log is current: the flusher's
	// writes go on during the fsync.
	j.smu.Lock()
	defer j.smu.Unlock()
	j.wmu.Lock()
	l, retired := j.log, j.seg.retired
	j.seg.retired = nil
	j.wmu.Unlock()
	start := time.Now()
	err := j.syncRetired(retired) // segments rolled since the last fsync come first
	if err == nil && raw {
		err = l.SyncRaw()
	} else if err == nil {
		err = l.SyncPolled() // parked in the poller, not holding the server's one P (compaction-stalls.md)
	}
	took := time.Since(start)
	if took > 500*time.Millisecond {
		j.opts.Logger.Warn().Dur("took_ms", took).Str("file", j.opts.Path).Msg("slow fsync")
	}
	j.dmu.Lock()
	j.fsyncs.Observe(hist.FsyncUs[:], took.Microseconds())
	if err == nil {
		j.info.LastFsync, j.info.LastFsyncTook = time.Now(), took
	} else {
		j.lastErr = err
	}
	j.dmu.Unlock()
	if err != nil {
		j.opts.Logger.Error().Err(err).Str("file", j.opts.Path).Msg("fsync failed")
	}
	return took, err
}

// StartSync says whether the flusher's tick should hand an fsync to the
// syncer (everysec): none runs and something was written since the last
// began. An fsync still running covers the writes made before it began;
// the ones made since stay dirty for the next tick. dirty is cleared
// before the fsync begins: a write made meanwhile marks it again.
func (j *Journal) StartSync() bool {
	if j.syncStart.Load() != 0 || !j.dirty.Swap(false) {
		return false
	}
	j.syncStart.Store(time.Now().UnixNano())
	return true
}

// SyncDone ends the background fsync StartSync began.
func (j *Journal) SyncDone() { j.syncStart.Store(0) }

// SyncIfDirty fsyncs what was written since the last fsync (at close).
func (j *Journal) SyncIfDirty() {
	if j.dirty.Load() {
		j.Sync()
	}
}

// noteDelayedFsync counts a write made while the background fsync begun at
// start (Unix ns) has run over 2 s, once per 2 s as Redis does: where Redis
// would stop postponing its write and say the disk is busy.
func (j *Journal) noteDelayedFsync(start int64) {
	now := time.Now()
	if now.Sub(time.Unix(0, start)) < 2*time.Second {
		return
	}
	j.dmu.Lock()
	note := now.Sub(j.info.delayedAt) >= 2*time.Second
	if note {
		j.info.DelayedFsync++
		j.info.delayedAt = now
	}
	j.dmu.Unlock()
	if note {
		j.opts.Logger.Warn().Str("file", j.opts.Path).Dur("fsync_running_ms", now.Sub(time.Unix(0, start))).
			Msg("background fsync is taking too long (disk is busy?): writing without waiting for it")
	}
}
