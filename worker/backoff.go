package worker

import (
	"math/rand/v2"
	"time"
)

// BackoffFunc says how long a failed job waits before its next delivery.
// deliveries counts the deliveries so far, this one included (1 after the
// first failure). The job's own RETRY and DEADLETTER options, set by its
// producer, decide when it stops being retried; the worker does not count.
type BackoffFunc func(deliveries int, err error, job *Job) time.Duration

// Default backoff: exponential with full jitter, as in the AWS
// architecture blog's "Exponential Backoff And Jitter": a uniform wait in
// [0, min(cap, base*factor^(n-1))]. Full jitter spreads a burst of failures
// (a dependency that went down for everyone at once) over the whole window
// instead of bringing them back together.
const (
	DefaultBackoffBase   = time.Second
	DefaultBackoffFactor = 2
	DefaultBackoffCap    = time.Hour
)

// ExponentialBackoff is exponential backoff with full jitter: after the
// n-th delivery failed, a uniform wait in [0, min(max, base*factor^(n-1))].
func ExponentialBackoff(base time.Duration, factor float64, max time.Duration) BackoffFunc {
	return func(deliveries int, _ error, _ *Job) time.Duration {
		return jitter(expCeiling(base, factor, max, deliveries), rand.Float64)
	}
}

// DefaultBackoff is ExponentialBackoff(1 s, 2, 1 h).
var DefaultBackoff = ExponentialBackoff(DefaultBackoffBase, DefaultBackoffFactor, DefaultBackoffCap)

// expCeiling is min(max, base*factor^(n-1)), n at least 1, computed without
// overflow however many deliveries a job has had.
func expCeiling(base time.Duration, factor float64, max time.Duration, n int) time.Duration {
	d := float64(base)
	for i := 1; i < n && d < float64(max); i++ {
		d *= factor
	}
	if d > float64(max) {
		return max
	}
	return time.Duration(d)
}

// jitter is a uniform duration in [0, ceiling]; u returns [0, 1).
func jitter(ceiling time.Duration, u func() float64) time.Duration {
	return time.Duration(u() * float64(ceiling+1))
}
