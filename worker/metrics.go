package worker

import "github.com/prometheus/client_golang/prometheus"

// Metrics are a worker's Prometheus collectors, labelled by queue. One
// Metrics may serve several workers of a process. Names:
//
//	delayd_worker_jobs_processed_total  handlers that returned nil (the job acknowledged)
//	delayd_worker_jobs_failed_total     handlers that returned an error or panicked
//	delayd_worker_jobs_retried_total    failed jobs given back with DELAY.NACK
//	delayd_worker_jobs_discarded_total  failed jobs acknowledged because of SkipRetry
//	delayd_worker_job_duration_seconds  handler run time
//	delayd_worker_jobs_in_flight        handlers running now
//	delayd_worker_acks_lost_total       ACKs, NACKs and TOUCHes that found no reservation: the job's ack timeout passed
//	                                    and it was (or will be) delivered again, or it had no ACKTIMEOUT
//	delayd_worker_fetch_errors_total    DELAY.MPOP calls that failed (UNBLOCKED, CLUSTERDOWN, a dropped connection ...)
type Metrics struct {
	processed, failed, retried, discarded *prometheus.CounterVec
	duration                              *prometheus.HistogramVec
	inFlight                              *prometheus.GaugeVec
	acksLost, fetchErrors                 *prometheus.CounterVec
}

// NewMetrics makes a worker's collectors and registers them with reg (none
// if reg is nil). Pass the result as Options.Metrics.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "delayd", Subsystem: "worker", Name: name, Help: help}, []string{"queue"})
	}
	m := &Metrics{
		processed: counter("jobs_processed_total", "Jobs whose handler returned nil."),
		failed:    counter("jobs_failed_total", "Jobs whose handler returned an error or panicked."),
		retried:   counter("jobs_retried_total", "Failed jobs given back with DELAY.NACK for a later delivery."),
		discarded: counter("jobs_discarded_total", "Failed jobs acknowledged because their error wraps SkipRetry."),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "delayd", Subsystem: "worker", Name: "job_duration_seconds",
			Help:    "How long handlers ran.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10), // 0.5 ms to 131 s
		}, []string{"queue"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "delayd", Subsystem: "worker", Name: "jobs_in_flight", Help: "Handlers running now.",
		}, []string{"queue"}),
		acksLost:    counter("acks_lost_total", "ACKs, NACKs and TOUCHes that found the job no longer reserved."),
		fetchErrors: counter("fetch_errors_total", "DELAY.MPOP calls that failed and were retried."),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.processed, m.failed, m.retried, m.discarded, m.duration, m.inFlight, m.acksLost, m.fetchErrors} {
			reg.MustRegister(c)
		}
	}
	return m
}

// queueMetrics are one queue's children, looked up once so that a job pays
// no label lookup. Every field is nil-safe through the methods below.
type queueMetrics struct {
	processed, failed, retried, discarded, acksLost, fetchErrors prometheus.Counter
	duration                                                     prometheus.Observer
	inFlight                                                     prometheus.Gauge
}

func (m *Metrics) forQueue(q string) *queueMetrics {
	if m == nil {
		return nil
	}
	return &queueMetrics{
		processed: m.processed.WithLabelValues(q), failed: m.failed.WithLabelValues(q),
		retried: m.retried.WithLabelValues(q), discarded: m.discarded.WithLabelValues(q),
		acksLost: m.acksLost.WithLabelValues(q), fetchErrors: m.fetchErrors.WithLabelValues(q),
		duration: m.duration.WithLabelValues(q), inFlight: m.inFlight.WithLabelValues(q),
	}
}

func (qm *queueMetrics) add(c func(*queueMetrics) prometheus.Counter, n int) {
	if qm != nil && n > 0 {
		c(qm).Add(float64(n))
	}
}

func (qm *queueMetrics) running(d int) {
	if qm != nil {
		qm.inFlight.Add(float64(d))
	}
}

func (qm *queueMetrics) observe(seconds float64) {
	if qm != nil {
		qm.duration.Observe(seconds)
	}
}

func processed(qm *queueMetrics) prometheus.Counter   { return qm.processed }
func failed(qm *queueMetrics) prometheus.Counter      { return qm.failed }
func retried(qm *queueMetrics) prometheus.Counter     { return qm.retried }
func discarded(qm *queueMetrics) prometheus.Counter   { return qm.discarded }
func acksLost(qm *queueMetrics) prometheus.Counter    { return qm.acksLost }
func fetchErrors(qm *queueMetrics) prometheus.Counter { return qm.fetchErrors }

// Processed, Failed and Discarded are a queue's counters, for tests and
// for reading a worker's figures in process.
func (m *Metrics) Processed(queue string) prometheus.Counter {
	return m.processed.WithLabelValues(queue)
}
func (m *Metrics) Failed(queue string) prometheus.Counter { return m.failed.WithLabelValues(queue) }
func (m *Metrics) Discarded(queue string) prometheus.Counter {
	return m.discarded.WithLabelValues(queue)
}
