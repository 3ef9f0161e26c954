package queue

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/delayd/delayd/jobs"
)

// fixture is one queue over a slab of its own, driven as the engine drives
// it: a job joins its lane, is pushed when ready, and leaves when removed.
// tag names each slot's job in the test's terms.
type fixture struct {
	t    *testing.T
	slab jobs.Slab
	q    Queue
	tag  map[uint32]string
	live []uint32 // slots of the queue's jobs in any state
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, tag: make(map[uint32]string)}
	t.Cleanup(f.slab.Release)
	return f
}

// add makes a ready job of a group and a priority (atHead: as LPUSH or a
// delivery handed back).
func (f *fixture) add(group string, prio uint8, tag string, atHead bool) uint32 {
	s := f.slab.Add()
	var g []byte
	if group != "" {
		g = []byte(group)
	}
	f.q.Join(&f.slab, s, g, prio)
	f.tag[s] = tag
	f.live = append(f.live, s)
	f.ready(s, atHead)
	return s
}

// ready pushes the job in slot s, in no list, into the ready order.
func (f *fixture) ready(s uint32, atHead bool) {
	f.slab.At(s).State = jobs.StateReady
	f.q.Ready++
	f.q.Order.Push(&f.slab, s, atHead)
}

// take unlinks what a pop from the head (tail) takes: "" when none may be
// taken. The job stays in its lane, in no list.
func (f *fixture) take(tail bool) (uint32, string) {
	if ok, _ := f.q.CanTake(0); !ok {
		return 0, ""
	}
	s := f.q.Take(0, tail)
	f.q.Order.Unlink(&f.slab, s)
	f.q.Ready--
	f.slab.At(s).State = jobs.StateFree
	return s, f.tag[s]
}

// pop takes and removes a job, as DELAY.POP without an ack timeout does.
func (f *fixture) pop(tail bool) string {
	s, tag := f.take(tail)
	if tag != "" {
		f.remove(s)
	}
	return tag
}

// reserve takes a job and keeps it reserved, as DELAY.POP with an ack
// timeout does.
func (f *fixture) reserve() (uint32, string) {
	s, tag := f.take(false)
	if tag != "" {
		f.slab.At(s).State = jobs.StateReserved
		f.q.Reserved++
		f.q.Order.Reserve(&f.slab, s)
	}
	return s, tag
}

// unreserve ends the reservation of slot s: the job is handed back
// (ready) or acked (removed).
func (f *fixture) unreserve(s uint32, back bool) {
	f.q.Reserved--
	f.q.Order.Unreserve(&f.slab, s)
	f.slab.At(s).State = jobs.StateFree
	if back {
		f.ready(s, true)
		return
	}
	f.remove(s)
}

func (f *fixture) remove(s uint32) {
	f.q.Order.Leave(&f.slab, s)
	f.live = slices.DeleteFunc(f.live, func(x uint32) bool { return x == s })
	delete(f.tag, s)
}

// each lists the ready order as Each walks it.
func (f *fixture) each() []string {
	var out []string
	f.q.Order.Each(&f.slab, func(s uint32) bool {
		out = append(out, f.tag[s])
		return true
	})
	return out
}

func (f *fixture) drain() []string {
	var out []string
	for p := f.pop(false); p != ""; p = f.pop(false) {
		out = append(out, p)
	}
	return out
}

func (f *fixture) check() {
	f.t.Helper()
	if got := len(f.each()); got != f.q.Ready {
		f.t.Fatalf("%d jobs in the ready order, ready count %d", got, f.q.Ready)
	}
	if err := f.q.Order.Check(&f.slab, f.live); err != nil {
		f.t.Fatal(err)
	}
}

func want(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: %q, want %q", what, got, want)
	}
}

func TestPlainListIsFIFO(t *testing.T) {
	f := newFixture(t)
	for _, p := range []string{"a", "b", "c"} {
		f.add("", 0, p, false)
	}
	f.add("", 0, "pushed", true)
	if f.q.Order.x != nil {
		t.Fatal("no priority and no group made lanes")
	}
	want(t, "each", f.each(), []string{"pushed", "a", "b", "c"})
	want(t, "rpop", []string{f.pop(true)}, []string{"c"})
	want(t, "pops", f.drain(), []string{"pushed", "a", "b"})
	f.check()
}

func TestPriorityOrder(t *testing.T) {
	f := newFixture(t)
	for _, a := range []struct {
		prio uint8
		p    string
	}{{0, "a0"}, {5, "b5"}, {0, "c0"}, {9, "d9"}, {5, "e5"}, {9, "f9"}} {
		f.add("", a.prio, a.p, false)
	}
	want(t, "each", f.each(), []string{"d9", "f9", "b5", "e5", "a0", "c0"})
	f.check()
	// A pop from the tail takes the newest job of the lowest priority.
	want(t, "rpop", []string{f.pop(true)}, []string{"c0"})
	want(t, "pops", f.drain(), []string{"d9", "f9", "b5", "e5", "a0"})
	f.check()
	if f.q.Order.x != nil {
		t.Fatal("the lanes stayed with nothing but the default lane")
	}
}

func TestRoundRobinAcrossGroups(t *testing.T) {
	f := newFixture(t)
	for _, a := range [][2]string{{"a", "a1"}, {"a", "a2"}, {"b", "b1"}, {"a", "a3"}, {"", "x1"}, {"b", "b2"}, {"c", "c1"}, {"", "x2"}} {
		f.add(a[0], 0, a[1], false)
	}
	order := []string{"a1", "b1", "x1", "c1", "a2", "b2", "x2", "a3"}
	want(t, "each", f.each(), order)
	f.check()
	var got []string
	for range 3 {
		got = append(got, f.pop(false))
	}
	want(t, "first pops", got, order[:3])
	// A job of a higher priority goes first; then the round goes on where
	// it was.
	f.add("b", 2, "b3!", false)
	want(t, "each after a priority add", f.each(), []string{"b3!", "c1", "a2", "b2", "x2", "a3"})
	want(t, "rest", f.drain(), []string{"b3!", "c1", "a2", "b2", "x2", "a3"})
	f.check()

	// At the head: the job to the head of its group, the group to the head
	// of the ring. From the tail: the newest job of the group last in turn.
	f.add("a", 0, "a4", false)
	f.add("b", 0, "b4", false)
	f.add("", 0, "pushed", true)
	want(t, "after a push at the head", f.each(), []string{"pushed", "a4", "b4"})
	want(t, "rpop", []string{f.pop(true)}, []string{"b4"})
	want(t, "rest", f.drain(), []string{"pushed", "a4"})
	f.check()
}

// TestEachIsThePopOrder: with priorities and groups at random, Each lists
// exactly what successive pops take.
func TestEachIsThePopOrder(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		f := newFixture(t)
		for i := range 200 {
			g := []string{"", "a", "b", "c"}[rng.IntN(4)]
			f.add(g, uint8(rng.IntN(3)), fmt.Sprint(i), rng.IntN(10) == 0)
			if rng.IntN(3) == 0 {
				f.pop(rng.IntN(4) == 0)
			}
		}
		f.check()
		listed := f.each()
		want(t, fmt.Sprint("seed ", seed), f.drain(), listed)
	}
}

// TestFairnessRandomized: with groups added to and popped from at random,
// no group that has a ready job waits for more pops than there are other
// groups.
func TestFairnessRandomized(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 99))
		f := newFixture(t)
		G := 2 + rng.IntN(7)
		ready := make([]int, G)
		waited := make([]int, G)
		name := func(g int) string {
			if g == 0 {
				return "" // the default group takes part too
			}
			return fmt.Sprint("g", g)
		}
		for step := range 20_000 {
			if rng.IntN(100) < 55 {
				g := rng.IntN(G)
				if rng.IntN(2) == 0 {
					g = 0 // skewed: group 0 gets about half of the adds
				}
				f.add(name(g), 0, fmt.Sprint(g, ":", step), false)
				ready[g]++
				continue
			}
			p := f.pop(false)
			if p == "" {
				continue
			}
			var g, n int
			fmt.Sscanf(p, "%d:%d", &g, &n)
			ready[g]--
			for o := range G {
				switch {
				case o == g || ready[o] == 0:
					waited[o] = 0
				default:
					if waited[o]++; waited[o] > G-1 {
						t.Fatalf("seed %d step %d: group %d waited %d pops with ready jobs (%d groups)", seed, step, o, waited[o], G)
					}
				}
			}
		}
		f.check()
	}
}

// TestSmallGroupsAreNotBehindAMillion: 1M ready jobs in one group, added
// first, and 1k in each of two others: the 2k jobs of the small groups all
// go within the first 3k pops.
func TestSmallGroupsAreNotBehindAMillion(t *testing.T) {
	big := 1_000_000
	if testing.Short() {
		big = 100_000
	}
	f := newFixture(t)
	for range big {
		f.add("big", 0, "B", false)
	}
	for i := range 2000 {
		g := []string{"s1", "s2"}[i%2]
		f.add(g, 0, g, false)
	}
	small := 0
	for i := range 3000 {
		p := f.pop(false)
		if p == "" {
			t.Fatalf("pop %d: nothing", i)
		}
		if p != "B" {
			small++
		}
	}
	if small != 2000 {
		t.Fatalf("the first 3000 pops took %d of the small groups' 2000 jobs", small)
	}
}

// TestGroupConcurrencyHoldsAGroup: a group at its limit leaves the rings
// (the others go on), comes back when a reservation ends, and the limit's
// removal releases every group.
func TestGroupConcurrencyHoldsAGroup(t *testing.T) {
	f := newFixture(t)
	var l Limits
	lim, _ := l.SetSpec("q", Spec{GroupConcurrency: 1})
	f.q.SetLimit(lim)
	for _, a := range [][2]string{{"a", "a1"}, {"a", "a2"}, {"b", "b1"}, {"b", "b2"}} {
		f.add(a[0], 0, a[1], false)
	}
	sa, p := f.reserve()
	want(t, "first", []string{p}, []string{"a1"})
	sb, p := f.reserve()
	want(t, "second", []string{p}, []string{"b1"})
	f.check()
	if _, p := f.take(false); p != "" {
		t.Fatalf("took %s with both groups at their limit", p)
	}
	// LRANGE still lists a held group's jobs, after the groups in turn.
	want(t, "each while held", f.each(), []string{"a2", "b2"})
	f.unreserve(sb, false) // ack: b may take more
	f.check()
	sb, p = f.reserve()
	want(t, "after b's ack", []string{p}, []string{"b2"})
	f.unreserve(sa, true) // handed back: a1 at the head of its group
	want(t, "after a's nack", f.each(), []string{"a1", "a2"})
	f.check()

	// OFF releases b: its reservation no longer holds it.
	lim, _ = l.SetSpec("q", Spec{})
	f.q.SetLimit(lim)
	f.check()
	want(t, "after OFF", f.drain(), []string{"a1", "a2"})
	f.unreserve(sb, false)
	f.check()
	if f.q.Order.x != nil {
		t.Fatal("the lanes stayed after the last group went")
	}
}

func TestLaneOfAndOldestDue(t *testing.T) {
	f := newFixture(t)
	if _, ok := f.q.Order.OldestDue(&f.slab); ok {
		t.Fatal("an empty order has an oldest job")
	}
	s := f.add("g", 3, "x", false)
	f.slab.At(s).Due = 50
	s2 := f.add("", 0, "y", false)
	f.slab.At(s2).Due = 20
	if g, p := f.q.Order.LaneOf(&f.slab, s); g != "g" || p != 3 {
		t.Fatalf("lane of x: %q %d", g, p)
	}
	if g, p := f.q.Order.LaneOf(&f.slab, s2); g != "" || p != 0 {
		t.Fatalf("lane of y: %q %d", g, p)
	}
	// The oldest head of every lane, not the head of the order.
	if due, ok := f.q.Order.OldestDue(&f.slab); !ok || due != 20 {
		t.Fatalf("oldest due %d %v, want 20", due, ok)
	}
	// Latency counts from the oldest head's due time, never below 0.
	if l := f.q.Latency(&f.slab, 35); l != 15 {
		t.Fatalf("latency at 35: %d, want 15", l)
	}
	if l := f.q.Latency(&f.slab, 10); l != 0 {
		t.Fatalf("latency before due: %d, want 0", l)
	}
	f.q.Added = 7
	if st := f.q.Stats(&f.slab, 35); st.Latency != 15 || st.Added != 7 || st.Ready != f.q.Ready {
		t.Fatalf("stats: %+v", st)
	}
}

// A frozen order, read over a copy of the slab taken at the same time,
// lists and names lanes as the order did then, while the order goes on:
// pops rotate the rings, lanes and groups are freed and made again.
func TestFrozenOrderKeepsTheInstant(t *testing.T) {
	f := newFixture(t)
	for i := range 12 {
		f.add(fmt.Sprint("g", i%3), uint8(i%2*5), fmt.Sprint("j", i), i%4 == 0)
	}
	f.add("", 0, "plain", false)
	want := f.each()
	lanes := map[uint32][2]any{}
	for _, s := range f.live {
		g, p := f.q.Order.LaneOf(&f.slab, s)
		lanes[s] = [2]any{g, p}
	}
	buf := jobs.NewFreezeBuf(0)
	defer buf.Release()
	slab := f.slab.Freeze(buf)
	defer f.slab.Thaw() // before buf goes: the fixture's writes copy into it until then
	frozen := f.q.Order.Frozen()
	tags := maps.Clone(f.tag)

	for range 8 {
		f.pop(false)
	}
	f.add("g9", 9, "late", true)
	f.add("g0", 3, "late2", false)

	var got []string
	frozen.Each(&slab, func(s uint32) bool {
		got = append(got, tags[s])
		return true
	})
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("frozen order %v, want %v", got, want)
	}
	for s, l := range lanes {
		if g, p := frozen.LaneOf(&slab, s); g != l[0] || p != l[1] {
			t.Fatalf("slot %d: lane %q %d, want %v", s, g, p, l)
		}
	}
}
