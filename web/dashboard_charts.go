package web

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Charts of the last hour: adds, deliveries and acks per second and queue
// latency, per queue and for the whole server, drawn by the page as inline
// SVG from samples the server keeps. A goroutine samples every chartStep
// through the same commands a page runs (INFO, DELAY.STATS), never from the
// engine's own paths, into a fixed ring per series: chartPoints samples, at
// most chartQueues queues. It starts when a listening server's dashboard
// is first opened (a server nobody looks at runs no commands of its own,
// which MONITOR and INFO commandstats would show) and runs until Close.
// Memory is bounded whatever the traffic: about 20 KiB a queue.
//
// Which queues: those the sampler has found (one SCAN step per sample, so
// a million queues cost no more per sample than a thousand) and those a
// reader opened, up to chartQueues; when full, a queue opened by a reader
// takes the place of the one that has been idle longest.

const (
	chartStep   = 10 * time.Second
	chartPoints = 360 // an hour of chartStep samples
	chartQueues = 200
)

// chartSample is one reading of a queue's (or the server's) counters.
type chartSample struct {
	at                            int64 // unix ms; 0: no sample in this slot
	added, delivered, acked       int64 // counters since start
	latency                       int64 // ms, the oldest ready job's age; -1 unknown
	ready                         int64
	countersKnown, latencyMeasure bool
}

type chartSeries struct {
	ring       [chartPoints]chartSample
	next       int // the slot the next sample goes to
	lastActive time.Time
	opened     time.Time // a reader last opened the queue's page
}

// seen is when the queue last changed or was opened by a reader.
func (s *chartSeries) seen() time.Time {
	if s.opened.After(s.lastActive) {
		return s.opened
	}
	return s.lastActive
}

func (s *chartSeries) put(x chartSample) {
	s.ring[s.next] = x
	s.next = (s.next + 1) % chartPoints
}

// samples are the ring's samples, oldest first, within the last hour of now.
func (s *chartSeries) samples(now time.Time) []chartSample {
	from := now.Add(-chartPoints * chartStep).UnixMilli()
	out := make([]chartSample, 0, chartPoints)
	for i := range chartPoints {
		x := s.ring[(s.next+i)%chartPoints]
		if x.at > from {
			out = append(out, x)
		}
	}
	return out
}

type chartBook struct {
	mu     sync.Mutex
	server chartSeries // the whole server, from INFO
	queues map[string]*chartSeries
	cursor string // where the next SCAN step starts

	armed, started atomic.Bool // Listen ran; the sampler runs
	stop, done     chan struct{}
	stopped        bool // Close ran: never start again
}

// armSampler lets the first dashboard page start the sampler (Listen: a
// Server only handed requests in tests runs none).
func (d *dashboard) armSampler() {
	if d.s.opts.Dispatcher != nil { // a Server for /metrics alone has no commands to run
		d.charts.armed.Store(true)
	}
}

// startSampler runs the sampler until stopSampler, once armed.
func (d *dashboard) startSampler() {
	c := &d.charts
	if !c.armed.Load() || c.started.Load() {
		return
	}
	c.mu.Lock()
	if c.stop != nil || c.stopped {
		c.mu.Unlock()
		return
	}
	c.started.Store(true)
	c.stop, c.done = make(chan struct{}), make(chan struct{})
	stop, done := c.stop, c.done
	c.mu.Unlock()
	go func() {
		defer close(done)
		t := time.NewTicker(chartStep)
		defer t.Stop()
		d.sample(context.Background(), time.Now())
		for {
			select {
			case <-stop:
				return
			case now := <-t.C:
				d.sample(context.Background(), now)
			}
		}
	}()
}

func (d *dashboard) stopSampler() {
	c := &d.charts
	c.mu.Lock()
	stop, done := c.stop, c.done
	c.stop, c.stopped = nil, true
	c.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

// sample takes one reading of the server and of each tracked queue. Reads
// run as after READONLY, so a follower's sampler reads its own copy rather
// than getting MOVED.
func (d *dashboard) sample(ctx context.Context, now time.Time) {
	ctx = WithReadOnly(ctx)
	c := &d.charts
	var server chartSample
	if v, err := d.do(ctx, "INFO", "stats", "queues"); err == nil {
		in := parseInfo(v)
		server = chartSample{at: now.UnixMilli(), latency: -1, countersKnown: true,
			added: in.int("stats", "jobs_added"), delivered: in.int("stats", "jobs_delivered"),
			acked: in.int("stats", "jobs_acked"), ready: in.int("queues", "ready")}
		if _, ok := in["queues"]["latency_max_ms"]; ok {
			server.latency, server.latencyMeasure = in.int("queues", "latency_max_ms"), true
		}
	}
	d.discover(ctx, now)
	c.mu.Lock()
	names := make([]string, 0, len(c.queues))
	for n := range c.queues {
		names = append(names, n)
	}
	c.mu.Unlock()
	for _, name := range names {
		x := d.queueSample(ctx, name, now)
		c.mu.Lock()
		if s := c.queues[name]; s != nil {
			if prev := s.ring[(s.next+chartPoints-1)%chartPoints]; x.ready > 0 || prev.at == 0 ||
				x.added != prev.added || x.delivered != prev.delivered || x.acked != prev.acked {
				s.lastActive = now
			}
			s.put(x)
		}
		c.mu.Unlock()
	}
	if server.at != 0 {
		c.mu.Lock()
		c.server.put(server)
		c.mu.Unlock()
	}
}

// queueSample reads one queue's counters and latency (DELAY.STATS).
func (d *dashboard) queueSample(ctx context.Context, name string, now time.Time) chartSample {
	x := chartSample{at: now.UnixMilli(), latency: -1}
	v, err := d.do(ctx, "DELAY.STATS", name)
	if err != nil {
		return x
	}
	x.countersKnown = true
	for _, f := range fields(v) {
		switch f.Name {
		case "added":
			x.added = num(f.Value)
		case "deliveries":
			x.delivered = num(f.Value)
		case "acks":
			x.acked = num(f.Value)
		case "ready":
			x.ready = num(f.Value)
		case "latency":
			x.latency, x.latencyMeasure = num(f.Value), true
		}
	}
	return x
}

// discover takes one SCAN step from where the last one ended and tracks
// the queues it finds while there is room.
func (d *dashboard) discover(ctx context.Context, now time.Time) {
	c := &d.charts
	c.mu.Lock()
	cursor := c.cursor
	room := c.queues == nil || len(c.queues) < chartQueues
	c.mu.Unlock()
	if !room {
		d.forgetIdle(now)
		return
	}
	if cursor == "" {
		cursor = "0"
	}
	v, err := d.do(ctx, "SCAN", cursor, "COUNT", "1000")
	if err != nil {
		return
	}
	l := list(v)
	if len(l) != 2 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cursor = str(l[0])
	for _, n := range list(l[1]) {
		c.track(str(n), now, false)
	}
}

// track adds a queue to the sampled ones. A queue a reader opened may take
// the place of the one idle longest; one the sampler found only fills room.
func (c *chartBook) track(name string, now time.Time, opened bool) {
	if c.queues == nil {
		c.queues = map[string]*chartSeries{}
	}
	if s := c.queues[name]; s != nil {
		if opened {
			s.opened = now
		}
		return
	}
	if len(c.queues) >= chartQueues {
		if !opened {
			return
		}
		idle, oldest := "", now
		for n, s := range c.queues {
			if t := s.seen(); t.Before(oldest) || idle == "" {
				idle, oldest = n, t
			}
		}
		delete(c.queues, idle)
	}
	s := &chartSeries{lastActive: now}
	if opened {
		s.opened = now
	}
	c.queues[name] = s
}

// forgetIdle drops queues with no job and no change for the whole hour, to
// make room for others.
func (d *dashboard) forgetIdle(now time.Time) {
	c := &d.charts
	c.mu.Lock()
	defer c.mu.Unlock()
	for n, s := range c.queues {
		if now.Sub(s.seen()) > chartPoints*chartStep {
			delete(c.queues, n)
		}
	}
}

// --- drawing

// chartView is one chart: lines over the last hour, scaled to the largest
// value shown.
type chartView struct {
	Title string
	W, H  int
	Lines []chartLine
	Max   string // the top of the scale, with its unit
	Empty string // why there is nothing to draw yet
}

type chartLine struct {
	Key, Label, Class string
	Points            string // SVG polyline points
	N                 int    // how many points
	Last              string // the newest value, with its unit
}

// charts are a series' two charts: rates, and latency.
type chartsView struct {
	Rates, Latency chartView
	Queue          string
}

const chartW, chartH = 600, 120

// chartsFor draws a queue's charts ("" is the whole server) and, for a
// queue, marks it opened so that it is sampled from now on.
func (d *dashboard) chartsFor(queue string, now time.Time) chartsView {
	c := &d.charts
	c.mu.Lock()
	var xs []chartSample
	if queue == "" {
		xs = c.server.samples(now)
	} else {
		c.track(queue, now, true)
		xs = c.queues[queue].samples(now)
	}
	c.mu.Unlock()
	// The right edge is the newest sample, so a chart's HTML changes only
	// when a sample is taken, not at every live update.
	if n := len(xs); n > 0 {
		now = time.UnixMilli(xs[n-1].at)
	}
	v := chartsView{Queue: queue}
	v.Rates = drawRates(xs, now)
	v.Latency = drawLatency(xs, now)
	return v
}

type point struct {
	t int64 // unix ms
	v float64
}

func drawRates(xs []chartSample, now time.Time) chartView {
	cv := chartView{Title: "Rates", W: chartW, H: chartH}
	series := []struct {
		key, label string
		get        func(chartSample) int64
	}{
		{"adds", "adds/s", func(x chartSample) int64 { return x.added }},
		{"deliveries", "deliveries/s", func(x chartSample) int64 { return x.delivered }},
		{"acks", "acks/s", func(x chartSample) int64 { return x.acked }},
	}
	var lines [][]point
	top := 0.0
	for _, s := range series {
		var pts []point
		for i := 1; i < len(xs); i++ {
			a, b := xs[i-1], xs[i]
			dv, dt := s.get(b)-s.get(a), b.at-a.at
			if !a.countersKnown || !b.countersKnown || dt <= 0 || dv < 0 {
				continue // a gap, or a counter that started again (a restart)
			}
			r := float64(dv) * 1000 / float64(dt)
			pts = append(pts, point{b.at, r})
			top = max(top, r)
		}
		lines = append(lines, pts)
	}
	for i, s := range series {
		l := chartLine{Key: s.key, Label: s.label, Class: "s" + strconv.Itoa(i)}
		l.Points, l.N = polyline(lines[i], top, now)
		if n := len(lines[i]); n > 0 {
			l.Last = fmtRate(lines[i][n-1].v)
		}
		cv.Lines = append(cv.Lines, l)
	}
	cv.Max = fmtRate(top) + "/s"
	if len(xs) < 2 {
		cv.Empty = "Collecting: a point every " + chartStep.String() + " from when the server started sampling."
	}
	return cv
}

func drawLatency(xs []chartSample, now time.Time) chartView {
	cv := chartView{Title: "Queue latency", W: chartW, H: chartH}
	var pts []point
	top := 0.0
	for _, x := range xs {
		if x.latencyMeasure && x.latency >= 0 {
			pts = append(pts, point{x.at, float64(x.latency)})
			top = max(top, float64(x.latency))
		}
	}
	l := chartLine{Key: "latency", Label: "oldest ready job's age", Class: "s3"}
	l.Points, l.N = polyline(pts, top, now)
	if n := len(pts); n > 0 {
		l.Last = fmtMs(int64(pts[n-1].v))
	}
	cv.Lines = []chartLine{l}
	cv.Max = fmtMs(int64(top))
	if len(pts) == 0 {
		cv.Empty = "Collecting: a point every " + chartStep.String() + "."
	}
	return cv
}

// polyline places points on the chart: time across (the last hour, now at
// the right edge), value up (0 at the bottom, top at the top).
func polyline(pts []point, top float64, now time.Time) (string, int) {
	if len(pts) == 0 {
		return "", 0
	}
	span := float64(chartPoints * chartStep / time.Millisecond)
	from := float64(now.UnixMilli()) - span
	var b strings.Builder
	for i, p := range pts {
		x := (float64(p.t) - from) / span * chartW
		y := float64(chartH)
		if top > 0 {
			y = chartH - p.v/top*(chartH-4) // 4px of room for the line at the top
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.1f,%.1f", min(max(x, 0), chartW), y)
	}
	return b.String(), len(pts)
}

// queueNamesSampled lists the sampled queues, for tests.
func (c *chartBook) queueNamesSampled() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for n := range c.queues {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
