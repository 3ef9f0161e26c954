// Package hist owns the fixed-bucket histograms behind /metrics and INFO
// lateness: Counts, which an observation touches in one bucket (a few
// compares and two adds, cheap enough for the pop and ACK paths), the
// bucket bounds the engine uses, and Histogram, the cumulative snapshot in
// the shape Prometheus wants. It is a leaf: no goroutines, no locks (the
// caller guards a Counts with the lock it already holds), no imports from
// the project.
package hist

import "time"

// LatencyMs are the upper bounds, in ms, of the lateness and ack-time
// histograms' buckets: 1-2-5 steps from a millisecond (what the wheel's
// tick can show) to an hour (a backlog that workers never caught up with).
var LatencyMs = [...]int64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000, 60000, 300000, 3600000}

// FsyncUs are the fsync histogram's bounds, in µs: from a fast SSD's
// 100 µs to the 5 s of a disk that is going away (slow ones are logged
// from 500 ms).
var FsyncUs = [...]int64{100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 5000000}

// Counts counts observations in fixed buckets: n[i] those at most bounds[i]
// and above bounds[i-1]; the last, those above every bound. Not cumulative,
// so an observation touches one bucket. The bounds are the caller's, the
// same at every call.
type Counts struct {
	n   [20]uint64 // room for the longest bounds list, plus one (TestBoundsFit)
	sum int64
}

// Observe counts v (a negative v counts as 0).
func (h *Counts) Observe(bounds []int64, v int64) {
	v = max(v, 0)
	i := 0
	for i < len(bounds) && v > bounds[i] {
		i++
	}
	h.n[i]++
	h.sum += v
}

// Snapshot renders h as a Histogram, bounds and sum in units of unit.
func (h *Counts) Snapshot(bounds []int64, unit time.Duration) Histogram {
	out := Histogram{Bounds: make([]time.Duration, len(bounds)), Counts: make([]uint64, len(bounds))}
	var c uint64
	for i, b := range bounds {
		c += h.n[i]
		out.Bounds[i] = time.Duration(b) * unit
		out.Counts[i] = c
	}
	out.Count = c + h.n[len(bounds)]
	out.Sum = time.Duration(h.sum) * unit
	return out
}

// Histogram is a snapshot of a histogram, in the shape Prometheus wants:
// Counts[i] is the number of observations at most Bounds[i] (cumulative),
// Count all of them (the +Inf bucket), Sum their total.
type Histogram struct {
	Bounds []time.Duration
	Counts []uint64
	Count  uint64
	Sum    time.Duration
}
