package queue

import "testing"

func TestSpecValid(t *testing.T) {
	for _, c := range []struct {
		s  Spec
		ok bool
	}{
		{Spec{}, true},
		{Spec{Concurrency: 3, Rate: 100, Per: 1000, GroupConcurrency: 2}, true},
		{Spec{Rate: 5}, false}, // RATE without its window
		{Spec{Per: 5}, false},
		{Spec{Concurrency: -1}, false},
		{Spec{GroupConcurrency: MaxLimit + 1}, false},
		{Spec{Concurrency: MaxLimit}, true},
	} {
		if c.s.Valid() != c.ok {
			t.Errorf("%+v: valid %v, want %v", c.s, !c.ok, c.ok)
		}
	}
}

// TestRateExactCount: RATE 100 per 1000 ms, asked at every millisecond:
// 100 go at 0, then 100 as each window's tokens come back, never more than
// 100 in any 1000 ms; a refusal says when the next token comes back.
func TestRateExactCount(t *testing.T) {
	f := newFixture(t)
	var l Limits
	lim, _ := l.SetSpec("q", Spec{Rate: 100, Per: 1000})
	f.q.SetLimit(lim)
	for range 1000 {
		f.add("", 0, "j", false)
	}
	var at []int64
	for now := range int64(3500) {
		for {
			ok, retryAt := f.q.CanTake(now)
			if !ok {
				if want := (now/1000 + 1) * 1000; retryAt != want {
					t.Fatalf("at %d: retry at %d, want %d", now, retryAt, want)
				}
				break
			}
			if retryAt != 0 {
				t.Fatalf("at %d: ok with a retry time %d", now, retryAt)
			}
			f.q.Order.Unlink(&f.slab, f.q.Take(now, false))
			f.q.Ready--
			at = append(at, now)
		}
		if now == 10 {
			if n := lim.Tokens(now); n != 0 {
				t.Fatalf("%d tokens left at 10 ms", n)
			}
		}
	}
	if len(at) != 400 {
		t.Fatalf("%d jobs in 3500 ms, want 400", len(at))
	}
	for i, ms := range at {
		if want := int64(i/100) * 1000; ms != want {
			t.Fatalf("job %d went at %d ms, want %d", i, ms, want)
		}
	}
	if n := lim.Tokens(4000); n != 100 {
		t.Fatalf("%d tokens after a quiet window, want 100", n)
	}
}

// TestConcurrencyAndPause: CONCURRENCY counts the queue's reservations; a
// pause refuses every take; neither says when to ask again (a reservation's
// end, or RESUME, does).
func TestConcurrencyAndPause(t *testing.T) {
	f := newFixture(t)
	var l Limits
	lim, _ := l.SetSpec("q", Spec{Concurrency: 2})
	f.q.SetLimit(lim)
	for range 5 {
		f.add("", 0, "j", false)
	}
	s1, _ := f.reserve()
	f.reserve()
	if ok, retryAt := f.q.CanTake(0); ok || retryAt != 0 {
		t.Fatalf("at the concurrency: %v %d", ok, retryAt)
	}
	f.unreserve(s1, false)
	if ok, _ := f.q.CanTake(0); !ok {
		t.Fatal("a reservation ended and there is still no room")
	}
	lim, _ = l.SetPaused("q", true)
	f.q.SetLimit(lim)
	if ok, retryAt := f.q.CanTake(0); ok || retryAt != 0 {
		t.Fatalf("paused: %v %d", ok, retryAt)
	}
	lim, _ = l.SetPaused("q", false)
	f.q.SetLimit(lim)
	if ok, _ := f.q.CanTake(0); !ok {
		t.Fatal("resumed and still refused")
	}
	// No ready job: nothing to take, and nothing to wait for.
	f.q.SetLimit(nil)
	f.drain()
	if ok, retryAt := f.q.CanTake(0); ok || retryAt != 0 {
		t.Fatalf("empty: %v %d", ok, retryAt)
	}
}

// TestLimitsRegistry: a name's entry lives while it has a limit or a
// pause; OFF of a paused name keeps the pause and empties the bucket; ids
// are reused.
func TestLimitsRegistry(t *testing.T) {
	var l Limits
	if lim, ok := l.SetSpec("a", Spec{}); lim != nil || ok {
		t.Fatal("OFF for a name with no entry changed something")
	}
	if lim, ok := l.SetPaused("a", false); lim != nil || ok {
		t.Fatal("RESUME for a name with no entry changed something")
	}
	a, _ := l.SetSpec("a", Spec{Rate: 1, Per: 10})
	b, _ := l.SetPaused("b", true)
	if l.Len() != 2 || l.Of("a") != a || l.ByID(uint64(b.ID())) != b || l.ByID(99) != nil {
		t.Fatal("lookups")
	}
	a.spendToken(0)
	if p, _ := l.SetPaused("a", true); p != a || !a.Paused() {
		t.Fatal("pausing a limited name made a new entry")
	}
	if lim, ok := l.SetSpec("a", Spec{}); lim != a || !ok || !a.Spec().IsZero() || a.n != 0 || len(a.spent) != 0 {
		t.Fatalf("OFF of a paused name: %v %v %+v", lim, ok, a)
	}
	if lim, ok := l.SetPaused("a", false); lim != nil || !ok || l.Of("a") != nil {
		t.Fatal("the entry outlived its pause and its limit")
	}
	c, _ := l.SetSpec("c", Spec{Concurrency: 1})
	if c.ID() != a.ID() {
		t.Fatalf("id %d not reused (freed %d)", c.ID(), a.ID())
	}
	got := l.Names((*Limit).Paused)
	if len(got) != 1 || got[0] != "b" {
		t.Fatalf("paused names %q", got)
	}
	n := 0
	for range l.All() {
		n++
	}
	if n != 2 {
		t.Fatalf("All yields %d, want 2", n)
	}
}
