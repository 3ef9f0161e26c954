package worker

import (
	"sync"
	"time"
)

// clock is the worker's time: the real one, or a test's fake that fires
// timers when the test moves it.
type clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) stopper
}

type stopper interface{ Stop() bool }

type realClock struct{}

func (realClock) Now() time.Time                              { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) stopper { return time.AfterFunc(d, f) }

// reservation is what the heartbeat asks the server: a job's ack deadline
// (DELAY.GET), and to start it again (DELAY.TOUCH).
type reservation interface {
	// deadline is the job's ack_deadline; ok is false when the job is not
	// reserved (added without ACKTIMEOUT, or its reservation is gone).
	deadline(queue, id string) (at time.Time, ok bool, err error)
	// touch restarts the ack deadline; false: the job is not reserved.
	touch(queue, id string) (bool, error)
}

// heartbeatRetry is the wait after a GET or TOUCH that failed (a failover, a
// dropped connection) before asking again.
const heartbeatRetry = 250 * time.Millisecond

// heartbeat keeps one running job's reservation alive. Nothing happens for
// a job that ends within after (the common case costs one timer); then one
// DELAY.GET learns the ack deadline, from which the ack timeout follows
// (deadline minus the time the job was taken), and a DELAY.TOUCH goes out
// each time a third of the ack timeout is left. A third leaves room for a
// slow round trip and for a few hundred ms of clock difference between
// worker and server, which the deadline (the server's clock) carries.
type heartbeat struct {
	clk   clock
	res   reservation
	queue string
	id    string
	taken time.Time
	lost  func(err error) // the reservation is gone (err nil) or a call failed

	mu         sync.Mutex
	t          stopper
	stopped    bool
	ackTimeout time.Duration // 0 until learned
	touches    int
}

func startHeartbeat(clk clock, res reservation, queue, id string, taken time.Time, after time.Duration, lost func(error)) *heartbeat {
	h := &heartbeat{clk: clk, res: res, queue: queue, id: id, taken: taken, lost: lost}
	// Under mu: with after 0 the timer may fire, and learn schedule the
	// next one, before AfterFunc returns; learn's h.t then waits for this.
	h.mu.Lock()
	h.t = clk.AfterFunc(after, h.learn)
	h.mu.Unlock()
	return h
}

// stop ends the heartbeat; a call in flight finishes but schedules nothing.
func (h *heartbeat) stop() {
	h.mu.Lock()
	h.stopped = true
	if h.t != nil {
		h.t.Stop()
	}
	h.mu.Unlock()
}

func (h *heartbeat) after(d time.Duration, f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.stopped {
		h.t = h.clk.AfterFunc(d, f)
	}
}

func (h *heartbeat) learn() {
	at, ok, err := h.res.deadline(h.queue, h.id)
	if err != nil {
		h.lost(err)
		h.after(heartbeatRetry, h.learn)
		return
	}
	if !ok {
		return // not reserved: nothing to keep alive
	}
	ackTimeout := at.Sub(h.taken)
	if ackTimeout < 3*time.Millisecond {
		ackTimeout = 3 * time.Millisecond
	}
	h.mu.Lock()
	h.ackTimeout = ackTimeout
	h.mu.Unlock()
	h.after(max(0, at.Add(-ackTimeout/3).Sub(h.clk.Now())), h.touch)
}

func (h *heartbeat) touch() {
	ok, err := h.res.touch(h.queue, h.id)
	if err != nil {
		h.lost(err)
		h.after(heartbeatRetry, h.touch)
		return
	}
	if !ok {
		h.lost(nil)
		return
	}
	h.mu.Lock()
	h.touches++
	next := h.ackTimeout - h.ackTimeout/3
	h.mu.Unlock()
	h.after(next, h.touch)
}
