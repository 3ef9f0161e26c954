package journal

import (
	"errors"
	"strconv"
	"sync/atomic"
	"time"
)

// ErrLoadAborted is what a start-up replay returns once Loading.Abort gave
// it up.
var ErrLoadAborted = errors.New("loading the log was stopped")

// Loading follows the start-up replay of the log from other goroutines:
// main serves INFO from it while the engine is not there yet, and stops
// the replay through it on SIGTERM. Its zero value is ready to use. Only
// the start-up replay reports here, not a reload after a disk error.
//
// The replay stores its progress about once per MiB of log
// (aof.ReplayProgress), so watching costs the replay nothing per record.
type Loading struct {
	start   atomic.Int64 // unix ns the replay began, 0 before
	total   atomic.Int64 // log bytes
	loaded  atomic.Int64 // log bytes replayed
	records atomic.Int64 // records replayed
	abort   atomic.Bool
}

// Begin notes that the replay of a log of total bytes (0: not known yet)
// begins now.
func (l *Loading) Begin(total int64) {
	l.start.Store(time.Now().UnixNano())
	l.total.Store(total)
}

// Report stores the replay's progress and says whether it must stop
// (ErrLoadAborted).
func (l *Loading) Report(loaded, total, records int64) (abort bool) {
	l.total.Store(total)
	l.Done(loaded, records)
	return l.abort.Load()
}

// Done stores where the replay ended.
func (l *Loading) Done(loaded, records int64) {
	l.loaded.Store(loaded)
	l.records.Store(records)
}

// Abort makes the replay give up: it returns ErrLoadAborted within about a
// MiB of log. The log is left as it was (a torn tail is cut only after a
// whole replay). Safe from any goroutine, before or during the replay.
func (l *Loading) Abort() { l.abort.Store(true) }

// Progress returns the bytes and records replayed so far and the log's size.
func (l *Loading) Progress() (loaded, total, records int64) {
	return l.loaded.Load(), l.total.Load(), l.records.Load()
}

// Persistence returns the INFO persistence fields while the log is loading,
// under Redis's names (plus loading_loaded_records): once the engine is
// there its Persistence takes over. The ETA assumes the rate so far.
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
