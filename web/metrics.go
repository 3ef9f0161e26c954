package web

import (
	"runtime"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/delayd/delayd/engine"
)

// /metrics: one collector reads the engine's and the dispatcher's counters
// at scrape time (engine.Metrics, Dispatcher.CommandStats), so the hot
// paths only count; plus client_golang's Go and process collectors.
//
// Per-queue series are capped: the MaxQueues queues with the most jobs
// (ties by name) get their own queue label, every other queue is summed as
// queue="_other". A queue's counters (DELAY.STATS's) live only while the
// queue holds a job; _other's are the engine's totals minus the labelled
// queues', so the queue label always sums to the unlabelled delayd_jobs_*
// totals, which never go down.

// OtherQueue is the queue label of every queue without its own.
const OtherQueue = "_other"

// metricsRoutes registers /metrics.
func (s *Server) metricsRoutes() {
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(s.registry(), promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError, // a bad series must not hide the rest
	}))
}

// registry holds what /metrics shows: delayd's collector, and Go's and the
// process's (client_golang's own).
func (s *Server) registry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newCollector(s),
	)
	return reg
}

// queueCounters are the per-queue counters, as DELAY.STATS names them, and
// the unlabelled totals' names.
var queueCounters = []struct {
	name, help string
	queue      func(*engine.QueueStats) uint64
	total      func(*engine.Stats) uint64
}{
	{"added", "Jobs added", func(q *engine.QueueStats) uint64 { return q.Added }, func(s *engine.Stats) uint64 { return s.Added }},
	{"delivered", "Jobs handed out, first deliveries and redeliveries", func(q *engine.QueueStats) uint64 { return q.Deliveries }, func(s *engine.Stats) uint64 { return s.Delivered }},
	{"redelivered", "Jobs handed out again after a NACK or an expired reservation", func(q *engine.QueueStats) uint64 { return q.Redeliveries }, func(s *engine.Stats) uint64 { return s.Redelivered }},
	{"acked", "Reserved jobs acknowledged (DELAY.ACK)", func(q *engine.QueueStats) uint64 { return q.Acks }, func(s *engine.Stats) uint64 { return s.Acked }},
	{"nacked", "Reserved jobs handed back (DELAY.NACK)", func(q *engine.QueueStats) uint64 { return q.Nacks }, func(s *engine.Stats) uint64 { return s.Nacked }},
	{"expired", "Reservations whose ack timeout passed", func(q *engine.QueueStats) uint64 { return q.Expired }, func(s *engine.Stats) uint64 { return s.Expired }},
	{"dead_lettered", "Jobs moved to their dead-letter queue, out of redeliveries (counted on the queue they left)", func(q *engine.QueueStats) uint64 { return q.DeadLettered }, func(s *engine.Stats) uint64 { return s.DeadLettered }},
}

// totalsOnly are totals with no per-queue counter.
var totalsOnly = []struct {
	name, help string
	total      func(*engine.Stats) uint64
}{
	{"dropped", "Jobs dropped: out of redeliveries with no dead-letter queue", func(s *engine.Stats) uint64 { return s.Dropped }},
	{"cancelled", "Jobs cancelled (DELAY.CANCEL)", func(s *engine.Stats) uint64 { return s.Cancelled }},
	{"fired", "Delayed jobs that became ready", func(s *engine.Stats) uint64 { return s.Fired }},
	{"requeued", "Deliveries taken back because the client left before the reply", func(s *engine.Stats) uint64 { return s.Requeued }},
}

type collector struct {
	s         *Server
	maxQueues int

	buildInfo, connected, blocked, queues, paused, jobs *prometheus.Desc
	latency                                             *prometheus.Desc
	queueTotal, total, totalOnly                        []*prometheus.Desc
	lateness, ackTime                                   *prometheus.Desc
	fsync, logSize, rewrites, commands, commandTime     *prometheus.Desc
	logSegments, logLive, compactions                   *prometheus.Desc
	diskJobs, diskBytes, diskReads                      *prometheus.Desc
	farJobs, farMemory, farDisk                         *prometheus.Desc
}

func newCollector(s *Server) *collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("delayd_"+name, help, labels, nil)
	}
	c := &collector{
		s:         s,
		maxQueues: max(s.opts.MaxQueues, 0),
		buildInfo: d("build_info", "Always 1: the delayd version and the Go version it was built with", "version", "goversion"),
		connected: d("connected_clients", "RESP client connections (INFO connected_clients)"),
		blocked:   d("blocked_clients", "Clients blocked in a pop (INFO blocked_clients)"),
		queues:    d("queues", "Queues holding at least one job (INFO queues)"),
		paused:    d("queue_paused", "1 while DELAY.PAUSE holds the queue (DELAY.STATS paused), for the queues with their own label", "queue"),
		jobs: d("queue_jobs", "Jobs by queue and state (delayed, ready, reserved); queue=\"_other\" sums the queues past --metrics-max-queues",
			"queue", "state"),
		latency: d("queue_latency_seconds", "How long the queue's oldest ready job has waited since its due time, 0 with none (DELAY.STATS latency), the figure to scale workers on;"+
			" queue=\"_other\" is the largest of the queues past --metrics-max-queues", "queue"),
		lateness:    d("job_lateness_seconds", "How late jobs were handed out: hand-out time minus due time, first deliveries only"),
		ackTime:     d("job_ack_duration_seconds", "Time from hand-out (or the last DELAY.TOUCH) to DELAY.ACK"),
		fsync:       d("log_fsync_duration_seconds", "Duration of the append-only log's fsyncs"),
		logSize:     d("log_size_bytes", "Size of the append-only log"),
		rewrites:    d("log_rewrites_total", "Log rewrites finished since start"),
		logSegments: d("log_segments", "Segments the append-only log is made of"),
		logLive:     d("log_live_bytes", "Bytes of the log the live jobs take (an estimate: what compaction would keep)"),
		compactions: d("log_compactions_total", "Log segments compacted since start"),
		diskJobs:    d("payloads_on_disk", "Jobs due beyond --horizon whose payload is kept in the log, not in memory (INFO payloads_on_disk)"),
		diskBytes:   d("payloads_on_disk_bytes", "Their payloads' bytes (INFO payloads_on_disk_bytes)"),
		diskReads:   d("payload_disk_reads_total", "Payloads read back from the log since start (INFO payload_disk_reads)"),
		farJobs:     d("far_jobs", "Jobs due beyond --horizon kept out of memory in the far-future buckets (INFO far_jobs)"),
		farMemory:   d("far_memory_bytes", "Memory the far-future buckets hold: their index and the buckets not yet written (INFO far_memory_bytes)"),
		farDisk:     d("far_disk_bytes", "The far-future buckets' runs on disk (INFO far_disk_bytes)"),
		commands:    d("commands_total", "Commands run, by command (INFO commandstats calls)", "command"),
		commandTime: d("commands_duration_seconds_total",
			"Time spent in command handlers, by command (INFO commandstats usec; a blocking pop's wait is not counted)", "command"),
	}
	for _, q := range queueCounters {
		c.queueTotal = append(c.queueTotal, d("queue_"+q.name+"_total",
			q.help+", by queue (DELAY.STATS; a queue's counters restart when it empties and comes back)", "queue"))
		c.total = append(c.total, d("jobs_"+q.name+"_total", q.help+" (INFO jobs_"+q.name+")"))
	}
	for _, q := range totalsOnly {
		c.totalOnly = append(c.totalOnly, d("jobs_"+q.name+"_total", q.help+" (INFO jobs_"+q.name+")"))
	}
	return c
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.buildInfo, c.connected, c.blocked, c.queues, c.paused, c.jobs, c.latency, c.lateness,
		c.ackTime, c.fsync, c.logSize, c.rewrites, c.commands, c.commandTime, c.logSegments, c.logLive, c.compactions,
		c.diskJobs, c.diskBytes, c.diskReads, c.farJobs, c.farMemory, c.farDisk} {
		ch <- d
	}
	for _, ds := range [][]*prometheus.Desc{c.queueTotal, c.total, c.totalOnly} {
		for _, d := range ds {
			ch <- d
		}
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	disp := c.s.opts.Dispatcher
	gauge(c.buildInfo, 1, c.s.opts.Version, runtime.Version())
	gauge(c.connected, float64(disp.Connected.Load()))
	for _, cs := range disp.CommandStats() {
		counter(c.commands, float64(cs.Calls), cs.Name)
		counter(c.commandTime, cs.Time.Seconds(), cs.Name)
	}
	eng := disp.Engine()
	if eng == nil {
		gauge(c.blocked, 0) // as INFO while the log loads
		return
	}
	m := eng.Metrics(c.maxQueues)
	gauge(c.blocked, float64(m.Waiters))
	gauge(c.queues, float64(m.Queues))
	for i, q := range queueCounters {
		counter(c.total[i], float64(q.total(&m.Stats)))
	}
	for i, q := range totalsOnly {
		counter(c.totalOnly[i], float64(q.total(&m.Stats)))
	}

	// The labelled queues, then _other: the jobs of every other queue, and
	// the totals' counts not in a labelled queue's counters.
	other := m.Jobs
	sums := make([]uint64, len(queueCounters))
	seen := make(map[string]bool, len(m.Top)+1)
	seen[OtherQueue] = true
	perQueue := func(label string, q *engine.QueueStats) {
		gauge(c.jobs, float64(q.Delayed), label, "delayed")
		gauge(c.jobs, float64(q.Ready), label, "ready")
		gauge(c.jobs, float64(q.Reserved), label, "reserved")
		gauge(c.latency, float64(q.Latency)/1000, label)
		if label != OtherQueue {
			paused := 0.0
			if q.Paused {
				paused = 1
			}
			gauge(c.paused, paused, label)
		}
	}
	for i := range m.Top {
		q := &m.Top[i]
		label := queueLabel(q.Name)
		if seen[label] {
			continue // a queue named _other, or two names alike once escaped: summed in _other
		}
		seen[label] = true
		perQueue(label, &q.QueueStats)
		for k, qc := range queueCounters {
			v := qc.queue(&q.QueueStats)
			sums[k] += v
			counter(c.queueTotal[k], float64(v), label)
		}
		other.Delayed -= q.Delayed
		other.Ready -= q.Ready
		other.Reserved -= q.Reserved
	}
	other.Latency = m.OtherLatency
	perQueue(OtherQueue, &other)
	for k, qc := range queueCounters {
		t := qc.total(&m.Stats)
		counter(c.queueTotal[k], float64(t-min(sums[k], t)), OtherQueue)
	}

	hist := func(d *prometheus.Desc, h engine.Histogram) {
		buckets := make(map[float64]uint64, len(h.Bounds))
		for i, b := range h.Bounds {
			buckets[b.Seconds()] = h.Counts[i]
		}
		ch <- prometheus.MustNewConstHistogram(d, h.Count, h.Sum.Seconds(), buckets)
	}
	hist(c.lateness, m.Lateness)
	hist(c.ackTime, m.AckTime)
	if lm := eng.LogMetrics(); lm.On {
		hist(c.fsync, lm.Fsync)
		gauge(c.logSize, float64(lm.Size))
		counter(c.rewrites, float64(lm.Rewrites))
		gauge(c.logSegments, float64(lm.Segments))
		gauge(c.logLive, float64(lm.LiveBytes))
		counter(c.compactions, float64(lm.Compactions))
	}
	if in := eng.Info(); in.Horizon > 0 {
		gauge(c.diskJobs, float64(in.DiskJobs))
		gauge(c.diskBytes, float64(in.DiskBytes))
		counter(c.diskReads, float64(in.DiskReads))
		gauge(c.farJobs, float64(in.Far.Jobs))
		gauge(c.farMemory, float64(in.Far.IndexBytes+in.Far.MemBytes))
		gauge(c.farDisk, float64(in.Far.DiskBytes))
	}
}

// queueLabel is a queue name as a label value, which must be UTF-8: a byte
// that is not is written \xNN. Should two names then read alike, Collect
// sums the second in _other.
func queueLabel(name string) string {
	if utf8.ValidString(name) {
		return name
	}
	b := make([]byte, 0, len(name)+8)
	for i := 0; i < len(name); {
		r, n := utf8.DecodeRuneInString(name[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b = append(b, `\x`...)
			b = append(b, "0123456789abcdef"[name[i]>>4], "0123456789abcdef"[name[i]&15])
		default:
			b = append(b, name[i:i+n]...)
		}
		i += n
	}
	return string(b)
}
