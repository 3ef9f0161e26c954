package engine

import (
	"time"

	"github.com/delayd/delayd/journal"
)

// ErrLoadAborted is what New returns when Loading.Abort gave up its replay.
var ErrLoadAborted = journal.ErrLoadAborted

// Loading follows New's replay of the log from other goroutines, and can
// stop it (journal.Loading). Pass it in Options.Loading.
type Loading = journal.Loading

// replayProgress is the start-up replay's aof.Progress: it publishes the
// progress to l (if not nil), logs it every second, and stops the replay
// once l is aborted. records counts the records applied so far.
func (e *Engine) replayProgress(l *Loading, records *int, start time.Time) func(off, size int64) error {
	next := start.Add(time.Second)
	return func(off, size int64) error {
		if l != nil && l.Report(off, size, int64(*records)) {
			return ErrLoadAborted
		}
		if now := time.Now(); now.After(next) {
			next = now.Add(time.Second)
			elapsed := now.Sub(start)
			e.opts.Logger.Info().Int("records", *records).Int("jobs", e.njobs).
				Float64("percent", float64(int64(float64(off)*1000/float64(size)))/10).
				Int64("bytes", off).Int64("total_bytes", size).
				Int64("records_per_sec", int64(float64(*records)/elapsed.Seconds())).
				Dur("elapsed_ms", elapsed).Msg("loading the log")
		}
		return nil
	}
}
