package journal

import (
	"strconv"
	"time"

	"github.com/delayd/delayd/hist"
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

// Metrics is what /metrics shows of a log file.
type Metrics struct {
	On       bool // there is a log file (not in cluster mode, not with appendonly no)
	Size     int64
	Rewrites uint64 // rewrites finished since start
	Fsync    hist.Histogram
	// A segmented log: its segments, the live jobs' bytes in it (an
	// estimate), and the segments compacted since start.
	Segments    int
	LiveBytes   int64
	Compactions uint64
}

// Metrics returns the log's figures; live is the live bytes of its
// segments (Live.Of).
func (j *Journal) Metrics(live int64) Metrics {
	in := j.Info()
	return Metrics{On: true, Size: in.Size, Rewrites: in.Rewrites, Fsync: j.Fsyncs(),
		Segments: len(j.Segments()), LiveBytes: live, Compactions: j.comp.done.Load()}
}

// Fsyncs returns the histogram of the fsyncs' durations since start.
func (j *Journal) Fsyncs() hist.Histogram {
	j.dmu.Lock()
	defer j.dmu.Unlock()
	return j.fsyncs.Snapshot(hist.FsyncUs[:], time.Microsecond)
}

// Persistence returns the INFO persistence fields of a log file, under
// Redis's names, and a segmented log's own; replayed is the records the
// start-up replay applied, live the live bytes of the segments (Live.Of).
func (j *Journal) Persistence(replayed int, live int64) [][2]string {
	in := j.Info()
	ci := j.CompactionInfo()
	in.Rewriting = in.Rewriting || ci.Running // a compaction is the automatic rewrite of a segmented log
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
	p := [][2]string{
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
	if j.seg.active.Load() == 0 {
		return p
	}
	si := j.SegmentInfo()
	itoa := func(n int64) string { return strconv.FormatInt(n, 10) }
	return append(p,
		[2]string{"aof_segments", strconv.Itoa(si.Count)},
		[2]string{"aof_segments_sealed_bytes", itoa(si.Sealed)},
		[2]string{"aof_segment_size", itoa(j.opts.SegmentSize)},
		[2]string{"aof_live_bytes", itoa(live)},
		[2]string{"aof_segment_rolls", strconv.FormatUint(si.Rolls, 10)},
		[2]string{"aof_compactions", strconv.FormatUint(ci.Done, 10)},
		[2]string{"aof_compacted_bytes", itoa(ci.Copied)},
		[2]string{"aof_compaction_in_progress", b(ci.Running)},
		[2]string{"aof_last_compaction_failures", strconv.FormatUint(ci.Failed, 10)},
		[2]string{"aof_compaction_max_hold_us", itoa(ci.MaxHold.Microseconds())},
	)
}
