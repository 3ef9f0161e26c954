package wheel

import (
	"math"
	"slices"
	"testing"
	"unsafe"
)

const (
	sec  = int64(1000)
	hour = 3600 * sec
	day  = 24 * hour
	year = 365 * day
)

// advanceAll advances w to now and returns what fired.
func advanceAll(w *Wheel, now int64) []uint32 { return w.Advance(now, nil) }

func TestBasics(t *testing.T) {
	w := New(1, 1000)
	if !w.Add(1, 6000, 1) {
		t.Fatal("Add(1) = false for a future due time")
	}
	if w.Len() != 1 || !w.Contains(1) {
		t.Fatalf("Len %d Contains %v after one add", w.Len(), w.Contains(1))
	}
	if d, ok := w.Due(1); !ok || d != 6000 {
		t.Fatalf("Due(1) = %d, %v", d, ok)
	}
	// Handles never used, inside and beyond the slab.
	for _, h := range []uint32{0, 2, 999, math.MaxUint32} {
		if w.Remove(h) || w.Contains(h) {
			t.Fatalf("handle %d: Remove or Contains true for an unknown handle", h)
		}
		if _, ok := w.Due(h); ok {
			t.Fatalf("Due(%d) ok for an unknown handle", h)
		}
	}
	if !w.Remove(1) {
		t.Fatal("Remove(1) = false")
	}
	if w.Remove(1) || w.Contains(1) || w.Len() != 0 {
		t.Fatal("handle still there after Remove")
	}
	if got := advanceAll(w, 10000); len(got) != 0 {
		t.Fatalf("removed handle fired: %v", got)
	}
	if w.Now() != 10000 {
		t.Fatalf("Now() = %d", w.Now())
	}
}

func TestAddAlreadyDue(t *testing.T) {
	for _, tick := range []int64{1, 10} {
		w := New(tick, 500)
		for _, due := range []int64{500, 499, 0, -1, math.MinInt64} {
			if w.Add(7, due, 1) {
				t.Errorf("tick %d: Add(due=%d) at now=500 = true, want false", tick, due)
			}
		}
		if w.Len() != 0 || w.Contains(7) {
			t.Fatalf("tick %d: a rejected Add scheduled something", tick)
		}
		// 501 is in the tick that ends at 509 (tick 10): in the future, and
		// it must wait for the end of its tick.
		if !w.Add(7, 501, 1) {
			t.Fatalf("tick %d: Add(due=501) at now=500 = false", tick)
		}
		want := lastMs(501, tick)
		if got := advanceAll(w, want-1); len(got) != 0 {
			t.Fatalf("tick %d: fired at %d, before %d", tick, want-1, want)
		}
		if got := advanceAll(w, want); !slices.Equal(got, []uint32{7}) {
			t.Fatalf("tick %d: Advance(%d) = %v, want [7]", tick, want, got)
		}
	}
}

func TestAddReservedHandlePanics(t *testing.T) {
	w := New(1, 0)
	defer func() {
		if recover() == nil {
			t.Fatal("Add(math.MaxUint32) did not panic")
		}
	}()
	w.Add(math.MaxUint32, 10, 1)
}

// TestAddEndTagHandlePanics: handles from 2^31 on would read as list end
// marks, so Add refuses them. (MaxHandle itself is not added here: its slab
// would be 2^17 mappings.)
func TestAddEndTagHandlePanics(t *testing.T) {
	w := New(1, 0)
	defer func() {
		if recover() == nil {
			t.Fatal("Add(MaxHandle+1) did not panic")
		}
	}()
	w.Add(MaxHandle+1, 10, 1)
}

// levelOfHandle returns the level of scheduled h: on an array level from
// its link, above from the end mark of its bucket list. O(bucket).
func (w *Wheel) levelOfHandle(h uint32) int {
	if n := w.node(h); n.next&arrTag == arrTag {
		return int(n.next &^ arrTag)
	}
	for n := w.node(h); ; n = w.node(n.next) {
		if n.next&endTag != 0 {
			return int(n.next&^endTag-1) >> slotBits
		}
	}
}

func TestAddScheduledPanics(t *testing.T) {
	w := New(1, 0)
	w.Add(3, 10, 1)
	defer func() {
		if recover() == nil {
			t.Fatal("second Add of a scheduled handle did not panic")
		}
	}()
	w.Add(3, 20, 2)
}

func TestNewPanicsOnBadTick(t *testing.T) {
	for _, tick := range []int64{0, -1, maxTick + 1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%d, 0) did not panic", tick)
				}
			}()
			New(tick, 0)
		}()
	}
}

// TestFireOrder: one Advance returns (due, seq) order, whatever the add
// order and whichever level each entry passed through.
func TestFireOrder(t *testing.T) {
	w := New(1, 0)
	// Added in scrambled order; 1..4 go through coarse levels first (added
	// early, far away), 5..7 are added to level 0 later with lower seq.
	adds := []struct {
		h   uint32
		due int64
		seq uint64
	}{
		{1, 5000, 40},
		{2, 5000, 10},
		{3, 4999, 99},
		{4, 300_000, 1},
	}
	for _, a := range adds {
		w.Add(a.h, a.due, a.seq)
	}
	advanceAll(w, 4990)
	w.Add(5, 5000, 20)
	w.Add(6, 5000, 5)
	w.Add(7, 4999, 100)
	got := advanceAll(w, 400_000)
	want := []uint32{3, 7, 6, 2, 5, 1, 4}
	if !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
}

// TestExpirationLargerThanWheel: due times far beyond level 0, and beyond
// several levels, fire on one jump that covers them all.
func TestExpirationLargerThanWheel(t *testing.T) {
	w := New(1, 0)
	dues := []int64{63, 64, 65, 4095, 4096, 4097, hour, day, year, 100 * year, 1 << 50}
	for i, d := range dues {
		w.Add(uint32(i), d, uint64(i))
	}
	got := advanceAll(w, 1<<51)
	if len(got) != len(dues) {
		t.Fatalf("fired %d of %d", len(got), len(dues))
	}
	for i, h := range got {
		if h != uint32(i) {
			t.Fatalf("fired %v, want in due order", got)
		}
	}
}

// TestLevelBoundaries: due times exactly at, just before and just after
// the edge of each level's span and each bucket's start fire exactly at
// their millisecond: not one before, not one after.
func TestLevelBoundaries(t *testing.T) {
	type tc struct {
		tick, now, due int64
	}
	var cases []tc
	for _, tick := range []int64{1, 7, 64} {
		for _, now := range []int64{0, 1, 62, 63, 64, 1023, 1024, 4095, 65535, 1_767_225_600_000} {
			for k := 1; k <= 6; k++ {
				span := tick << shiftOf(uint(k))
				// The edge of level k-1's reach from now, and bucket starts.
				for _, base := range []int64{now + span, now - mod(now, span) + span, now - mod(now, span) + 2*span} {
					for _, d := range []int64{-1, 0, 1} {
						if base+d > now {
							cases = append(cases, tc{tick, now, base + d})
						}
					}
				}
			}
		}
	}
	for _, c := range cases {
		w := New(c.tick, c.now)
		w.Add(1, c.due, 1)
		fire := lastMs(c.due, c.tick)
		// Walk there through every deadline, as the engine would.
		for {
			d, ok := w.NextDeadline()
			if !ok {
				t.Fatalf("%+v: wheel emptied before %d", c, fire)
			}
			if d > fire {
				t.Fatalf("%+v: NextDeadline %d is after the fire time %d", c, d, fire)
			}
			if got := advanceAll(w, d-1); len(got) != 0 {
				t.Fatalf("%+v: fired at %d, before its deadline %d", c, d-1, d)
			}
			if d == fire {
				break
			}
			if got := advanceAll(w, d); len(got) != 0 {
				t.Fatalf("%+v: fired at %d, want %d", c, d, fire)
			}
		}
		if got := advanceAll(w, fire); !slices.Equal(got, []uint32{1}) {
			t.Fatalf("%+v: Advance(%d) = %v, want [1]", c, fire, got)
		}
	}
}

// TestRemoveFromEveryLevel puts one handle on each level, checks where it
// landed, and removes them one by one.
func TestRemoveFromEveryLevel(t *testing.T) {
	w := New(1, 12345)
	const top = maxLevels - 1
	for lv := 0; lv <= top; lv++ {
		delta := int64(1) << shiftOf(uint(lv)) // lands on level lv
		if lv == 0 {
			delta = 5
		}
		w.Add(uint32(lv), w.Now()+delta+3, uint64(lv))
		if got := w.levelOfHandle(uint32(lv)); got != lv {
			t.Fatalf("delay %d landed on level %d, want %d", delta, got, lv)
		}
	}
	for lv := top; lv >= 0; lv-- {
		if !w.Remove(uint32(lv)) {
			t.Fatalf("Remove(level %d) = false", lv)
		}
		if w.Len() != lv {
			t.Fatalf("Len() = %d, want %d", w.Len(), lv)
		}
		if lv == 0 && w.fineSum != 0 {
			t.Fatal("level 0 still marked occupied after removing its entry")
		}
		for i := range w.levels {
			if i >= max(lv, 1) && w.levels[i].occupied != 0 {
				t.Fatalf("level %d still marked occupied after removing its entry", i)
			}
		}
	}
	if _, ok := w.NextDeadline(); ok {
		t.Fatal("NextDeadline ok on an empty wheel")
	}
	if got := advanceAll(w, maxTime); len(got) != 0 {
		t.Fatalf("removed handles fired: %v", got)
	}
}

// TestRemoveMiddleOfBucket unlinks head, middle and tail of one bucket.
func TestRemoveMiddleOfBucket(t *testing.T) {
	for _, order := range [][]uint32{{0, 1, 2, 3}, {1, 2}, {3}, {0}, {3, 0}} {
		w := New(1, 0)
		for h := range uint32(4) {
			w.Add(h, 100_000, uint64(h)) // all in one level-2 bucket
		}
		for _, h := range order {
			w.Remove(h)
		}
		var want []uint32
		for h := range uint32(4) {
			if !slices.Contains(order, h) {
				want = append(want, h)
			}
		}
		if got := advanceAll(w, 100_000); !slices.Equal(got, want) {
			t.Fatalf("removed %v: fired %v, want %v", order, got, want)
		}
	}
}

func TestReAdd(t *testing.T) {
	w := New(1, 0)
	w.Add(9, 1000, 1)
	w.Remove(9)
	if !w.Add(9, 2000, 2) {
		t.Fatal("re-Add after Remove = false")
	}
	if got := advanceAll(w, 1999); len(got) != 0 {
		t.Fatalf("fired at the old due time: %v", got)
	}
	if got := advanceAll(w, 2000); !slices.Equal(got, []uint32{9}) {
		t.Fatalf("Advance(2000) = %v", got)
	}
	// And again after it fired.
	if !w.Add(9, 2001, 3) {
		t.Fatal("re-Add after fire = false")
	}
	if got := advanceAll(w, 2001); !slices.Equal(got, []uint32{9}) {
		t.Fatalf("Advance(2001) = %v", got)
	}
}

func TestNextDeadline(t *testing.T) {
	w := New(1, 0)
	if _, ok := w.NextDeadline(); ok {
		t.Fatal("ok on an empty wheel")
	}
	w.Add(1, 50, 1)
	w.Add(2, 30, 2)
	w.Add(3, 10_000, 3)
	if d, ok := w.NextDeadline(); !ok || d != 30 {
		t.Fatalf("NextDeadline() = %d, %v, want 30 (level 0 is exact)", d, ok)
	}
	w.Remove(2)
	if d, _ := w.NextDeadline(); d != 50 {
		t.Fatalf("after removing the earliest: %d, want 50", d)
	}
	advanceAll(w, 50)
	// 10000 sits on level 2; its bucket [8192, 12288) must cascade first.
	// The deadline is the earliest instant anything there could fire.
	d, _ := w.NextDeadline()
	if d > 10_000 || d <= 50 {
		t.Fatalf("NextDeadline() = %d, want in (50, 10000]", d)
	}
	wakeups := 0
	for w.Len() > 0 {
		d, _ := w.NextDeadline()
		advanceAll(w, d)
		wakeups++
	}
	if w.Now() != 10_000 || wakeups > 3 {
		t.Fatalf("fired at %d after %d wake-ups, want 10000 after at most 3", w.Now(), wakeups)
	}
	// Tick > 1: the deadline is the tick's last millisecond.
	w = New(100, 0)
	w.Add(1, 250, 1)
	if d, _ := w.NextDeadline(); d != 299 {
		t.Fatalf("tick 100, due 250: NextDeadline() = %d, want 299", d)
	}
}

// TestBigJumps: a jump of years over a few entries visits buckets, not
// ticks; counting 1 ms ticks here would not finish.
func TestBigJumps(t *testing.T) {
	w := New(1, 0)
	w.Add(1, hour, 1)
	w.Add(2, 2*hour, 2)
	w.Add(3, 3*hour, 3)
	if got := advanceAll(w, 3*hour); !slices.Equal(got, []uint32{1, 2, 3}) {
		t.Fatalf("Advance(3h) = %v", got)
	}
	w.Add(4, 500*year, 4)
	if got := advanceAll(w, 499*year); len(got) != 0 {
		t.Fatalf("fired early: %v", got)
	}
	if got := advanceAll(w, 1<<60); !slices.Equal(got, []uint32{4}) {
		t.Fatalf("Advance(2^60) = %v", got)
	}
	// Empty wheel: a jump is O(1) and later adds are relative to the new clock.
	advanceAll(w, 1<<61)
	if !w.Add(5, 1<<61+1, 5) {
		t.Fatal("Add after a jump = false")
	}
	if got := advanceAll(w, 1<<61+1); !slices.Equal(got, []uint32{5}) {
		t.Fatalf("Advance = %v", got)
	}
}

// TestTickNeverEarly: with coarse ticks each handle fires at the last
// millisecond of its tick, found by stepping one millisecond at a time.
func TestTickNeverEarly(t *testing.T) {
	for _, tick := range []int64{2, 3, 10, 64, 100} {
		for _, start := range []int64{0, 5, -1003} {
			w := New(tick, start)
			fireAt := map[uint32]int64{}
			for h := range uint32(300) {
				due := start + 1 + int64(h)*int64(h)/3
				w.Add(h, due, uint64(h))
				fireAt[h] = lastMs(due, tick)
			}
			for now := start; w.Len() > 0; now++ {
				for _, h := range advanceAll(w, now) {
					if fireAt[h] != now {
						t.Fatalf("tick %d start %d: handle %d (due at %d) fired at %d, want %d",
							tick, start, h, w.node(h).due, now, fireAt[h])
					}
				}
			}
		}
	}
}

func TestClockNeverBackwards(t *testing.T) {
	w := New(1, 1000)
	w.Add(1, 1500, 1)
	advanceAll(w, 1200)
	if got := advanceAll(w, 1100); len(got) != 0 || w.Now() != 1200 {
		t.Fatalf("backwards Advance: fired %v, Now %d", got, w.Now())
	}
	if w.Add(2, 1150, 2) {
		t.Fatal("Add before the clock = true")
	}
}

// TestExtremeTimes: the clamped range's edges neither overflow nor fire early.
func TestExtremeTimes(t *testing.T) {
	for _, tick := range []int64{1, 1000, maxTick} {
		w := New(tick, 0)
		w.Add(1, maxTime, 1)
		w.Add(2, math.MaxInt64, 2) // "never": clamped, fires with maxTime
		w.Add(3, maxTime-1, 3)
		if got := advanceAll(w, maxTime-tick-1); len(got) != 0 {
			t.Fatalf("tick %d: fired early: %v", tick, got)
		}
		if d, _ := w.Due(2); d != math.MaxInt64 {
			t.Fatalf("tick %d: Due(2) = %d, want the value given", tick, d)
		}
		got := advanceAll(w, math.MaxInt64)
		if !slices.Equal(got, []uint32{3, 1, 2}) {
			t.Fatalf("tick %d: Advance(MaxInt64) = %v", tick, got)
		}
		if w.Add(4, math.MaxInt64, 4) {
			t.Fatalf("tick %d: Add at the end of time = true", tick)
		}
	}
	// Past the end of the range a future due time clamps into a tick that
	// has already completed: Add reports it as due.
	w := New(1, maxTime+5)
	if w.Add(1, maxTime+10, 1) || w.Len() != 0 {
		t.Fatal("Add beyond the range at the end of time scheduled something")
	}
	w = New(1, math.MinInt64)
	w.Add(1, minTime+5, 1)
	if got := advanceAll(w, minTime+5); !slices.Equal(got, []uint32{1}) {
		t.Fatalf("near minTime: %v", got)
	}
}

// TestZeroAllocs: steady-state Add, Remove and Advance allocate nothing.
func TestZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	w := New(1, 0)
	for h := range uint32(10_000) {
		w.Add(h, int64(h)*37%hour+1, uint64(h))
	}
	h := uint32(10_000)
	w.Add(h, 1, 0)
	w.Remove(h)
	due, seq := int64(2), uint64(1<<40)
	allocs := testing.AllocsPerRun(10_000, func() {
		due = due*7919%hour + 1
		seq++
		w.Add(h, due, seq)
		w.Remove(h)
	})
	if allocs != 0 {
		t.Fatalf("Add+Remove: %v allocs/op", allocs)
	}
	buf := make([]uint32, 0, 10_000)
	now := int64(0)
	step := func() {
		now += 997
		buf = w.Advance(now, buf[:0])
		for _, f := range buf {
			w.Add(f, now+hour-int64(f), seq) // re-add what fired; seq ties broken by due
		}
	}
	// Warm up: each of level 0's 1,024 buckets allocates its arrays the
	// first time it holds an entry, and keeps them.
	for range 5000 {
		step()
	}
	allocs = testing.AllocsPerRun(1000, step)
	if allocs != 0 {
		t.Fatalf("Advance+re-Add: %v allocs/op", allocs)
	}
	// Equal due times added against seq order take the sorting path.
	sorting := func() {
		for i := range uint32(8) {
			w.Add(20_000+i, now+1, seq-uint64(i))
		}
		now++
		buf = w.Advance(now, buf[:0])
		seq += 8
	}
	for range fineSize { // every level-0 bucket once: its arrays
		sorting()
	}
	allocs = testing.AllocsPerRun(1000, sorting)
	if allocs != 0 {
		t.Fatalf("Advance with a sort: %v allocs/op", allocs)
	}
}

// TestNodeSize pins the per-job cost the memory budget assumes.
func TestNodeSize(t *testing.T) {
	if s := unsafe.Sizeof(node{}); s != 16 {
		t.Fatalf("node is %d bytes, want 16", s)
	}
}

// TestCascadeHangRegression is the smallest case the integration tests found
// in an earlier version: Advance never returned (cascade -> link looped).
func TestCascadeHangRegression(t *testing.T) {
	w := New(1, 1795292902171)
	w.Add(1, 1795292903296, 1)
	got := w.Advance(1795292905225, nil)
	if len(got) != 1 || got[0] != 1 {
		t.Fatalf("Advance returned %v, want [1]", got)
	}
}

func TestFreeEmptiesAndStaysUsable(t *testing.T) {
	w := New(1, 0)
	for h := range uint32(3 * nodePage) {
		w.Add(h, int64(h%5000)+1, uint64(h))
	}
	w.Free()
	if w.Len() != 0 || w.Contains(5) {
		t.Fatalf("after Free: Len %d, Contains(5) %v", w.Len(), w.Contains(5))
	}
	if _, ok := w.NextDeadline(); ok {
		t.Fatal("after Free: a deadline remains")
	}
	if got := w.Advance(10_000, nil); len(got) != 0 {
		t.Fatalf("after Free: %d handles fired", len(got))
	}
	if !w.Add(7, 20_000, 1) {
		t.Fatal("Add after Free refused")
	}
	if got := w.Advance(20_000, nil); len(got) != 1 || got[0] != 7 {
		t.Fatalf("after Free and Add: fired %v, want [7]", got)
	}
}

// TestLevel0ChurnDoesNotGrowItsBucket: a level-0 bucket is an array, and a
// removed entry leaves a mark in it until the bucket fires. Adding and
// removing the newest entry again and again (a job added and cancelled
// within the tick's millisecond) reuses its place; removing from the middle
// leaves a mark that fire skips; the last entry removed frees the bucket.
func TestLevel0ChurnDoesNotGrowItsBucket(t *testing.T) {
	w := New(1, 0)
	w.Add(1, 50, 1)
	for i := range uint64(10_000) {
		w.Add(2, 50, 2+i)
		w.Remove(2)
	}
	if b := w.arr0[50]; len(b.dr) != 1 || b.live != 1 {
		t.Fatalf("after churn the bucket holds %d entries (%d live), want 1", len(b.dr), b.live)
	}
	for h := uint32(2); h <= 5; h++ {
		w.Add(h, 50, uint64(100+h))
	}
	w.Remove(3) // the middle: a mark
	if got := w.Advance(50, nil); !slices.Equal(got, []uint32{1, 2, 4, 5}) {
		t.Fatalf("fired %v, want [1 2 4 5]", got)
	}
	w.Add(6, 60, 200)
	w.Remove(6)
	if w.fine[0] != 0 || w.fineSum != 0 || w.Len() != 0 {
		t.Fatalf("an emptied bucket is still occupied (%b), %d left", w.fine[0], w.Len())
	}
	if _, ok := w.NextDeadline(); ok {
		t.Fatal("NextDeadline ok on an empty wheel")
	}
}

// TestFineRingWrap: level 0's next non-empty bucket is found across its
// words and around the ring, including a bucket before the clock's in the
// clock's own word, a whole turn ahead (nextFine's last case).
func TestFineRingWrap(t *testing.T) {
	for _, c := range []struct {
		now, due int64
	}{
		{9, 1029},      // slot 5, in the clock's word (slot 10), 1,019 ticks ahead
		{9, 11},        // the clock's word, after the clock
		{9, 700},       // a later word
		{1000, 1030},   // past the ring's end: word 0 after the clock's last word
		{-3, 1000},     // a clock before the epoch
		{1023, 2046},   // the last slot to the one before it
		{5_000, 5_001}, // the next tick
	} {
		w := New(1, c.now)
		if !w.Add(1, c.due, 1) {
			t.Fatalf("%+v: Add refused", c)
		}
		if lv := w.levelOfHandle(1); lv != 0 {
			t.Fatalf("%+v: on level %d, want 0", c, lv)
		}
		if d, ok := w.NextDeadline(); !ok || d != c.due {
			t.Fatalf("%+v: NextDeadline %d, %v; want %d", c, d, ok, c.due)
		}
		if got := w.Advance(c.due-1, nil); len(got) != 0 {
			t.Fatalf("%+v: fired at %d", c, c.due-1)
		}
		if got := w.Advance(c.due, nil); !slices.Equal(got, []uint32{1}) {
			t.Fatalf("%+v: Advance(%d) = %v", c, c.due, got)
		}
	}
}
