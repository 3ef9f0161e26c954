package bucket

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/delayd/delayd/aof"
)

// scanMem is the owner's memory in the model: jobs in slots, a freed slot
// reused first (the slab's order, which a job coming back from a bucket
// may land behind a cursor in).
type scanMem struct {
	slots []uint64 // sid, 0: free
}

func (m *scanMem) put(sid uint64) {
	if i := slices.Index(m.slots, 0); i >= 0 {
		m.slots[i] = sid
		return
	}
	m.slots = append(m.slots, sid)
}

func (m *scanMem) take(sid uint64) { m.slots[slices.Index(m.slots, sid)] = 0 }

// A scan walks the buckets, the owner's memory, and the buckets again from
// Tail, as DELAY.SCAN does; between its pages jobs go out to the buckets,
// come back into memory (loads, faults), move, are merged and sealed, and
// come and go. Every job there for the whole scan is met at least once.
func TestScanMeetsEveryJobThatStays(t *testing.T) {
	for seed := range uint64(30) {
		fs, log := aof.NewMemFS(), newFakeLog()
		s := newSet(t, fs, log, 64)
		rng := rand.New(rand.NewPCG(seed, 99))
		mem := &scanMem{}
		c := ScanCursor{}
		far := map[uint64]bool{}
		sid := uint64(0)
		hist := map[uint64][]string{}
		trace := func(f string, id uint64) {
			hist[id] = append(hist[id], fmt.Sprintf("cursor %+v: %s", c, f))
		}
		out := func(id uint64, due int64) {
			trace("out", id)
			if err := s.Add(due, id, id, queueOf(id), headOf(id, due), log.put(1, payloadOf(id))); err != nil {
				t.Fatal(err)
			}
			far[id] = true
		}
		for range 400 {
			sid++
			if rng.IntN(2) == 0 {
				mem.put(sid)
			} else {
				out(sid, int64(1000+rng.IntN(10_000)))
			}
			if sid%100 == 0 {
				checkpoint(t, s, fs, Pos{1, int64(sid)})
			}
		}
		stays := map[uint64]bool{}
		for _, id := range mem.slots {
			stays[id] = true
		}
		for id := range far {
			stays[id] = true
		}
		seen := map[uint64]bool{}
		pages, merged := 0, false
		for done := false; !done; pages++ {
			// One page (count 7, a visit of 20), as the engine's loop.
			got := 0
			c = s.Resume(c)
			for got < 7 && !done {
				switch c.Phase {
				case ScanBuckets, ScanTail:
					var gone []Job
					var g *[]Job
					if c.Phase == ScanTail {
						g = &gone
					}
					js, next, end, err := s.Scan("q1", c.At, 7-got, 20, g)
					if err != nil {
						t.Fatal(err)
					}
					for _, j := range js {
						trace("seen far", j.SID)
						seen[j.SID] = true
						got++
					}
					for _, j := range gone {
						id := j.SID
						if slices.Contains(mem.slots, id) && queueOf(id) == "q1" {
							seen[id] = true
							got++
						}
					}
					c.At = next
					if !end {
						got = 7
						break
					}
					if c.Phase == ScanTail {
						done = true
						break
					}
					c = ScanCursor{Phase: ScanSlab, Tail: s.Tail()}
				case ScanSlab:
					for ; c.Slot < uint64(len(mem.slots)) && got < 7; c.Slot++ {
						if id := mem.slots[c.Slot]; id != 0 && queueOf(id) == "q1" {
							trace("seen mem", id)
							seen[id] = true
							got++
						}
					}
					if c.Slot >= uint64(len(mem.slots)) {
						c = ScanCursor{Phase: ScanTail, At: c.Tail}
					}
				}
				c = s.Resume(ParseCursor(c.Encode()))
			}
			// Between pages: the world moves.
			for range 1 + rng.IntN(6) {
				switch rng.IntN(7) {
				case 0: // a new job, far or near: it need not be met
					sid++
					if rng.IntN(2) == 0 {
						mem.put(sid)
					} else {
						out(sid, int64(1000+rng.IntN(10_000)))
					}
				case 1: // out of memory into the open bucket
					if i := rng.IntN(len(mem.slots)); mem.slots[i] != 0 {
						id := mem.slots[i]
						trace(fmt.Sprintf("out of slot %d", i), id)
						mem.take(id)
						out(id, int64(12_000+rng.IntN(1000)))
					}
				case 2: // back into memory: a fault
					for id := range far {
						if s.Fault(id) {
							trace("fault", id)
							delete(far, id)
							mem.put(id)
						}
						break
					}
				case 3: // a load
					for _, j := range load(t, s, int64(1000+pages*40), 8) {
						trace("load", j.SID)
						delete(far, j.SID)
						mem.put(j.SID)
					}
				case 4: // a job that leaves for good
					for id := range far {
						s.Remove(id)
						delete(far, id)
						delete(stays, id)
						break
					}
				case 5:
					checkpoint(t, s, fs, Pos{2, int64(pages)})
				case 6: // a merge of runs cancels left mostly dead, stepped a little at a time
					for id := range far {
						if rng.IntN(3) > 0 && s.Remove(id) {
							delete(far, id)
							delete(stays, id)
						}
					}
					if m := s.PlanMerge(); m != nil {
						r, err := s.WriteMerge(m, nil)
						if err != nil {
							t.Fatal(err)
						}
						if err := s.BeginMerge(m, r); err != nil {
							t.Fatal(err)
						}
						for !s.Step(m, 5) {
						}
						merged = true
					}
				}
			}
		}
		for id := range stays {
			if queueOf(id) == "q1" && !seen[id] {
				t.Log(strings.Join(hist[id], "\n"))
				t.Fatalf("seed %d: job %d was there for the whole scan (%d pages) and was not met", seed, id, pages)
			}
		}
		if seed == 29 && !merged {
			t.Log("no merge in the last seed")
		}
	}
}

func TestScanCursorRoundTrips(t *testing.T) {
	for _, c := range []ScanCursor{
		{},
		{Phase: ScanBuckets, At: ScanAt{ID: 1<<41 - 1, At: 1<<20 - 1, Run: true}},
		{Phase: ScanSlab, Tail: ScanAt{ID: 1<<12 - 1, At: 1<<20 - 1}, Slot: 1<<30 - 1},
		{Phase: ScanTail, At: ScanAt{ID: 7, At: 3}},
	} {
		if got := ParseCursor(c.Encode()); got != c {
			t.Fatalf("%+v came back %+v", c, got)
		}
	}
	if (ScanCursor{}).Encode() != 0 {
		t.Fatal("the first cursor is not 0")
	}
}
