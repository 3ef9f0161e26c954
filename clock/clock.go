// Package clock owns the engine's time: unix milliseconds read from the
// monotonic clock (the wall clock's reading at start plus the time
// elapsed since), floored, so a job is never handed out before its due
// millisecond and a wall-clock step after start cannot make one early or
// late or reorder jobs; relative times added to the reading rounded up to
// a whole millisecond; and one clock read per command, taken by the
// command layer (Mono) and handed down. The owner adds what is not the
// clock's (a transaction's frozen time, a follower's replicated time, the
// floor a new leader never reads below). A leaf: no goroutine, no lock.
package clock

import "time"

// Epoch anchors Mono. The command layer times its commands on it too, so
// one reading serves both.
var Epoch = time.Now()

// Mono is the monotonic time since Epoch: one clock read (time.Since),
// never 0 once the process has run a nanosecond.
func Mono() time.Duration { return time.Since(Epoch) }

// Clock is an engine's time since it started.
type Clock struct {
	start time.Time // monotonic base
	// startMono is start on the Mono clock: a caller's Mono reading minus
	// it is the time elapsed (At).
	startMono time.Duration
	startMs   int64 // unix ms at start
	// monoOnly says now is time.Now, so the time since start is read
	// from the monotonic clock alone (Elapsed).
	monoOnly bool
	now      func() time.Time
}

// New starts a clock on now (nil: time.Now; tests inject nothing, they
// run inside testing/synctest, whose fake clock drives time.Now). The
// base is a whole wall-clock millisecond, so the clock's milliseconds
// tick with the wall clock's: a job due at D is ready when the wall clock
// reads D, not up to a millisecond later.
func New(now func() time.Time) Clock {
	c := Clock{monoOnly: now == nil, now: now}
	if now == nil {
		c.now = time.Now
	}
	t := c.now()
	c.start = t.Add(-time.Duration(t.UnixNano() % int64(time.Millisecond)))
	c.startMono, c.startMs = c.start.Sub(Epoch), c.start.UnixMilli()
	return c
}

// StartMs is the unix ms the clock started at.
func (c *Clock) StartMs() int64 { return c.startMs }

// Elapsed is the time since start. With the default clock it is
// time.Since, one read of the monotonic clock, where time.Now().Sub makes
// two (wall and monotonic): on a pipelined RPUSH the clock was 8% of the
// server's CPU. time.Since defers to time.Now inside a synctest bubble, so
// tests keep their fake clock.
func (c *Clock) Elapsed() time.Duration {
	if c.monoOnly {
		return time.Since(c.start)
	}
	return c.now().Sub(c.start)
}

// Now is the time in unix ms, floored.
func (c *Clock) Now() int64 { return c.startMs + int64(c.Elapsed()/time.Millisecond) }

// At reads the time for an operation: now floored, and up rounded up to a
// whole millisecond (what relative times add to: a job added 0.4 ms into a
// millisecond with a delay of 5 ms must not be handed out 4.6 ms later).
// at is a Mono reading the caller took when its command arrived (0: read
// the clock now), as Redis stamps each command once
// (commandTimeSnapshot): a pipelined DELAY.ADD then reads the clock once,
// in the command layer, not twice. It holds only with the default clock:
// an injected now is the engine's time, and at is not on it.
//
// Neither reading goes below floor. at may be older than a reading another
// operation made since (last, the time of the owner's last operation), so
// it is floored there too: taking that floor as now and as up is never
// early, since at was read after the command arrived, so the client's own
// clock read at most last when it sent it.
func (c *Clock) At(at time.Duration, floor, last int64) (now, up int64) {
	var elapsed time.Duration
	if c.monoOnly && at != 0 {
		elapsed = at - c.startMono // no clock read
		floor = max(floor, last)
	} else {
		elapsed = c.Elapsed()
	}
	now = c.startMs + int64(elapsed/time.Millisecond)
	if floor > now {
		return floor, floor
	}
	up = now
	if elapsed%time.Millisecond != 0 {
		up++
	}
	return now, up
}

// Until converts a deadline in unix ms to a duration from now.
func (c *Clock) Until(ms int64) time.Duration {
	return time.Duration(ms-c.startMs)*time.Millisecond - c.Elapsed()
}

// LateBy is how long after the first nanosecond of the millisecond ms the
// clock is.
func (c *Clock) LateBy(ms int64) time.Duration {
	return c.now().Sub(c.start.Add(time.Duration(ms-c.startMs) * time.Millisecond))
}
