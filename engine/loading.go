package engine

import (
	"errors"
	"strconv"
	"sync/atomic"
	"time"
)

// ErrLoadAborted is what New returns when Loading.Abort gave up its replay.
var ErrLoadAborted = errors.New("loading the log was stopped")

// Loading follows New's replay of the log from other goroutines: main serves
// INFO from it while New runs in the background (the engine is not there
// yet), and stops the replay through it on SIGTERM. Pass it in
// Options.Loading; its zero value is ready to use. Only the start-up replay
// reports here, not a reload after a disk error.
//
// New stores its progress about once per MiB of log (aof.ReplayProgress),
// so watching costs the replay nothing per record.
type Loading struct {
	start   atomic.Int64 // unix ns the replay began, 0 before
	total   atomic.Int64 // log bytes
	loaded  atomic.Int64 // log bytes replayed
	records atomic.Int64 // records replayed
	abort   atomic.Bool
}

// Abort makes New give up replaying: it returns ErrLoadAborted within about
// a MiB of log. The log is left as it was (a torn tail is cut only after a
// whole replay). Safe from any goroutine, before or during New.
func (l *Loading) Abort() { l.abort.Store(true) }

// Progress returns the bytes and records replayed so far and the log's size.
func (l *Loading) Progress() (loaded, total, records int64) {
	return l.loaded.Load(), l.total.Load(), l.records.Load()
}

// Persistence returns the INFO persistence fields while the log is loading,
// under Redis's names (plus loading_loaded_records): once New has returned
// the engine's Persistence takes over. The ETA assumes the rate so far.
func (l *Loading) Persistence() [][2]string {
	loaded, total, records := l.Progress()
	start := l.start.Load()
	if start == 0 {
		start = time.Now().UnixNano()
	}
	perc := 0.0
	if total > 0 {
		perc = float64(loaded) * 100 / float64(total)
	}
	eta := int64(1) // as Redis says before it can tell
	if elapsed := time.Now().UnixNano() - start; loaded >= total && total > 0 {
		eta = 0
	} else if records > 0 && elapsed > 0 {
		eta = int64(float64(elapsed) / 1e9 * float64(total-loaded) / float64(loaded))
	}
	itoa := func(n int64) string { return strconv.FormatInt(n, 10) }
	return [][2]string{
		{"loading", "1"},
		{"async_loading", "0"},
		{"aof_enabled", "1"},
		{"loading_start_time", itoa(start / 1e9)},
		{"loading_total_bytes", itoa(total)},
		{"loading_loaded_bytes", itoa(loaded)},
		{"loading_loaded_perc", strconv.FormatFloat(perc, 'f', 2, 64)},
		{"loading_eta_seconds", itoa(eta)},
		{"loading_loaded_records", itoa(records)},
	}
}

// replayProgress is the start-up replay's aof.Progress: it publishes the
// progress to l (if not nil), logs it every second, and stops the replay
// once l is aborted. records counts the records applied so far.
func (e *Engine) replayProgress(l *Loading, records *int, start time.Time) func(off, size int64) error {
	next := start.Add(time.Second)
	return func(off, size int64) error {
		if l != nil {
			l.total.Store(size)
			l.loaded.Store(off)
			l.records.Store(int64(*records))
			if l.abort.Load() {
				return ErrLoadAborted
			}
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
