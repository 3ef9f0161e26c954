package finetimer

import (
	"sync/atomic"
	"time"
)

// Sleeper is how a timer goroutine sleeps until its next deadline
// (docs/decisions/timer-wakeup.md): on a Timer if it has one, else on the
// runtime's timer, or until woken (Wake: an earlier deadline came, or
// Overdue). It runs on its owner's goroutine; Wake and Overdue are safe
// from any goroutine.
type Sleeper struct {
	t    *time.Timer
	fine *Timer // nil: the runtime's timer alone
	// fineAt is the deadline the Timer is armed for, until its expiry
	// wakes us: a wake-up (an earlier deadline) that leaves the deadline
	// where it was then costs no system call.
	fineAt int64
	dl     int64 // the deadline armed
	armed  bool
	// due is the deadline's instant on the caller's monotonic clock while
	// the Timer alone waits for it, or 0 (Overdue).
	due  atomic.Int64
	wake chan struct{}
}

// NewSleeper returns a sleeper on the runtime's timer.
func NewSleeper() *Sleeper {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &Sleeper{t: t, wake: make(chan struct{}, 1)}
}

// SetFine makes the sleeper sleep on fine, before the first Wait.
func (s *Sleeper) SetFine(fine *Timer) { s.fine = fine }

// Disarm makes the next Wait sleep until woken.
func (s *Sleeper) Disarm() {
	s.armed = false
	s.due.Store(0)
}

// Arm makes the next Wait end at deadline dl (the caller's, such as a
// unix ms), d from now, which is the instant at on the monotonic clock
// Overdue is told.
func (s *Sleeper) Arm(dl int64, d, at time.Duration) {
	s.dl, s.armed = dl, true
	s.due.Store(0)
	if s.fine == nil {
		s.t.Reset(d)
		return
	}
	if dl != s.fineAt {
		s.fine.Arm(d)
		s.fineAt = dl
	}
	// The backstop for a busy process, whose run queue never empties and
	// so never reaches netpoll, where the timerfd is read, is the commands
	// it runs: each one ends with Overdue. It used to be the runtime's
	// timer, a millisecond after the timerfd; but the timerfd came first,
	// and a timer stopped or moved later stays in the runtime's heap at its
	// old time until the process next wakes for it: one more wake-up of the
	// process and of sysmon for nothing, about one job in five in the
	// rivals race's steady case.
	s.due.Store(int64(at))
}

// Wait sleeps until the armed deadline, a Wake or quit. expired says the
// deadline came; stop that quit did. ahead says whether the deadline is
// still ahead: a Timer's expiry read after the runtime's timer had served
// an earlier arming (both aim at the same instant) is then ignored.
func (s *Sleeper) Wait(quit <-chan struct{}, ahead func() bool) (expired, stop bool) {
	var fine <-chan struct{}
	if s.fine != nil {
		fine = s.fine.C
	}
	for {
		select {
		case <-s.t.C:
			return true, false
		case <-fine:
			if !s.armed || ahead() {
				continue // only the owner's goroutine arms the Timer: nothing to do
			}
			s.t.Stop()
			s.fineAt = 0
			return true, false
		case <-s.wake:
			s.t.Stop()
			return false, false
		case <-quit:
			s.t.Stop()
			return false, true
		}
	}
}

// Wake ends the current or next Wait. Safe from any goroutine.
func (s *Sleeper) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Overdue wakes the sleeper if now, on the clock Arm's at is on, is past
// the deadline the Timer was armed for. A process whose run queue never
// empties reaches netpoll, where the Timer's expiry is read, only when
// sysmon polls it (every 10 ms); the commands that keep it busy call this
// instead. One atomic load when nothing is due. Safe from any goroutine.
func (s *Sleeper) Overdue(now time.Duration) {
	if due := s.due.Load(); due != 0 && int64(now) >= due && s.due.CompareAndSwap(due, 0) {
		s.Wake()
	}
}

// Close closes the Timer.
func (s *Sleeper) Close() {
	s.t.Stop()
	if s.fine != nil {
		s.fine.Close()
	}
}

// Fine says the sleeper sleeps on a Timer.
func (s *Sleeper) Fine() bool { return s.fine != nil }

// Due is the instant Overdue waits for, or 0.
func (s *Sleeper) Due() int64 { return s.due.Load() }
