package engine

import (
	"testing"
	"testing/synctest"
	"time"
)

// An add given the time its command arrived (AddArgs.Mono) counts its delay
// from that reading, not from a fresh one: the command layer's clock read
// serves the engine too (clockAt).
func TestAddCountsFromTheCallersReading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		arrived := Mono()
		start := e.Now()
		sleep(5 * time.Millisecond) // the engine gets to it later
		res, err := e.Add(AddArgs{Queue: b("q"), Delay: 10, Payload: b("x"), Mono: arrived})
		if err != nil || !res.Added {
			t.Fatal(res, err)
		}
		if info, _ := e.Get(b("q"), res.ID); info.Due != start+10 {
			t.Fatalf("due %d, want the reading's %d + 10 (a fresh read: %d)", info.Due, start, e.Now()+10)
		}
		sleep(4 * time.Millisecond)
		if _, ok := popPayload(e, "q"); ok {
			t.Fatal("popped before 10 ms from the reading")
		}
		sleep(time.Millisecond)
		if p, ok := popPayload(e, "q"); !ok || p != "x" {
			t.Fatalf("not ready 10 ms after the reading: %q %v", p, ok)
		}
	})
}

// A reading older than the last operation's time (another connection's
// command took the lock first) is floored at that time: the engine's clock
// never goes back, and the job is due no earlier than if the engine had
// read the clock at that operation.
func TestAddWithAnOlderReadingNeverGoesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		old := Mono()
		sleep(7 * time.Millisecond)
		later := e.Now()
		add(t, e, "other", 1000, "y") // an operation at later: opNow
		res, err := e.Add(AddArgs{Queue: b("q"), Delay: 10, Payload: b("x"), Mono: old})
		if err != nil || !res.Added {
			t.Fatal(res, err)
		}
		if info, _ := e.Get(b("q"), res.ID); info.Due != later+10 {
			t.Fatalf("due %d, want the floor's %d + 10, not the stale reading's %d + 10", info.Due, later, later-7)
		}
		if now := opNowOf(e); now != later {
			t.Fatalf("the engine's time went from %d to %d", later, now)
		}
		// A millisecond's fraction since the floor: the floor is the time,
		// and the delay runs from its whole millisecond, which the client's
		// own clock had reached when it sent the command.
		sleep(500 * time.Microsecond)
		res, _ = e.Add(AddArgs{Queue: b("q"), Delay: 10, Payload: b("z"), Mono: old})
		if info, _ := e.Get(b("q"), res.ID); info.Due != later+10 {
			t.Fatalf("due %d, want %d", info.Due, later+10)
		}
	})
}

// An injected Options.Now is the engine's clock: a caller's reading, on
// the real monotonic clock, is not on it and is ignored.
func TestAddIgnoresTheReadingWithAnInjectedClock(t *testing.T) {
	fake := time.UnixMilli(1_700_000_000_000)
	e := newEngine(t, Options{Now: func() time.Time { return fake }})
	res, err := e.Add(AddArgs{Queue: b("q"), Delay: 10, Payload: b("x"), Mono: Mono() - time.Hour})
	if err != nil || !res.Added {
		t.Fatal(res, err)
	}
	if info, _ := e.Get(b("q"), res.ID); info.Due != fake.UnixMilli()+10 {
		t.Fatalf("due %d, want the injected clock's %d + 10", info.Due, fake.UnixMilli())
	}
}

// A push or a list pop given the time its command arrived stamps the job
// (its due time, a push's record) and advances the wheel from that reading
// (PushAt, ListPopOneAt); an older reading never takes the engine back.
func TestListCommandsTakeTheCallersReading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		arrived := Mono()
		start := e.Now()
		sleep(5 * time.Millisecond)
		if _, _, err := e.PushAt(b("l"), [][]byte{b("x")}, false, arrived); err != nil {
			t.Fatal(err)
		}
		var s Scratch
		d, ok := e.ListPopOneAt(b("l"), false, &s, arrived)
		if !ok || d.Due != start {
			t.Fatalf("pushed job due %d (%v), want the reading's %d, not %d", d.Due, ok, start, e.Now())
		}
		add(t, e, "other", 0, "y") // an operation at start+5: opNow
		if _, _, err := e.PushAt(b("l"), [][]byte{b("z")}, false, arrived); err != nil {
			t.Fatal(err)
		}
		if d, _ := e.ListPopOneAt(b("l"), false, &s, arrived); d.Due != start+5 || opNowOf(e) != start+5 {
			t.Fatalf("with a stale reading: due %d, engine at %d; want both at %d", d.Due, opNowOf(e), start+5)
		}
	})
}

// opNowOf reads the engine's last operation time under its lock: the timer
// goroutine writes it too.
func opNowOf(e *Engine) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.opNow
}
