package jobs

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestPushRunModel runs random appends and removals (at either end, in the
// middle, of ids never filed) against a map, and checks every id's lookup,
// the count, and that removed entries do not pile up.
func TestPushRunModel(t *testing.T) {
	var pages RunPages
	defer pages.Release()
	for _, far := range []bool{false, true} {
		t.Run(fmt.Sprintf("far=%v", far), func(t *testing.T) {
			testPushRunModel(t, far, &pages)
		})
	}
}

// testPushRunModel is TestPushRunModel's run. far puts some ids 2^31 to
// 2^33 after the last (an idle minute of server ids, or more), beyond what
// one block's offsets reach from its first id, so blocks start early and
// merges must refuse.
func testPushRunModel(t *testing.T, far bool, pages *RunPages) {
	rng := rand.New(rand.NewPCG(1, 2))
	r := PushRun{pages: pages}
	defer r.Release()
	live := map[uint64]uint32{}
	var order []uint64 // every id ever added, increasing
	var gaps []uint64  // ids that came far after the one before
	sid := uint64(1000)
	steps := 200_000
	if far {
		steps = 50_000 // farBetween is O(live)
	}
	for step := range steps {
		switch op := rng.IntN(10); {
		case op < 4 || len(live) == 0:
			sid += 1 + uint64(rng.IntN(3))
			if far && rng.IntN(50) == 0 {
				sid += 1<<31 + uint64(rng.Int64N(3<<31))
				gaps = append(gaps, sid)
			}
			s := uint32(step) // a live slot is filed once, as in the engine
			r.Add(sid, s)
			live[sid] = s
			order = append(order, sid)
		case op < 8:
			// Mostly the oldest or newest live id, as lists pop.
			var x uint64
			switch rng.IntN(3) {
			case 0:
				b := r.blocks[0]
				x = b.sid(b.lo)
			case 1:
				b := r.blocks[len(r.blocks)-1]
				x = b.sid(b.hi - 1)
			default:
				x = order[rng.IntN(len(order))]
			}
			s, ok := live[x]
			if got := r.Remove(x, s); got != ok {
				t.Fatalf("step %d: remove(%d) = %v, live %v", step, x, got, ok)
			}
			delete(live, x)
		default:
			// A wrong slot, or an id never filed, removes nothing.
			x := order[rng.IntN(len(order))]
			if r.Remove(x, 1<<22) || r.Remove(x+1<<40, 1<<22) {
				t.Fatalf("step %d: removed an entry that is not there", step)
			}
		}
		if r.Len() != len(live) {
			t.Fatalf("step %d: len %d, want %d", step, r.Len(), len(live))
		}
		if k := len(r.blocks); k > 2 && k*runBlockLen > 4*len(live)+2*runBlockLen &&
			k*runBlockLen > 4*len(live)+(2+farBetween(gaps, live))*runBlockLen {
			t.Fatalf("step %d: %d blocks held for %d live", step, k, len(live))
		}
		if k := len(r.blocks); k == 0 && r.tail != nil || k > 0 && r.tail != r.blocks[k-1] {
			t.Fatalf("step %d: the run's tail is not its last block", step)
		}
		for _, b := range r.blocks {
			if b.live == 0 || b.ents[b.lo].slot == 0 || b.ents[b.hi-1].slot == 0 {
				t.Fatalf("step %d: a block is empty or has a removed entry at an end: %d live in [%d, %d)", step, b.live, b.lo, b.hi)
			}
		}
		if step%1000 == 0 {
			var mem int64
			for _, b := range r.blocks {
				mem += b.bytes()
			}
			if mem != r.mem {
				t.Fatalf("step %d: run counts %d bytes of blocks, they hold %d", step, r.mem, mem)
			}
			for _, x := range order {
				s, ok := r.Find(x)
				if want, live := live[x]; ok != live || s != want {
					t.Fatalf("step %d: find(%d) = %d %v, want %d %v", step, x, s, ok, want, live)
				}
			}
		}
	}
}

// farBetween counts the far gaps between live ids: each may start a block
// that no merge can join to the one before.
func farBetween(gaps []uint64, live map[uint64]uint32) int {
	if len(gaps) == 0 || len(live) == 0 {
		return 0
	}
	lo, hi := uint64(1<<64-1), uint64(0)
	for x := range live {
		lo, hi = min(lo, x), max(hi, x)
	}
	n := 0
	for _, g := range gaps {
		if g > lo && g <= hi {
			n++
		}
	}
	return n
}

// TestPushRunLocateFromBothEnds finds every id of runs of one to several
// blocks, and no id between or beyond them.
func TestPushRunLocateFromBothEnds(t *testing.T) {
	for _, n := range []int{0, 1, 2, 70, runBlockLen, runBlockLen + 1, 5*runBlockLen + 7} {
		var r PushRun
		for i := range n {
			r.Add(uint64(10+3*i), uint32(i))
		}
		for x := uint64(0); x < uint64(20+3*n); x++ {
			bi, i, ok := r.locate(x)
			want := (x-10)%3 == 0 && x >= 10 && x < uint64(10+3*n)
			if ok != want || ok && r.blocks[bi].sid(i) != x {
				t.Fatalf("n=%d locate(%d) = %d/%d %v, want found %v", n, x, bi, i, ok, want)
			}
		}
	}
}

// TestPushRunMergesSparseBlocks: removals from the middle (LREM) that leave
// blocks sparse merge them, so a run does not keep a block per survivor.
func TestPushRunMergesSparseBlocks(t *testing.T) {
	var r PushRun
	const n = 8 * runBlockLen
	for i := range n {
		r.Add(uint64(i+1), uint32(i))
	}
	for i := 1; i < n-1; i++ {
		if i%8 != 0 && !r.Remove(uint64(i+1), uint32(i)) {
			t.Fatalf("remove %d: not found", i)
		}
	}
	if r.Len() != n/8+1 {
		t.Fatalf("len %d, want %d", r.Len(), n/8+1)
	}
	if k := len(r.blocks); k > 3 {
		t.Fatalf("%d blocks hold %d ids: sparse blocks were not merged", k, r.Len())
	}
	for i := range n {
		_, ok := r.Find(uint64(i + 1))
		if want := i%8 == 0 || i == n-1; ok != want {
			t.Fatalf("find %d: %v, want %v", i, ok, want)
		}
	}
}

// TestPushRunOfASmallQueueIsSmall: a server with many queues of a job or
// two each must not pay a whole block per queue.
func TestPushRunOfASmallQueueIsSmall(t *testing.T) {
	var r PushRun
	r.Add(7, 1)
	r.Add(8, 2)
	if n := r.Bytes(); n > 200 {
		t.Fatalf("a run of two ids holds %d bytes", n)
	}
	r.Remove(7, 1)
	r.Remove(8, 2)
	if len(r.blocks) != 0 || r.Bytes() > 8 {
		t.Fatalf("an emptied run holds %d blocks, %d bytes", len(r.blocks), r.Bytes())
	}
}
