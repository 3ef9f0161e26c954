package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/delayd/delayd/aof"
)

// Opening a log for its owner's replay: finding its segments, reading them
// in order with the start-up's progress (Loading, a log line a second),
// and the repair of a log damaged before its tail. The owner applies each
// record; the journal knows them as bytes.

// Log is a log's segments as found at start.
type Log struct {
	FS   aof.FS
	Path string   // the manifest
	Segs []uint64 // oldest first
	Size int64    // the bytes of every segment
}

// FindLog finds the log named name in dir (fs nil: the operating system's,
// dir made if missing): the manifest's segments, an earlier release's one
// file made the first, what a cut change left removed (aof.OpenSegments).
func FindLog(fs aof.FS, dir, name string) (Log, error) {
	l := Log{FS: fs, Path: filepath.Join(dir, name)}
	if l.FS == nil {
		l.FS = aof.OS
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return l, err
		}
	}
	var err error
	if l.Segs, err = aof.OpenSegments(l.FS, l.Path); err != nil {
		return l, err
	}
	l.Size, err = aof.SegmentsSize(l.FS, l.Path, l.Segs)
	return l, err
}

// Replayed is what Replay read: the last segment's Result (Size is where
// appending goes on), with Records counted over every segment, Path the
// file a torn tail was cut off.
type Replayed struct {
	aof.Result
	Path string
}

// Replay reads segs of the log at path in order: start(id) before a
// segment's records, fn for each with its offset in the segment's file
// (an error stops it, prefixed with the segment's path). It reports its progress to ld (the start-up's; nil for
// a reload), which may abort it (ErrLoadAborted), and logs it once a
// second and at the end, with jobs() the owner's jobs so far.
func Replay(fs aof.FS, path string, segs []uint64, ld *Loading, logger zerolog.Logger, jobs func() int,
	start func(id uint64), fn func(off int64, p []byte) error) (Replayed, error) {
	began := time.Now()
	n := 0
	var out Replayed
	var base, total int64
	if ld != nil {
		total, _ = aof.SegmentsSize(fs, path, segs)
	}
	next := began.Add(time.Second)
	progress := func(off, size int64) error {
		if ld != nil && ld.Report(off, size, int64(n)) {
			return ErrLoadAborted
		}
		if now := time.Now(); now.After(next) {
			next = now.Add(time.Second)
			elapsed := now.Sub(began)
			logger.Info().Int("records", n).Int("jobs", jobs()).
				Float64("percent", float64(int64(float64(off)*1000/float64(size)))/10).
				Int64("bytes", off).Int64("total_bytes", size).
				Int64("records_per_sec", int64(float64(n)/elapsed.Seconds())).
				Dur("elapsed_ms", elapsed).Msg("loading the log")
		}
		return nil
	}
	var err error
	for _, id := range segs {
		p := aof.SegPath(path, id)
		start(id)
		var res aof.Result
		res, err = aof.ReplayAt(fs, p, func(off int64, b []byte) error {
			if err := fn(off, b); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			n++
			return nil
		}, func(off, size int64) error { return progress(base+off, max(total, base+size)) })
		base += res.Size
		out.Result, out.Records = res, n
		if res.TornBytes > 0 {
			out.Path = p
		}
		if err != nil {
			break
		}
	}
	if ld != nil {
		ld.Done(base, int64(n))
	}
	if n > 0 && !errors.Is(err, ErrLoadAborted) {
		logger.Info().Int("records", n).Int("jobs", jobs()).Dur("took_ms", time.Since(began)).
			Int64("bytes", base).Int("segments", len(segs)).Msg("log replayed")
	}
	return out, err
}

// Repair cuts the segment a replay's err found damaged at the damage,
// keeping the rest beside it (aof.Repair), and says whether it did: the
// owner then replays again from an empty state. Any other err is left to
// the caller.
func Repair(fs aof.FS, err error, logger zerolog.Logger) (bool, error) {
	var ce *aof.CorruptError
	if !errors.As(err, &ce) {
		return false, nil
	}
	cut, rerr := aof.Repair(fs, ce.Path)
	if rerr != nil {
		return false, fmt.Errorf("repair %s: %w", ce.Path, rerr)
	}
	logger.Warn().Str("file", ce.Path).Int64("cut_at", cut).Str("kept_in", ce.Path+aof.BrokenSuffix).
		Msg("log repaired: cut at the damage")
	return true, nil
}

// OpenLog opens the log replay read for appending: segs are the log's
// (the last is appended to), r what Replay returned, whose torn tail it
// logs. Called before any write.
func (j *Journal) OpenLog(segs []uint64, r Replayed) error {
	if r.TornBytes > 0 {
		j.opts.Logger.Warn().Str("file", r.Path).Int64("offset", r.Size).Int64("cut_bytes", r.TornBytes).
			Msg("torn last record cut off (a crash during a write)")
	}
	sealed, err := aof.SegmentsSize(j.opts.FS, j.opts.Path, segs[:len(segs)-1])
	if err != nil {
		return err
	}
	j.SetSegments(segs, sealed)
	return j.Open(r.Size)
}
