package schedule

import (
	"slices"
	"testing"
)

// every10 is an EVERY 10 ms schedule anchored at 0, last fired at last.
func every10(t *testing.T, last int64) *Sched {
	t.Helper()
	st := Rec{Every: 10, Last: last}
	spec, err := st.Parse()
	if err != nil {
		t.Fatal(err)
	}
	return &Sched{St: st, Spec: spec, Next: -1}
}

func TestOwedByPolicy(t *testing.T) {
	// Last fired at 30; armed at 75: 40, 50, 60 and 70 were missed.
	for _, tc := range []struct {
		policy uint8
		want   []int64
	}{
		{MisfireSkip, nil},
		{MisfireOnce, []int64{70}},
		{MisfireAll, []int64{40, 50, 60, 70}},
	} {
		owed, _, capped := every10(t, 30).Owed(75, tc.policy)
		if !slices.Equal(owed, tc.want) || capped {
			t.Errorf("%s: owed %v capped %v, want %v", MisfireName(tc.policy), owed, capped, tc.want)
		}
	}
	// Nothing missed: the next time is not before now.
	if owed, _, _ := every10(t, 70).Owed(80, MisfireAll); owed != nil {
		t.Errorf("owed %v with nothing missed", owed)
	}
}

func TestOwedAllIsCapped(t *testing.T) {
	owed, rest, capped := every10(t, 0).Owed(10*(MaxCatchUp+50), MisfireAll)
	if len(owed) != MaxCatchUp || !capped || rest != 10*(MaxCatchUp+1) {
		t.Fatalf("owed %d firings, rest %d, capped %v", len(owed), rest, capped)
	}
	if owed[0] != 10 || owed[len(owed)-1] != 10*MaxCatchUp {
		t.Fatalf("owed %d..%d", owed[0], owed[len(owed)-1])
	}
}

// MISFIRE once finds the latest missed time of a long downtime without
// walking all of them, and respects END.
func TestOwedOnceLongDowntime(t *testing.T) {
	s := every10(t, 0)
	if owed, _, _ := s.Owed(1e12+5, MisfireOnce); !slices.Equal(owed, []int64{1e12}) {
		t.Fatalf("owed %v", owed)
	}
	s.St.End = 500
	if owed, _, _ := s.Owed(1e12+5, MisfireOnce); !slices.Equal(owed, []int64{500}) {
		t.Fatalf("with END: owed %v", owed)
	}
}

func TestReplacesKeepsAnchorOfSameSpec(t *testing.T) {
	old := Rec{Every: 10, Since: 5, Last: 45, Count: 4}
	same := Rec{Every: 10, Since: 100}
	same.Replaces(&old)
	if same.Since != 5 || same.Last != 45 || same.Count != 4 {
		t.Fatalf("same spec: %+v", same)
	}
	other := Rec{Every: 20, Since: 100}
	other.Replaces(&old)
	if other.Since != 100 || other.Last != 45 || other.Count != 4 {
		t.Fatalf("new spec: %+v", other)
	}
}

func TestTablePutSortedList(t *testing.T) {
	var tb Table
	for _, k := range []Key{{"q", "b"}, {"p", "z"}, {"q", "a"}} {
		if old := tb.Put(&Sched{Key: k, St: Rec{Every: 1000}, Next: -1}); old != nil {
			t.Fatalf("put %v replaced %v", k, old.Key)
		}
	}
	first := tb.Get(Key{"q", "a"})
	repl := &Sched{Key: Key{"q", "a"}, St: Rec{Every: 5}, Next: 7}
	if old := tb.Put(repl); old != first {
		t.Fatal("a put of the same key did not return the one replaced")
	}
	if tb.ByRef(first.Ref) != nil || tb.ByRef(repl.Ref) != repl {
		t.Fatal("the replaced schedule's ref still finds it")
	}
	var keys []Key
	for _, s := range tb.Sorted() {
		keys = append(keys, s.Key)
	}
	if !slices.Equal(keys, []Key{{"p", "z"}, {"q", "a"}, {"q", "b"}}) {
		t.Fatalf("sorted %v", keys)
	}
	l := tb.List([]byte("q"), false)
	if len(l) != 2 || string(l[0].Name) != "a" || l[0].Spec != "EVERY 5" || l[0].Next != 7 || l[0].Last != -1 ||
		l[0].Misfire != "skip" {
		t.Fatalf("list %+v", l)
	}
	if len(tb.List(nil, true)) != 3 {
		t.Fatal("list all")
	}
	ref := repl.Ref
	tb.Reset()
	if tb.Get(Key{"q", "a"}) != nil {
		t.Fatal("reset kept a schedule")
	}
	if s := (&Sched{Key: Key{"q", "a"}}); tb.Put(s) != nil || s.Ref <= ref {
		t.Fatalf("a ref after reset (%d) is not new (last %d)", s.Ref, ref)
	}
}

func TestFireID(t *testing.T) {
	if got := string(FireID([]byte("tick"), 946684800000)); got != "tick:946684800000" {
		t.Fatal(got)
	}
}

func TestNewRec(t *testing.T) {
	if _, _, err := NewRec("", "", 1000, MisfireSkip, 2000, 1000); err == nil || err.Error() != "END is before START" {
		t.Fatalf("END before START: %v", err)
	}
	r, spec, err := NewRec("0 * * * *", "Europe/Berlin", 1000, MisfireAll, 0, 0)
	if err != nil || spec.Period() != 1000 || r.Expr != nil || r.Zone != nil || r.Text() != "EVERY 1000" {
		t.Fatalf("EVERY keeps a cron expression: %+v, %v", r, err)
	}
	r, _, err = NewRec("0 * * * *", "Europe/Berlin", 0, MisfireOnce, 0, 0)
	if err != nil || r.Text() != "CRON 0 * * * * TZ Europe/Berlin" || r.Misfire != MisfireOnce {
		t.Fatalf("cron: %+v, %v", r, err)
	}
}

func TestNewSchedCopiesAndParses(t *testing.T) {
	buf := []byte("0 * * * *|Europe/Berlin|payload")
	st := Rec{Expr: buf[:9], Zone: buf[10:23]}
	s, err := NewSched(Key{"q", "s"}, &st, buf[24:], 100, -1, nil)
	if err != nil || s.Spec == nil || s.Next != -1 || s.DeadLetter != nil {
		t.Fatalf("%+v, %v", s, err)
	}
	copy(buf, "XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX")
	if s.St.Text() != "CRON 0 * * * * TZ Europe/Berlin" || string(s.Payload) != "payload" {
		t.Fatalf("the schedule aliases its record: %q %q", s.St.Text(), s.Payload)
	}
	bad := Rec{Expr: []byte("0 * * * *"), Zone: []byte("No/Such_Zone")}
	if s, err := NewSched(Key{"q", "bad"}, &bad, nil, 0, 0, nil); err == nil || s == nil || s.Spec != nil {
		t.Fatalf("a spec that does not parse: %+v, %v", s, err)
	}
}
