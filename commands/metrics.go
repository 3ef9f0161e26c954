package commands

import (
	"math"
	"strconv"
	"sync"
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
	if cmd != nil && cmd.stat < len(d.cnt) && d.cmds[cmd.stat] == cmd {
		d.cnt[cmd.stat].rejected.Add(1)
	}
}

// resetStats is CONFIG RESETSTAT: the counters Redis resets (commandstats,
// total_commands_processed, connections received and rejected, error
// replies, ACL denials, the ops samples). The queues' job counters
// (jobs_*) and the lateness histogram are the delay server's own history
// and stay, as Redis keeps its keyspace's.
func (d *Dispatcher) resetStats() {
	for i := range d.cnt {
		n := &d.cnt[i]
		n.calls.Store(0)
		n.ns.Store(0)
		n.rejected.Store(0)
		n.failed.Store(0)
	}
	d.commandsRun.Store(0)
	d.TotalConns.Store(0)
	d.Rejected.Store(0)
	d.errReplies.Store(0)
	for i := range d.aclDenied {
		d.aclDenied[i].Store(0)
	}
	d.ops.mu.Lock()
	d.ops.i, d.ops.k = 0, 0
	d.ops.mu.Unlock()
}

// newErrors adds the error replies c's writer wrote since the last call to
// total_error_replies, and says how many. A plain load: only c's
// goroutine writes and reads them.
func (d *Dispatcher) newErrors(c *Client) uint64 {
	if c.errs == nil {
		return 0
	}
	n := *c.errs - c.errSeen
	if n != 0 {
		c.errSeen = *c.errs
		d.errReplies.Add(n)
	}
	return n
}

// rejected accounts for a call of cmd (nil: unknown) refused before it
// ran: Redis's rejected_calls, and its error reply.
func (d *Dispatcher) rejected(c *Client, cmd *Command) {
	d.countRejected(cmd)
	d.newErrors(c)
}

// ran accounts for a call of cmd whose handler ran: failed_calls if it
// answered an error, as Redis counts a call that replied one. A
// transaction's commands are accounted for one by one as they run, so
// EXEC fails only for an error of its own.
func (d *Dispatcher) ran(c *Client, cmd *Command) {
	if d.newErrors(c) != 0 {
		if i := cmd.stat; i < len(d.cnt) && d.cmds[i] == cmd {
			d.cnt[i].failed.Add(1)
		}
	}
}

// opsSampler is instantaneous_ops_per_sec: the commands run, sampled at
// most every 100 ms by the commands themselves (no timer of its own), and
// the rate over the last 1.6 s of samples, as Redis's 16 samples of its
// 100 ms cron.
type opsSampler struct {
	next atomic.Int64 // monotonic ns of the next sample
	mu   sync.Mutex
	at   [16]time.Duration
	n    [16]int64
	i, k int // the next slot; how many are filled
}

const opsEvery = 100 * time.Millisecond

func (o *opsSampler) sample(now time.Duration, count int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if int64(now) < o.next.Load() {
		return // another connection took this sample
	}
	o.next.Store(int64(now + opsEvery))
	o.at[o.i], o.n[o.i] = now, count
	o.i = (o.i + 1) % len(o.at)
	o.k = min(o.k+1, len(o.at))
}

// rate is the commands a second since the oldest sample of the last 1.6 s,
// or since the newest one if none is that recent (an idle server: about 0).
func (o *opsSampler) rate(now time.Duration, count int64) int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.k == 0 {
		return 0
	}
	from := (o.i - 1 + len(o.at)) % len(o.at) // the newest
	for j := 1; j < o.k; j++ {
		s := (o.i - 1 - j + 2*len(o.at)) % len(o.at)
		if now-o.at[s] > time.Duration(len(o.at))*opsEvery {
			break
		}
		from = s
	}
	el := now - o.at[from]
	if el <= 0 {
		return 0
	}
	return int64(math.Round(float64(count-o.n[from]) / el.Seconds()))
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
// since start (a blocking command's wait is not counted, as SLOWLOG), and
// the calls refused before the handler (Rejected) or that answered an
// error (Failed), as Redis's rejected_calls and failed_calls.
type CommandStat struct {
	Name     string
	Calls    uint64
	Time     time.Duration
	Rejected uint64
	Failed   uint64
}

// CommandStats returns the commands called, rejected or failed at least
// once, in table order.
func (d *Dispatcher) CommandStats() []CommandStat {
	var out []CommandStat
	for i := range d.cnt {
		n := &d.cnt[i]
		s := CommandStat{Name: d.cmds[i].Name, Calls: n.calls.Load(), Time: time.Duration(n.ns.Load()),
			Rejected: n.rejected.Load(), Failed: n.failed.Load()}
		if s.Calls > 0 || s.Rejected > 0 || s.Failed > 0 {
			out = append(out, s)
		}
	}
	return out
}

// Engine returns the engine, or nil while the log loads.
func (d *Dispatcher) Engine() *engine.Engine { return d.eng.Load() }

// commandStatsInfo is INFO commandstats, in Redis's form
// (cmdstat_<name>:calls=..,usec=..,usec_per_call=..,rejected_calls=..,failed_calls=..).
func (d *Dispatcher) commandStatsInfo() [][2]string {
	var out [][2]string
	for _, s := range d.CommandStats() {
		usec := s.Time.Microseconds()
		perCall := 0.0
		if s.Calls > 0 {
			perCall = float64(usec) / float64(s.Calls)
		}
		out = append(out, [2]string{"cmdstat_" + s.Name, "calls=" + strconv.FormatUint(s.Calls, 10) +
			",usec=" + strconv.FormatInt(usec, 10) +
			",usec_per_call=" + strconv.FormatFloat(perCall, 'f', 2, 64) +
			",rejected_calls=" + strconv.FormatUint(s.Rejected, 10) +
			",failed_calls=" + strconv.FormatUint(s.Failed, 10)})
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
