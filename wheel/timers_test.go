package wheel

import "testing"

func TestTimersFireInDueThenAddedOrder(t *testing.T) {
	var ts Timers
	if ts.Started() {
		t.Fatal("a zero Timers is started")
	}
	if _, ok := ts.NextDeadline(); ok {
		t.Fatal("an unstarted Timers has a deadline")
	}
	ts.Start(1, 1000)
	if _, ok := ts.Add(Timer{Kind: 1, Ref: 9}, 1000); ok {
		t.Fatal("a timer not after the clock was set")
	}
	a, _ := ts.Add(Timer{Kind: 1, Ref: 1}, 1010)
	ts.Add(Timer{Kind: 2, Ref: 2}, 1005)
	c, _ := ts.Add(Timer{Kind: 3, Ref: 3}, 1010)
	stopped, _ := ts.Add(Timer{Kind: 4, Ref: 4}, 1007)
	ts.Stop(stopped)
	if due, ok := ts.Due(a); !ok || due != 1010 {
		t.Fatalf("Due(a) = %d, %v", due, ok)
	}
	if dl, ok := ts.NextDeadline(); !ok || dl != 1005 {
		t.Fatalf("deadline %d, %v", dl, ok)
	}
	if fired := ts.Advance(1004); fired != nil {
		t.Fatalf("fired %v before any was due", fired)
	}
	fired := ts.Advance(1010)
	var got []Timer
	for _, h := range fired {
		got = append(got, ts.Take(h))
	}
	ts.Recycle(fired)
	want := []Timer{{2, 2}, {1, 1}, {3, 3}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("fired %v, want %v", got, want)
	}
	if _, ok := ts.Due(c); ok {
		t.Fatal("a fired timer still has a due time")
	}
	// Handles are reused once freed: the slab does not grow.
	n := len(ts.recs)
	for i := range 4 {
		if _, ok := ts.Add(Timer{Kind: 1, Ref: uint64(i)}, 2000); !ok {
			t.Fatal("add")
		}
	}
	if len(ts.recs) != n {
		t.Fatalf("the slab grew from %d to %d with %d handles free", n, len(ts.recs), n)
	}
}
