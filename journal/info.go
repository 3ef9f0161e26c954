package journal

import (
	"strconv"
	"time"
)

// Info is what INFO persistence and /metrics show of the journal.
type Info struct {
	Size          int64 // the log's size after the last write
	BaseSize      int64 // after the last rewrite (or at start)
	Rewriting     bool
	Broken        error // refusing writes
	LastErr       error
	LastFsync     time.Time
	LastFsyncTook time.Duration
	DelayedFsync  uint64 // writes made while a background fsync had run over 2 s
	LastRewrite   time.Time
	RewriteTook   time.Duration
	RewriteErr    error
	Rewrites      uint64 // finished since start
	delayedAt     time.Time
}

// Info returns a copy of the journal's figures.
func (j *Journal) Info() Info {
	j.mu.Lock()
	rewriting := j.rewriting
	j.mu.Unlock()
	j.dmu.Lock()
	in := j.info
	in.LastErr = j.lastErr
	j.dmu.Unlock()
	in.Rewriting, in.Broken = rewriting, j.Err()
	return in
}

// Persistence returns the INFO persistence fields of a log file, under
// Redis's names; replayed is the records the start-up replay applied.
func (j *Journal) Persistence(replayed int) [][2]string {
	in := j.Info()
	b := func(v bool) string {
		if v {
			return "1"
		}
		return "0"
	}
	status := func(err error) string {
		if err != nil {
			return "err"
		}
		return "ok"
	}
	lastFsync := "0"
	if !in.LastFsync.IsZero() {
		lastFsync = strconv.FormatInt(in.LastFsync.Unix(), 10)
	}
	errText := ""
	if in.LastErr != nil {
		errText = in.LastErr.Error()
	}
	return [][2]string{
		{"loading", "0"},
		{"async_loading", "0"},
		{"aof_enabled", "1"},
		{"aof_filename", j.opts.Path},
		{"aof_fsync", j.opts.Fsync},
		{"aof_current_size", strconv.FormatInt(in.Size, 10)},
		{"aof_base_size", strconv.FormatInt(in.BaseSize, 10)},
		{"aof_replayed_records", strconv.Itoa(replayed)},
		{"aof_rewrite_in_progress", b(in.Rewriting)},
		{"aof_last_rewrite_time_sec", strconv.FormatInt(int64(in.RewriteTook.Seconds()), 10)},
		{"aof_last_bgrewrite_status", status(in.RewriteErr)},
		{"aof_last_fsync_unix", lastFsync},
		{"aof_last_fsync_us", strconv.FormatInt(in.LastFsyncTook.Microseconds(), 10)},
		{"aof_delayed_fsync", strconv.FormatUint(in.DelayedFsync, 10)},
		{"aof_last_write_status", status(in.Broken)},
		{"aof_last_error", errText},
	}
}
