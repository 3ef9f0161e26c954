package wheel

import (
	"testing"
	"time"
)

// A bucket fired out of seq order is sorted with its keys read once, in a
// buffer kept for the next fire, unless the bucket was huge: one burst
// must not pin its buffer for the wheel's life.
func TestSortBufferKeptOnlyWhenSmall(t *testing.T) {
	for _, n := range []int{100, maxKeptKeys + 1} {
		w := New(1, 0)
		// Added in falling seq for one due time: the bucket fires unsorted.
		for i := range n {
			w.Add(uint32(i), 5, uint64(n-i))
		}
		got := w.Advance(5, nil)
		if len(got) != n {
			t.Fatalf("n=%d: fired %d", n, len(got))
		}
		for i, h := range got {
			if h != uint32(n-1-i) {
				t.Fatalf("n=%d: position %d holds %d, want %d (seq order)", n, i, h, n-1-i)
			}
		}
		if kept := w.keys != nil; kept != (n <= maxKeptKeys) {
			t.Errorf("n=%d: buffer kept %v (cap %d)", n, kept, cap(w.keys))
		}
		w.Free()
	}
}

// Entries that waited on level 1 for a tick were added before every entry
// Add filed on level 0 for it, so the cascade and the drain put them ahead
// of those (pushArr): the bucket fires in seq order with no sort. Here
// 3000 entries for four ticks wait on level 1, interleaved, while direct
// adds for the same ticks arrive before, between and after the drain's
// slices, the clock moving every tick as the engine's does.
func TestMovedEntriesGoAheadOfDirectAdds(t *testing.T) {
	for _, drain := range []bool{true, false} {
		w := New(1, 0)
		w.noDrain = !drain
		var seq uint64
		h := uint32(0)
		add := func(due int64) {
			seq++
			h++
			if !w.Add(h, due, seq) {
				t.Fatalf("Add(%d, %d) refused", h, due)
			}
		}
		for i := range 3000 {
			add(2000 + int64(i%4)) // level 1: the ticks are 1,024 or more away
		}
		var fired []uint32
		for now := int64(1); now <= 2003; now++ {
			if now >= 980 && now <= 2000 && now%3 == 0 {
				for d := range int64(4) {
					add(2000 + d) // level 0: within 1,024 ticks
				}
			}
			fired = w.Advance(now, fired)
		}
		if len(fired) != int(h) {
			t.Fatalf("drain=%v: fired %d of %d", drain, len(fired), h)
		}
		for i := 1; i < len(fired); i++ {
			a, b := fired[i-1], fired[i]
			if w.LastDue(a) > w.LastDue(b) || w.LastDue(a) == w.LastDue(b) && a > b { // handle order is seq order here
				t.Fatalf("drain=%v: %d (due %d) fired before %d (due %d)", drain, a, w.LastDue(a), b, w.LastDue(b))
			}
		}
		if w.sorts != 0 {
			t.Errorf("drain=%v: %d buckets had to be sorted, want none", drain, w.sorts)
		}
		w.Free()
	}
}

// Entries moved down ahead of time keep their place when one of them is
// removed, or fired and its handle reused in another tick: the bucket still
// fires the rest in order.
func TestMovedTailRemovedOrReused(t *testing.T) {
	w := New(1, 0)
	const n = 3000 // the drain moves 1024 a tick: three slices
	for h := uint32(1); h <= n; h++ {
		w.Add(h, 2000, uint64(h)) // level 1
	}
	w.Advance(980, nil) // the drain's first slice, 1..1024, which fit level 0 from here
	if b := w.arr0[2000&fineMask]; len(b.mv) != 1024 || b.mv[1023] != 1024 {
		t.Fatalf("moved down %d, want 1..1024", len(b.mv))
	}
	w.Remove(1024)
	w.Add(1024, 40_000, 1024) // reused far off, in another tick
	w.Remove(7)
	fired := w.Advance(2000, nil)
	if len(fired) != n-2 || w.Len() != 1 {
		t.Fatalf("fired %d, %d left; want %d and 1", len(fired), w.Len(), n-2)
	}
	for i := 1; i < len(fired); i++ {
		if fired[i-1] >= fired[i] {
			t.Fatalf("%d fired before %d", fired[i-1], fired[i])
		}
	}
}

// When level-0 buckets were lists, pushMoved spliced a moved entry after
// the last one moved into its bucket, and remembered that one (w.moved)
// past the bucket's tick. The handle it names can be removed,
// reused for the same slot's tick a rotation later and added while that
// tick is still a ring (64 ticks then, 1,024 now) or more away, so to a
// level-1 bucket. When that
// bucket cascades, the entry moved before it must not be spliced after it:
// the splice lands in the list being walked, and two entries were relinked
// after each other for ever (a server hung in cascade -> relink).
func TestMovedEntryOfAnEarlierRotationIsNotTrusted(t *testing.T) {
	for _, drain := range []bool{true, false} {
		w := New(1, 0)
		w.noDrain = !drain
		const a, b, c = 1, 2, 3
		w.Add(a, 1100, 1) // level 1; moved down to slot 76 at tick 1024 at the latest
		fired := w.Advance(1030, nil)
		if !w.Remove(a) || len(fired) != 0 {
			t.Fatalf("drain=%v: a not pending at 1030 (fired %v)", drain, fired)
		}
		fired = w.Advance(1101, fired)
		w.Add(b, 3148, 2) // tick 3148 is slot 76 again, 2046 ticks away: level 1
		w.Add(a, 3148, 3) // the remembered handle, reused for the same slot
		fired = w.Advance(2130, fired)
		w.Add(c, 3148, 4) // 1017 ticks away: level 0, slot 76, occupied now
		done := make(chan []uint32)
		go func() { done <- w.Advance(3150, fired) }()
		select {
		case fired = <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("drain=%v: Advance did not return (a cycle in a bucket list)", drain)
		}
		if len(fired) != 3 || w.Len() != 0 {
			t.Fatalf("drain=%v: fired %v, %d left; want the 3 jobs due at 3148", drain, fired, w.Len())
		}
		got := map[uint32]bool{}
		for _, h := range fired {
			got[h] = true
		}
		if !got[a] || !got[b] || !got[c] {
			t.Fatalf("drain=%v: fired %v, want a, b and c once each", drain, fired)
		}
		for i := 1; i < len(fired); i++ {
			if w.seq(fired[i-1]) > w.seq(fired[i]) {
				t.Fatalf("drain=%v: fired %v out of seq order", drain, fired)
			}
		}
	}
}
