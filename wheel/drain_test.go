package wheel

import (
	"math/bits"
	"math/rand/v2"
	"testing"
)

// advanceWork advances x to now and returns the entries cascaded or
// drained by that one Advance.
func advanceWork(x *harness, now int64) int {
	before := x.w.work
	x.advance(now)
	return x.w.work - before
}

// TestDrainSpreadsTheCascade is the rivals race's shape: 10k adds/s, due 1 ms
// to 10 s later, the clock moving every millisecond, against the reference
// model (every fire exact, in (due, seq) order, never early). Without
// draining, a level-1 bucket's whole second of entries moves in the
// Advance that reaches it; with it, no Advance moves more than a slice per level
// plus the few entries still too far for a finer level.
func TestDrainSpreadsTheCascade(t *testing.T) {
	run := func(noDrain bool) (maxWork, total int) {
		rng := rand.New(rand.NewPCG(1, 2))
		x := newHarness(t, 1, 0, true)
		x.w.noDrain = noDrain
		var h uint32
		free := []uint32{}
		end := int64(20_000)
		if raceEnabled {
			end = 9_000 // past the first level-2 buckets, a tenth of the time
		}
		for now := int64(1); now <= end; now++ {
			for range 10 {
				var hh uint32
				if n := len(free); n > 0 && rng.IntN(2) == 0 {
					hh, free = free[n-1], free[:n-1]
				} else {
					h++
					hh = h
				}
				// Due times in whole 10 ms steps give ties, and the
				// shuffled seqs check that ties fire in seq order.
				due := now + 1 + int64(rng.IntN(1000))*10
				x.add(hh, due, x.nextSeq(rng.Uint32()))
			}
			if now%7 == 0 { // cancels, and a pass's cursor now and then
				victim := uint32(1 + rng.IntN(int(h)))
				if now%49 == 0 && x.w.draining != 0 {
					for lv := 1; lv < len(x.w.levels); lv++ {
						if x.w.draining&(1<<lv) != 0 {
							victim = x.w.passes[lv].cur
						}
					}
				}
				if x.w.Contains(victim) {
					x.remove(victim)
					free = append(free, victim)
				}
			}
			w := advanceWork(x, now)
			free = append(free, x.got...)
			maxWork = max(maxWork, w)
			total += w
		}
		for x.w.Len() > 0 {
			x.advanceToDeadline(false)
		}
		return maxWork, total
	}
	oldMax, oldTotal := run(true)
	newMax, newTotal := run(false)
	t.Logf("entries moved per Advance: at the bucket's start max %d (total %d); drained max %d (total %d)",
		oldMax, oldTotal, newMax, newTotal)
	if limit := 2*drainSlice + 1000; newMax > limit {
		t.Errorf("an Advance moved %d entries, want at most %d", newMax, limit)
	}
	if oldMax < 4*newMax {
		t.Errorf("cascading at the start moved at most %d per Advance, draining %d: the test no longer shows big cascades", oldMax, newMax)
	}
	if newTotal > oldTotal*5/4 {
		t.Errorf("draining visited %d entries in all against %d: passes revisit too much", newTotal, oldTotal)
	}
}

// TestDrainFollowingNextDeadline: one big level-2 bucket, the clock moved
// only to NextDeadline as the engine's timer does. The drain must ask for
// the ticks it needs, the work per Advance stays bounded, and everything
// fires exactly when the reference says.
func TestDrainFollowingNextDeadline(t *testing.T) {
	const n = 100_000
	rng := rand.New(rand.NewPCG(3, 4))
	x := newHarness(t, 1, 0, true)
	for h := uint32(1); h <= n; h++ {
		x.add(h, 4096+int64(rng.IntN(4096)), x.nextSeq(rng.Uint32()>>20))
	}
	maxWork, wakeups := 0, 0
	for x.w.Len() > 0 {
		d, _ := x.w.NextDeadline()
		maxWork = max(maxWork, advanceWork(x, d))
		wakeups++
	}
	if x.fired != n {
		t.Fatalf("fired %d of %d", x.fired, n)
	}
	// The cascade left at the bucket's start is its last sub-bucket, 1/64.
	if limit := 2*drainSlice + n/32; maxWork > limit {
		t.Errorf("an Advance moved %d entries, want at most %d", maxWork, limit)
	}
	if wakeups > 4096+300 {
		t.Errorf("%d wake-ups for 4096 ms of due times", wakeups)
	}
	t.Logf("max moved per Advance %d, %d wake-ups", maxWork, wakeups)
}

// TestDrainCursorRemoved: removing the entry a pass is about to look at,
// including the bucket's last, hands the pass on or ends it; nothing is
// lost or moved wrongly.
func TestDrainCursorRemoved(t *testing.T) {
	x := newHarness(t, 1, 0, true)
	for h := uint32(1); h <= 5000; h++ {
		x.add(h, 65536+int64(h%60000)*13%65536, uint64(h))
	}
	// Reach the window of the level-2 bucket [65536, 131072): one slice done.
	x.advance(65536 - ahead(2)<<shiftOf(1))
	if x.w.draining&(1<<2) == 0 {
		t.Fatal("no pass under way on level 2")
	}
	for range 100 {
		if x.w.draining&(1<<2) == 0 {
			break
		}
		x.remove(x.w.passes[2].cur)
	}
	// The tail: the pass ends when its cursor's bucket has nothing after it.
	l := &x.w.levels[2]
	tail := l.tail[1]
	x.w.passes[2].cur = tail
	x.remove(tail)
	if x.w.draining&(1<<2) != 0 {
		t.Fatal("pass still under way after its cursor, the tail, was removed")
	}
	for x.w.Len() > 0 {
		x.advanceToDeadline(true)
		x.advanceToDeadline(false)
	}
}

// TestDrainOddTicks: passes with a tick that is not a power of two and a
// clock before the epoch (floor division, negative positions), against the
// reference, moving the clock by uneven steps and to NextDeadline.
func TestDrainOddTicks(t *testing.T) {
	for _, c := range []struct{ tick, start int64 }{{7, -3_000_000}, {3, 12_345}, {1, -500_000}} {
		rng := rand.New(rand.NewPCG(uint64(c.tick), 9))
		x := newHarness(t, c.tick, c.start, true)
		var h uint32
		drained := false
		for now := c.start; now < c.start+60_000*c.tick; now += 1 + rng.Int64N(3*c.tick) {
			for range 3 {
				h++
				x.add(h, now+1+rng.Int64N(20_000*c.tick), x.nextSeq(rng.Uint32()>>28))
			}
			if rng.IntN(50) == 0 && x.w.draining != 0 {
				x.remove(x.w.passes[bits.TrailingZeros16(x.w.draining)].cur)
			}
			drained = drained || x.w.draining != 0
			if rng.IntN(4) == 0 {
				x.advanceToDeadline(true)
			} else {
				x.advance(now)
			}
		}
		for x.w.Len() > 0 {
			x.advanceToDeadline(false)
		}
		if !drained {
			t.Errorf("tick %d from %d: no pass ever ran", c.tick, c.start)
		}
	}
}

// TestDrainCrowdedArrayBucket: a million-sized second of delays, added at
// once, is one level-1 bucket; its pass moves it in even slices over the
// 64 ticks before its start, and the cascade at the start moves only what
// did not fit level 0 yet when the pass reached it. Every entry fires at
// its tick, in order (the reference).
func TestDrainCrowdedArrayBucket(t *testing.T) {
	n := uint32(200_000)
	if testing.Short() || raceEnabled {
		n /= 4
	}
	rng := rand.New(rand.NewPCG(5, 6))
	x := newHarness(t, 1, 0, true)
	for h := uint32(1); h <= n; h++ {
		x.add(h, 2048+rng.Int64N(1024), uint64(h)) // level 1's bucket [2048, 3072)
	}
	maxWork := 0
	for x.w.Len() > 0 {
		d, _ := x.w.NextDeadline()
		maxWork = max(maxWork, advanceWork(x, d))
	}
	if x.fired != int(n) {
		t.Fatalf("fired %d of %d", x.fired, n)
	}
	// A slice is n/64 at most; the cascade about 3% of n.
	if limit := int(n/16 + n/64); maxWork > limit {
		t.Errorf("an Advance moved %d entries, want at most %d", maxWork, limit)
	}
	t.Logf("max moved per Advance %d of %d", maxWork, n)
}
