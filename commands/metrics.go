package commands

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/delayd/delayd/engine"
)

// Numbers for /metrics (package web reads them at scrape time) and for INFO
// commandstats and lateness.

func init() {
	for i, cmd := range table {
		cmd.stat = i
	}
}

// cmdCount is one command's calls and time in its handler, and the calls
// refused before it ran (rejected: arity, ACL, OOM, ... as Redis's
// rejected_calls) or that ran and answered an error (failed). Padded to a
// cache line: connections running different commands on different cores
// must not contend for one line.
type cmdCount struct {
	calls    atomic.Uint64
	ns       atomic.Int64
	rejected atomic.Uint64
	failed   atomic.Uint64
	_        [32]byte
}

// countRejected counts a call of cmd refused before its handler ran.
func (d *Dispatcher) countRejected(cmd *Command) {
	if i := cmd.stat; i < len(d.cnt) && d.cmds[i] == cmd {
		d.cnt[i].rejected.Add(1)
	}
}

// countCommand adds one call of cmd that took took. Two atomic adds.
func (d *Dispatcher) countCommand(cmd *Command, took time.Duration) {
	if i := cmd.stat; i < len(d.cnt) && d.cmds[i] == cmd {
		n := &d.cnt[i]
		n.calls.Add(1)
		n.ns.Add(int64(took))
	}
}

// CommandStat is one command's calls and the time spent in its handler
// since start (a blocking command's wait is not counted, as SLOWLOG).
type CommandStat struct {
	Name  string
	Calls uint64
	Time  time.Duration
}

// CommandStats returns the commands called at least once, in table order.
func (d *Dispatcher) CommandStats() []CommandStat {
	var out []CommandStat
	for i := range d.cnt {
		n := &d.cnt[i]
		if calls := n.calls.Load(); calls > 0 {
			out = append(out, CommandStat{Name: d.cmds[i].Name, Calls: calls, Time: time.Duration(n.ns.Load())})
		}
	}
	return out
}

// Engine returns the engine, or nil while the log loads.
func (d *Dispatcher) Engine() *engine.Engine { return d.eng.Load() }

// commandStatsInfo is INFO commandstats, in Redis's form
// (cmdstat_<name>:calls=..,usec=..,usec_per_call=..), without the
// rejected and failed calls Redis also counts.
func (d *Dispatcher) commandStatsInfo() [][2]string {
	var out [][2]string
	for _, s := range d.CommandStats() {
		usec := s.Time.Microseconds()
		out = append(out, [2]string{"cmdstat_" + s.Name, "calls=" + strconv.FormatUint(s.Calls, 10) +
			",usec=" + strconv.FormatInt(usec, 10) +
			",usec_per_call=" + strconv.FormatFloat(float64(usec)/float64(s.Calls), 'f', 2, 64)})
	}
	return out
}

// latenessInfo is INFO lateness: the lateness histogram's buckets as
// le_<ms>:<count> (cumulative, as Prometheus's), then le_inf, count and
// sum_ms. Zeros while the log loads.
func latenessInfo(eng *engine.Engine) [][2]string {
	var h engine.Histogram
	if eng != nil {
		h = eng.Lateness()
	} else {
		h = engine.EmptyLateness()
	}
	out := make([][2]string, 0, len(h.Bounds)+3)
	for i, b := range h.Bounds {
		out = append(out, [2]string{"le_" + strconv.FormatInt(b.Milliseconds(), 10), strconv.FormatUint(h.Counts[i], 10)})
	}
	return append(out,
		[2]string{"le_inf", strconv.FormatUint(h.Count, 10)},
		[2]string{"count", strconv.FormatUint(h.Count, 10)},
		[2]string{"sum_ms", strconv.FormatInt(h.Sum.Milliseconds(), 10)})
}
