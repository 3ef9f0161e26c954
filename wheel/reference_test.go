package wheel

import (
	"cmp"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// reference is the obviously correct model the wheel is checked against:
// a slice sorted by (due, seq). Because lastMs is monotone in due, the
// handles that one Advance fires are always a prefix of it.
type reference struct {
	tick    int64
	now     int64
	entries []refEntry // sorted by (due, seq)
	due     map[uint32]refEntry
}

type refEntry struct {
	h   uint32
	due int64
	seq uint64
}

func compareRef(a, b refEntry) int {
	if c := cmp.Compare(a.due, b.due); c != 0 {
		return c
	}
	return cmp.Compare(a.seq, b.seq)
}

func newReference(tick, now int64) *reference {
	return &reference{tick: tick, now: now, due: make(map[uint32]refEntry)}
}

// lastMs is the firing contract written out plainly: the last millisecond
// of the tick that contains d. Dues beyond the documented range are clamped
// exactly as the package documents.
func lastMs(d, tick int64) int64 {
	d = min(max(d, minTime), maxTime)
	q := d / tick
	if d%tick < 0 {
		q--
	}
	return q*tick + tick - 1
}

func (r *reference) add(h uint32, due int64, seq uint64) bool {
	// The second condition only matters beyond the documented time range,
	// where a clamped due time can fall in a tick that already completed.
	if due <= r.now || lastMs(due, r.tick) <= r.now {
		return false
	}
	e := refEntry{h, due, seq}
	i, _ := slices.BinarySearchFunc(r.entries, e, compareRef)
	r.entries = slices.Insert(r.entries, i, e)
	r.due[h] = e
	return true
}

func (r *reference) remove(h uint32) bool {
	e, ok := r.due[h]
	if !ok {
		return false
	}
	i, found := slices.BinarySearchFunc(r.entries, e, compareRef)
	if !found || r.entries[i].h != h {
		panic("reference: lost an entry")
	}
	r.entries = slices.Delete(r.entries, i, i+1)
	delete(r.due, h)
	return true
}

func (r *reference) advance(now int64, dst []uint32) []uint32 {
	if now <= r.now {
		return dst
	}
	r.now = now
	n := 0
	for n < len(r.entries) && lastMs(r.entries[n].due, r.tick) <= now {
		dst = append(dst, r.entries[n].h)
		delete(r.due, r.entries[n].h)
		n++
	}
	r.entries = slices.Delete(r.entries, 0, n)
	return dst
}

// harness applies each operation to the wheel and the reference and fails
// on the first difference.
type harness struct {
	t      testing.TB
	w      *Wheel
	r      *reference
	seq    uint64
	got    []uint32
	want   []uint32
	ops    int
	fired  int
	maxLen int
	// seqs is the owner's copy of each handle's seq, which an ordered
	// wheel (NewOrdered) reads instead of storing it.
	seqs map[uint32]uint64
}

// newHarness drives a wheel made by New or, with ordered, by NewOrdered,
// the engine's kind.
func newHarness(t testing.TB, tick, now int64, ordered bool) *harness {
	x := &harness{t: t, r: newReference(tick, now), seqs: make(map[uint32]uint64)}
	if ordered {
		x.w = NewOrdered(tick, now, func(h uint32) uint64 {
			s, ok := x.seqs[h]
			if !ok {
				t.Fatalf("the wheel asked for the seq of handle %d, never added", h)
			}
			return s
		})
	} else {
		x.w = New(tick, now)
	}
	return x
}

// nextSeq returns unique sequence numbers; with shuffle their order no
// longer follows add order, which checks that ordering is by seq and not
// by arrival.
func (x *harness) nextSeq(shuffle uint32) uint64 {
	x.seq++
	return uint64(shuffle)<<32 | x.seq
}

func (x *harness) add(h uint32, due int64, seq uint64) {
	x.ops++
	if _, ok := x.r.due[h]; ok || x.w.Contains(h) {
		if !x.w.Contains(h) {
			x.t.Fatalf("op %d: Contains(%d) = false, reference has it", x.ops, h)
		}
		return // the wheel panics on a double add; tested separately
	}
	want := x.r.add(h, due, seq)
	x.seqs[h] = seq
	if got := x.w.Add(h, due, seq); got != want {
		x.t.Fatalf("op %d: Add(%d, due=%d, seq=%d) at now=%d (tick %d) = %v, want %v",
			x.ops, h, due, seq, x.r.now, x.r.tick, got, want)
	}
	x.checkHandle(h)
	x.checkLen()
}

func (x *harness) remove(h uint32) {
	x.ops++
	want := x.r.remove(h)
	if got := x.w.Remove(h); got != want {
		x.t.Fatalf("op %d: Remove(%d) = %v, want %v", x.ops, h, got, want)
	}
	x.checkHandle(h)
	x.checkLen()
}

func (x *harness) advance(now int64) {
	x.ops++
	x.checkDeadline()
	x.got = x.w.Advance(now, x.got[:0])
	x.want = x.r.advance(now, x.want[:0])
	if !slices.Equal(x.got, x.want) {
		x.t.Fatalf("op %d: Advance(%d) (tick %d) fired %v, want %v", x.ops, now, x.r.tick,
			x.describe(x.got), x.describe(x.want))
	}
	for _, h := range x.got {
		if x.w.Contains(h) {
			x.t.Fatalf("op %d: fired handle %d still scheduled", x.ops, h)
		}
	}
	if x.w.Now() != x.r.now {
		x.t.Fatalf("op %d: Now() = %d, want %d", x.ops, x.w.Now(), x.r.now)
	}
	x.fired += len(x.got)
	x.checkLen()
	x.checkDeadline()
}

// advanceToDeadline follows NextDeadline as the engine does, checking that
// one millisecond earlier fires nothing.
func (x *harness) advanceToDeadline(early bool) {
	d, ok := x.w.NextDeadline()
	if !ok {
		return
	}
	if early {
		d--
	}
	x.advance(d)
	if early && len(x.got) != 0 {
		x.t.Fatalf("op %d: Advance(NextDeadline-1) fired %v", x.ops, x.got)
	}
}

func (x *harness) describe(hs []uint32) []refEntry {
	out := make([]refEntry, 0, len(hs))
	for _, h := range hs {
		e := refEntry{h: h}
		if h < x.w.cap {
			e.due, e.seq = x.w.node(h).due, x.w.seq(h)
		}
		out = append(out, e)
	}
	return out
}

func (x *harness) checkLen() {
	if x.w.Len() != len(x.r.entries) {
		x.t.Fatalf("op %d: Len() = %d, want %d", x.ops, x.w.Len(), len(x.r.entries))
	}
	x.maxLen = max(x.maxLen, len(x.r.entries))
}

func (x *harness) checkHandle(h uint32) {
	e, want := x.r.due[h]
	if got := x.w.Contains(h); got != want {
		x.t.Fatalf("op %d: Contains(%d) = %v, want %v", x.ops, h, got, want)
	}
	d, ok := x.w.Due(h)
	if ok != want || d != e.due {
		x.t.Fatalf("op %d: Due(%d) = %d, %v, want %d, %v", x.ops, h, d, ok, e.due, want)
	}
}

// checkDeadline: ok iff non-empty; strictly after Now; never after the
// first fire the reference predicts.
func (x *harness) checkDeadline() {
	d, ok := x.w.NextDeadline()
	if ok != (len(x.r.entries) > 0) {
		x.t.Fatalf("op %d: NextDeadline ok = %v with %d pending", x.ops, ok, len(x.r.entries))
	}
	if !ok {
		return
	}
	first := lastMs(x.r.entries[0].due, x.r.tick)
	if d <= x.w.Now() || d > first {
		x.t.Fatalf("op %d: NextDeadline() = %d, want in (%d, %d]", x.ops, d, x.w.Now(), first)
	}
}

func (x *harness) checkAll(handles uint32) {
	for h := range handles {
		x.checkHandle(h)
	}
}

// randomDelta draws a due-time offset that exercises every level, the
// level boundaries, ties and the far end of the time range.
func (x *harness) randomDue(rng *rand.Rand) int64 {
	now, tick := x.r.now, x.r.tick
	switch rng.IntN(10) {
	case 0: // around now, including due <= now
		return now + rng.Int64N(8*tick) - 3*tick
	case 1: // level 0
		return now + 1 + rng.Int64N(64*tick)
	case 2: // levels 1-2
		return now + 1 + rng.Int64N(64*64*64*tick)
	case 3: // levels 3-4
		return now + 1 + rng.Int64N(64*64*64*64*64*tick)
	case 4: // exactly at or next to a bucket boundary of some level
		span := tick << (slotBits * (1 + rng.IntN(5)))
		b := now - mod(now, span) + span*rng.Int64N(3)
		return b + rng.Int64N(3) - 1
	case 5: // huge
		return now + 1 + rng.Int64N(1<<44)
	case 6: // the end of the range, and beyond it
		switch rng.IntN(4) {
		case 0:
			return maxTime
		case 1:
			return math.MaxInt64
		default:
			return maxTime - rng.Int64N(1<<50)
		}
	case 7: // a tie with a pending entry
		if n := len(x.r.entries); n > 0 {
			return x.r.entries[rng.IntN(n)].due
		}
		return now + 1
	case 8: // just after now
		return now + 1 + rng.Int64N(2)
	default: // the same tick as a pending entry
		if n := len(x.r.entries); n > 0 {
			d := x.r.entries[rng.IntN(n)].due
			return d - mod(d, tick) + rng.Int64N(tick)
		}
		return now + tick
	}
}

func (x *harness) randomStep(rng *rand.Rand) int64 {
	tick := x.r.tick
	switch rng.IntN(10) {
	case 0:
		return 0
	case 1:
		return -rng.Int64N(100 * tick) // backwards: a no-op
	case 2, 3:
		return rng.Int64N(3 * tick)
	case 4:
		return rng.Int64N(64 * tick)
	case 5:
		return rng.Int64N(64 * 64 * tick)
	case 6:
		return rng.Int64N(64 * 64 * 64 * tick)
	case 7:
		return rng.Int64N(64 * 64 * 64 * 64 * tick)
	case 8:
		return rng.Int64N(1 << 40)
	default:
		return 1
	}
}

// satAdd adds without wrapping, so fuzzed clocks can run past the range.
func satAdd(a, b int64) int64 {
	s := a + b
	if b > 0 && s < a {
		return math.MaxInt64
	}
	if b < 0 && s > a {
		return math.MinInt64
	}
	return s
}

func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// run performs ops random operations over handles [0, handles).
func (x *harness) run(rng *rand.Rand, ops int, handles uint32) {
	for range ops {
		h := rng.Uint32N(handles)
		switch op := rng.IntN(20); {
		case op < 8:
			var shuffle uint32
			if rng.IntN(4) == 0 {
				shuffle = rng.Uint32()
			}
			x.add(h, x.randomDue(rng), x.nextSeq(shuffle))
		case op < 11:
			x.remove(h)
		case op < 13:
			// Following a deadline at the end of time would end the run: the
			// clock would pass every due time the generator can produce.
			if d, ok := x.w.NextDeadline(); ok && d-x.r.now < 1<<42 {
				x.advanceToDeadline(rng.IntN(2) == 0)
			} else {
				x.advance(x.r.now + x.randomStep(rng))
			}
		default:
			x.advance(x.r.now + x.randomStep(rng))
		}
		if x.ops%4096 == 0 {
			x.checkAll(handles)
		}
	}
	x.checkAll(handles)
}

// TestRandomAgainstReference runs millions of mixed operations (fewer with
// -short or -race) against the sorted reference, asserting every Advance
// exactly, for several ticks and clock origins.
func TestRandomAgainstReference(t *testing.T) {
	ops := 4_000_000 // in total, over all configurations
	if testing.Short() {
		ops /= 8
	}
	if raceEnabled {
		ops /= 10
	}
	origins := []struct {
		name string
		now  int64
	}{
		{"zero", 0},
		{"unix-ms", 1_767_225_600_000},
		{"negative", -5_000_000_123},
		{"near-max", maxTime - 1<<56},
	}
	for _, tick := range []int64{1, 3, 10, 64, 1000} {
		for _, o := range origins {
			for _, ordered := range []bool{false, true} {
				t.Run("", func(t *testing.T) {
					rng := rand.New(rand.NewPCG(uint64(tick), uint64(o.now)))
					x := newHarness(t, tick, o.now, ordered)
					x.run(rng, ops/20, 2048)
					// Drain by deadlines as the engine does: everything left fires,
					// and no wake-up is wasted more than once per level.
					for wakeups := 0; x.w.Len() > 0; wakeups++ {
						if wakeups > 64*len(x.r.entries)+64 {
							t.Fatalf("drain: %d wake-ups and %d still pending", wakeups, x.w.Len())
						}
						x.advanceToDeadline(false)
					}
					t.Logf("tick %d origin %s ordered %v: %d ops, %d fired, max pending %d, levels %d",
						tick, o.name, ordered, x.ops, x.fired, x.maxLen, len(x.w.levels))
				})
			}
		}
	}
}

// FuzzWheel decodes bytes into operations and checks them against the
// reference. The first byte picks the tick, the second the clock origin;
// then each operation takes a kind byte, a handle byte and a signed
// varint scaled by a power of 64 the kind byte also selects.
func FuzzWheel(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 10, 2, 0, 20})
	f.Add([]byte{1, 1, 0x40, 3, 0x80, 0x01, 0x81, 0, 0x10, 0xc2, 4, 0x7f, 3, 0, 0})
	f.Add([]byte{2, 2, 0xc0, 7, 0xfe, 0xff, 0x03, 0x82, 0, 0xff, 0x01, 1, 7, 0, 0x03, 0})
	f.Add([]byte{3, 3, 0x00, 1, 0x7e, 0x00, 2, 0x7e, 0x80, 1, 0x7f, 0x42, 0, 0x40, 0x03, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		ticks := []int64{1, 3, 64, 1000}
		origins := []int64{0, 1_767_225_600_000, -77_777, maxTime - 1<<40}
		x := newHarness(t, ticks[int(data[0])%len(ticks)], origins[int(data[1])%len(origins)], data[0]&4 != 0)
		data = data[2:]
		for len(data) >= 2 {
			kind, h := data[0], uint32(data[1])%64
			v, n := binary.Varint(data[2:])
			if n <= 0 {
				v, n = 0, 0
			}
			data = data[2+n:]
			scale := int64(1) << (slotBits * int(kind>>6)) // 1, 64, 4096, 262144
			arg := v % (1 << 24) * scale * x.r.tick        // |arg| < 2^53: no overflow below
			switch kind & 7 {
			case 0, 1, 2:
				x.add(h, satAdd(x.r.now, arg), x.nextSeq(uint32(kind>>3&7)))
			case 3:
				x.remove(h)
			case 4:
				x.advanceToDeadline(kind&8 != 0)
			case 5:
				x.add(h, maxTime-arg, x.nextSeq(0))
			default:
				x.advance(satAdd(x.r.now, arg))
			}
		}
		x.checkAll(64)
		x.advance(maxTime + x.r.tick)
		if x.w.Len() != 0 {
			t.Fatalf("%d handles left after advancing past the end of time", x.w.Len())
		}
	})
}

// TestMovedFirstAgainstReference aims the reference check at the moved
// entries' array of level-0 buckets (pushArr): few handles, reused often,
// due in a few level-0 slots one to three rotations ahead, and small
// steps, so entries moved down from level 1 meet direct adds and reused
// handles of the same slot's earlier ticks.
func TestMovedFirstAgainstReference(t *testing.T) {
	ops := 400_000
	if testing.Short() || raceEnabled {
		ops /= 8
	}
	for _, drain := range []bool{true, false} {
		for _, ordered := range []bool{false, true} {
			rng := rand.New(rand.NewPCG(7, 11))
			x := newHarness(t, 1, 0, ordered)
			x.w.noDrain = !drain
			for range ops {
				h := rng.Uint32N(24)
				switch op := rng.IntN(10); {
				case op < 5:
					// Slots 5 and 548, 0.6 to 3 rotations ahead.
					base := x.r.now + fineSize*5/8 + rng.Int64N(fineSize*5/2)
					slot := []int64{5, 548}[rng.IntN(2)]
					due := base - mod(base, fineSize) + slot
					if due <= x.r.now {
						due += fineSize
					}
					x.add(h, due, x.nextSeq(0))
				case op < 7:
					x.remove(h)
				default:
					x.advance(x.r.now + 1 + rng.Int64N(12))
				}
				if x.ops%1024 == 0 {
					x.checkAll(24)
				}
			}
			x.checkAll(24)
		}
	}
}
