package engine

import (
	"time"

	"github.com/delayd/delayd/hist"
	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/journal"
	"github.com/delayd/delayd/queue"
)

// Numbers for /metrics and INFO lateness. The hot paths only count: a pop
// adds its lateness and an ACK its ack time to fixed buckets under the lock
// they already hold (a few compares and two adds), an fsync its duration
// in the journal. Everything else is read at scrape
// time, O(queues) under the lock, as INFO already is.

// Histogram is a snapshot of a histogram (hist.Histogram).
type Histogram = hist.Histogram

// metrics are the engine's histograms, guarded by Engine.mu.
type metrics struct {
	lateness hist.Counts // first deliveries: hand-out minus due time, ms
	ackTime  hist.Counts // ACK minus hand-out (or the last TOUCH), ms
}

// observeLateness records how late the job in slot s is handed out, on its
// first delivery only: a redelivery's due time is the original one (an
// expiry does not move it), so its lateness would count the ack timeout.
// Called with mu held, from take.
func (e *Engine) observeLateness(j *jobs.Job) {
	if j.Deliveries == 1 {
		e.met.lateness.Observe(hist.LatencyMs[:], e.recNow()-j.Due)
	}
}

// observeAck records the ack time of the reserved job in slot s: now minus
// its hand-out, which is its deadline minus its ack timeout (TOUCH starts
// the deadline again, so after a TOUCH it is the time since the TOUCH).
// Called with mu held, from Ack.
func (e *Engine) observeAck(s uint32, now int64) {
	if dl, ok := e.wheel.Due(s); ok {
		e.met.ackTime.Observe(hist.LatencyMs[:], now-(dl-int64(e.jobs.At(s).AckTimeout)))
	}
}

// Lateness returns the lateness histogram: how long after its due time a
// job was handed out, for every first delivery since start.
func (e *Engine) Lateness() Histogram {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.met.lateness.Snapshot(hist.LatencyMs[:], time.Millisecond)
}

// NamedQueueStats is one queue's row in Metrics.
type NamedQueueStats struct {
	Name string
	QueueStats
}

// Metrics is what /metrics shows of the engine, read in one go.
type Metrics struct {
	// Top are the queues with the most jobs (ties by name), at most the
	// count asked for, the largest first. Queues that hold no job but have
	// clients waiting come last.
	Top []NamedQueueStats
	// Jobs are the jobs of every queue by state (Top's included), and
	// Queues the number of queues holding one (INFO's queues).
	Jobs   QueueStats
	Queues int
	// Stats are the engine's totals since start: a queue's counters go with
	// the queue, these do not.
	Stats
	Waiters           int // blocked clients (INFO blocked_clients)
	Lateness, AckTime Histogram
	// OtherLatency is the largest latency (ms) of the queues not in Top;
	// each of Top has its own in its QueueStats.
	OtherLatency int64
}

// Metrics returns the top n queues by jobs with their counts, and the
// engine's totals and histograms. O(queues + queues log n) under the lock.
func (e *Engine) Metrics(n int) Metrics {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := Metrics{Stats: e.stats, Waiters: e.stats.WaitersNow}
	m.Lateness = e.met.lateness.Snapshot(hist.LatencyMs[:], time.Millisecond)
	m.AckTime = e.met.ackTime.Snapshot(hist.LatencyMs[:], time.Millisecond)
	qs := e.liveQueues()
	top, t := queue.Top(qs, n)
	m.Jobs.Delayed, m.Jobs.Ready, m.Jobs.Reserved, m.Queues = t.Delayed, t.Ready, t.Reserved, t.Queues
	now := e.nowMs()
	m.Top = make([]NamedQueueStats, len(top))
	for i, q := range top {
		m.Top[i] = NamedQueueStats{Name: q.Name, QueueStats: q.Q.Stats(&e.jobs.Slab, now)}
		m.Top[i].Paused = e.pausedLocked([]byte(q.Name))
	}
	m.OtherLatency = queue.MostLatent(qs, top, &e.jobs.Slab, now)
	return m
}

// liveQueues lists the live queues with their names. Called with mu held.
func (e *Engine) liveQueues() []queue.Named {
	qs := make([]queue.Named, 0, len(e.queues))
	for i := range e.queues {
		if q := &e.queues[i]; q.live {
			qs = append(qs, queue.Named{Name: q.name, Q: &q.Queue})
		}
	}
	return qs
}

// LogMetrics is what /metrics shows of the append-only log.
type LogMetrics = journal.Metrics

// LogMetrics returns the log's size, rewrites, fsync durations and
// segments (none: no log file, in cluster mode or with appendonly no).
func (e *Engine) LogMetrics() LogMetrics {
	if e.j.path == "" {
		return LogMetrics{}
	}
	return e.journal.Metrics(e.liveBytes())
}

// EmptyLateness is the lateness histogram with nothing in it (INFO
// lateness while the log loads).
func EmptyLateness() Histogram {
	var c hist.Counts
	return c.Snapshot(hist.LatencyMs[:], time.Millisecond)
}

// QueueLatency is a queue's latency, in ms, with its ready jobs.
type QueueLatency = queue.Latent

// Latencies returns the n queues with the oldest ready jobs, the oldest
// first (ties by name), and the largest latency of all queues, in ms.
// Queues with no ready job are left out. O(Q log Q) in the queues with a
// ready job, plus the lanes of queues with priorities or groups.
func (e *Engine) Latencies(n int) (top []QueueLatency, most int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return queue.ByLatency(e.liveQueues(), &e.jobs.Slab, e.nowMs(), n)
}
