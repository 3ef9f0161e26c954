package engine

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// These tests run on the real clock, outside synctest: the fine timer is a
// kernel timer that synctest's fake clock does not drive. They assert what
// happens, never how soon (the machine is shared); the generous waits only
// keep a broken timer from hanging the run.

const realWait = 30 * time.Second

// A blocked pop on an engine with FineTimer gets its job once it is due,
// and never before its due millisecond.
func TestFineTimerServesWaiterNotEarly(t *testing.T) {
	e, err := New(Options{FineTimer: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for i := range 20 {
		due := e.Now() + 2 + int64(i%3)
		if _, err := e.Add(AddArgs{Queue: b("q"), At: true, Due: due, Payload: b("p")}); err != nil {
			t.Fatal(err)
		}
		d, w, err := e.PopOrWait([][]byte{b("q")}, PopDelay)
		if err != nil {
			t.Fatal(err)
		}
		if w != nil {
			select {
			case <-w.Ready():
			case <-time.After(realWait):
				t.Fatalf("job %d due at %d never reached its waiter", i, due)
			}
			var ok bool
			if d, ok = w.Result(); !ok {
				t.Fatalf("waiter %d released without a job", i)
			}
		}
		if now := time.Now().UnixMilli(); now < d.Due || d.Due != due {
			t.Fatalf("job %d due at %d (got %d) handed out at %d", i, due, d.Due, now)
		}
	}
}

// With the timerfd, the commands a busy process runs are the timer's
// backstop: Overdue, given a time past the armed deadline, fires what is
// due though the timerfd has not expired. The engine's clock is a fake one
// here, moved past the due time at once, so the timerfd (real time) is
// still a minute away and only Overdue can serve the waiter (or a poke
// the add left pending, which makes the test pass, never fail).
func TestOverdueFiresWhatTheTimerfdHasNot(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("timerfd is Linux only")
	}
	var clock atomic.Int64
	clock.Store(time.Now().UnixMilli())
	e := newEngine(t, Options{FineTimer: true, Now: func() time.Time { return time.UnixMilli(clock.Load()) }})
	if !e.sleep.Fine() {
		t.Fatal("no timerfd on Linux")
	}
	due := clock.Load() + 60_000
	if _, err := e.Add(AddArgs{Queue: b("q"), At: true, Due: due, Payload: b("p")}); err != nil {
		t.Fatal(err)
	}
	_, w, err := e.PopOrWait([][]byte{b("q")}, PopDelay)
	if err != nil || w == nil {
		t.Fatalf("pop: waiter %v, %v; want to wait", w, err)
	}
	// The timer goroutine arms the timerfd after the add pokes it, and it
	// may go round once more for a poke still pending: it clears and sets
	// the due instant under mu, so it is read under mu too.
	armed := func() int64 {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.sleep.Due()
	}
	for stop := time.Now().Add(realWait); armed() == 0; runtime.Gosched() {
		if time.Now().After(stop) {
			t.Fatal("the timerfd was never armed")
		}
	}
	e.mu.Lock()
	due0 := e.sleep.Due()
	e.Overdue(Mono()) // before the deadline: nothing to do
	kept := e.sleep.Due() == due0
	e.mu.Unlock()
	if !kept {
		t.Fatal("Overdue before the deadline took it")
	}
	clock.Add(61_000)
	e.Overdue(Mono() + time.Minute + time.Second)
	select {
	case <-w.Ready():
	case <-time.After(realWait):
		t.Fatal("Overdue past the deadline did not fire the due job")
	}
	if d, ok := w.Result(); !ok || d.Due != due {
		t.Fatalf("waiter got %+v, %v; want the job due at %d", d, ok, due)
	}
}
