package worker

import (
	"errors"
	"sort"
	"sync"
	"testing"
	"time"
)

// fakeClock fires its timers when the test moves it, in time order, each
// on the test's goroutine.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c       *fakeClock
	at      time.Time
	f       func()
	stopped bool
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) stopper {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

// advance moves the clock by d, firing every timer due meanwhile.
func (c *fakeClock) advance(d time.Duration) {
	end := c.Now().Add(d)
	for {
		c.mu.Lock()
		sort.SliceStable(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
		var next *fakeTimer
		for len(c.timers) > 0 {
			t := c.timers[0]
			if t.stopped {
				c.timers = c.timers[1:]
				continue
			}
			if !t.at.After(end) {
				next = t
				c.timers = c.timers[1:]
				c.now = t.at
			}
			break
		}
		if next == nil {
			c.now = end
			c.mu.Unlock()
			return
		}
		next.stopped = true
		c.mu.Unlock()
		next.f()
	}
}

// fakeReservation is a server's view of one job: an ack deadline that a
// touch moves to now + ackTimeout, on the fake clock.
type fakeReservation struct {
	clk        *fakeClock
	ackTimeout time.Duration
	deadlineAt time.Time
	reserved   bool
	fail       int // the next calls that fail
	gets       []time.Time
	touches    []time.Time
}

func (r *fakeReservation) deadline(queue, id string) (time.Time, bool, error) {
	r.gets = append(r.gets, r.clk.Now())
	if r.fail > 0 {
		r.fail--
		return time.Time{}, false, errors.New("connection refused")
	}
	return r.deadlineAt, r.reserved, nil
}

func (r *fakeReservation) touch(queue, id string) (bool, error) {
	now := r.clk.Now()
	if r.fail > 0 {
		r.fail--
		return false, errors.New("connection refused")
	}
	if !r.reserved || now.After(r.deadlineAt) {
		r.reserved = false
		return false, nil
	}
	r.touches = append(r.touches, now)
	r.deadlineAt = now.Add(r.ackTimeout)
	return true, nil
}

func newReservation(ackTimeout time.Duration) (*fakeClock, *fakeReservation) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	return clk, &fakeReservation{clk: clk, ackTimeout: ackTimeout, deadlineAt: clk.now.Add(ackTimeout), reserved: true}
}

func TestHeartbeatFastJobCostsNothing(t *testing.T) {
	clk, res := newReservation(3 * time.Second)
	h := startHeartbeat(clk, res, "q", "j", clk.Now(), time.Second, func(error) { t.Error("lost") })
	clk.advance(999 * time.Millisecond)
	h.stop()
	clk.advance(time.Minute)
	if len(res.gets)+len(res.touches) != 0 {
		t.Fatalf("a job done within 1 s sent %d GETs and %d TOUCHes, want none", len(res.gets), len(res.touches))
	}
}

// A job running 10x its ack timeout: one GET at 1 s, then a TOUCH each
// time a third of the ack timeout is left; the deadline never passes.
func TestHeartbeatTouchesAtAThirdLeft(t *testing.T) {
	clk, res := newReservation(3 * time.Second)
	start := clk.Now()
	h := startHeartbeat(clk, res, "q", "j", start, time.Second, func(err error) { t.Errorf("lost: %v", err) })
	for i := 0; i < 300; i++ {
		clk.advance(100 * time.Millisecond)
		if clk.Now().After(res.deadlineAt) {
			t.Fatalf("at %v the ack deadline %v passed", clk.Now().Sub(start), res.deadlineAt.Sub(start))
		}
	}
	h.stop()
	if len(res.gets) != 1 || res.gets[0].Sub(start) != time.Second {
		t.Fatalf("GETs at %v, want one at 1s", res.gets)
	}
	// The first at deadline - 1 s (3 s - 1 s), then every 2 s.
	want := []time.Duration{2 * time.Second}
	for d := 4 * time.Second; d <= 30*time.Second; d += 2 * time.Second {
		want = append(want, d)
	}
	if len(res.touches) != len(want) {
		t.Fatalf("%d touches, want %d", len(res.touches), len(want))
	}
	for i, at := range res.touches {
		if at.Sub(start) != want[i] {
			t.Fatalf("touch %d at %v, want %v", i, at.Sub(start), want[i])
		}
	}
}

// An ack timeout shorter than the first check: the GET finds a third or
// less left and touches at once.
func TestHeartbeatShortAckTimeoutTouchesAtOnce(t *testing.T) {
	clk, res := newReservation(1200 * time.Millisecond)
	start := clk.Now()
	startHeartbeat(clk, res, "q", "j", start, time.Second, func(err error) { t.Errorf("lost: %v", err) })
	clk.advance(time.Second)
	if len(res.touches) != 1 || res.touches[0].Sub(start) != time.Second {
		t.Fatalf("touches %v, want one at 1s", res.touches)
	}
	clk.advance(800 * time.Millisecond) // 2/3 of 1.2 s
	if len(res.touches) != 2 {
		t.Fatalf("%d touches after 1.8s, want 2", len(res.touches))
	}
}

func TestHeartbeatNotReservedStops(t *testing.T) {
	clk, res := newReservation(3 * time.Second)
	res.reserved = false
	startHeartbeat(clk, res, "q", "j", clk.Now(), time.Second, func(error) { t.Error("lost") })
	clk.advance(time.Minute)
	if len(res.gets) != 1 || len(res.touches) != 0 {
		t.Fatalf("%d GETs, %d TOUCHes for a job without a reservation, want 1 and 0", len(res.gets), len(res.touches))
	}
}

func TestHeartbeatRetriesFailedCallsAndReportsALostReservation(t *testing.T) {
	clk, res := newReservation(3 * time.Second)
	start := clk.Now()
	var errs, lost int
	startHeartbeat(clk, res, "q", "j", start, time.Second, func(err error) {
		if err != nil {
			errs++
		} else {
			lost++
		}
	})
	res.fail = 2 // the GET at 1 s and its retry at 1.25 s
	clk.advance(2 * time.Second)
	if errs != 2 || len(res.gets) != 3 || res.gets[2].Sub(start) != 1500*time.Millisecond {
		t.Fatalf("%d errors, GETs %v; want 2 errors and a GET at 1.5s", errs, res.gets)
	}
	if len(res.touches) != 1 {
		t.Fatalf("%d touches by 2s, want 1 (at 2s)", len(res.touches))
	}
	res.reserved = false // the reservation expired meanwhile (a long pause)
	clk.advance(time.Minute)
	if lost != 1 {
		t.Fatalf("lost reported %d times, want 1", lost)
	}
}
