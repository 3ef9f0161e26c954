package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"

	"github.com/delayd/delayd/aof"
)

// TestPushRunModel runs random appends and removals (at either end, in the
// middle, of ids never filed) against a map, and checks every id's lookup,
// the count, and that removed entries do not pile up.
func TestPushRunModel(t *testing.T) {
	var pages runPages
	defer pages.release()
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
func testPushRunModel(t *testing.T, far bool, pages *runPages) {
	rng := rand.New(rand.NewPCG(1, 2))
	r := pushRun{pages: pages}
	defer r.release()
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
			r.add(sid, s)
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
			if got := r.remove(x, s); got != ok {
				t.Fatalf("step %d: remove(%d) = %v, live %v", step, x, got, ok)
			}
			delete(live, x)
		default:
			// A wrong slot, or an id never filed, removes nothing.
			x := order[rng.IntN(len(order))]
			if r.remove(x, 1<<22) || r.remove(x+1<<40, 1<<22) {
				t.Fatalf("step %d: removed an entry that is not there", step)
			}
		}
		if r.len() != len(live) {
			t.Fatalf("step %d: len %d, want %d", step, r.len(), len(live))
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
				s, ok := r.find(x)
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
		var r pushRun
		for i := range n {
			r.add(uint64(10+3*i), uint32(i))
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

// checkIndex fails unless every job is found by its id in its queue, and
// the push runs hold exactly the jobs flagged as pushed.
func checkIndex(t *testing.T, e *Engine) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	var buf [sidLen]byte
	pushed := 0
	for s := range e.jobs.n {
		j := e.jobs.at(s)
		if j.state == stateFree {
			continue
		}
		if j.flags&jobInRun != 0 {
			pushed++
		}
		id := e.idOf(j, &buf)
		if got, ok := e.lookup(j.queue, id); !ok || got != s {
			t.Fatalf("job %s of queue %s (slot %d, flags %b): lookup gives %d %v",
				id, e.queues[j.queue].name, s, j.flags, got, ok)
		}
	}
	inRuns := 0
	for i := range e.queues {
		inRuns += e.queues[i].run.len()
	}
	if pushed != inRuns {
		t.Fatalf("%d jobs flagged pushed, %d ids in push runs", pushed, inRuns)
	}
}

// TestPushedJobsFoundByID: list-pushed jobs are filed in their queue's push
// run instead of the id index, and must stay findable by id through every
// list and job command, in either order, and after a restart.
func TestPushedJobsFoundByID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		opts := exact(fs, FsyncAlways)
		opts.AckTimeout = 60_000
		e := mustNew(t, opts)
		defer e.Close() // a failure ends the bubble: its goroutines must stop
		rng := rand.New(rand.NewPCG(3, 4))
		q := func() []byte { return []byte(fmt.Sprint("l", rng.IntN(2))) }
		var ids [][]byte // ids seen in deliveries, some still reserved
		for i := range 3000 {
			var err error
			var tk uint64
			switch op := rng.IntN(12); op {
			case 0, 1, 2:
				ps := [][]byte{[]byte(fmt.Sprint("p", i%50))}
				if rng.IntN(3) == 0 {
					ps = append(ps, []byte(fmt.Sprint("p", i%7)))
				}
				_, tk, err = e.Push(q(), ps, rng.IntN(2) == 0)
			case 3:
				d, _ := e.ListPopOne(q(), rng.IntN(2) == 0, &Scratch{})
				tk = d.Ticket
			case 4:
				_, tk, err = e.Rem(q(), int64(rng.IntN(5)-2), []byte(fmt.Sprint("p", rng.IntN(50))))
			case 5:
				var d Delivery
				d, _, err = e.Move(q(), q(), MoveEnds{FromRight: rng.IntN(2) == 0, ToRight: rng.IntN(2) == 0})
				tk = d.Ticket
			case 6, 7:
				if d, ok := e.Pop([][]byte{q()}); ok {
					ids = append(ids, append([]byte(nil), d.ID...))
					tk = d.Ticket
				}
			case 8, 9:
				if len(ids) > 0 {
					id := ids[rng.IntN(len(ids))]
					switch rng.IntN(3) {
					case 0:
						_, tk, err = e.Ack(q(), [][]byte{id})
					case 1:
						_, tk, err = e.Nack(q(), id, 0)
					default:
						_, tk, err = e.Cancel(q(), [][]byte{id})
					}
				}
			case 10:
				if rng.IntN(20) == 0 {
					_, tk, err = e.Del([][]byte{q()})
				}
			default:
				sleep(1)
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := e.WaitDurable(tk); err != nil {
				t.Fatal(err)
			}
			if i%50 == 0 {
				checkIndex(t, e)
			}
		}
		checkIndex(t, e)
		// An id handed out is found by every command that takes one.
		e.Push(b("l0"), [][]byte{b("x")}, false)
		for {
			d, ok := e.Pop([][]byte{b("l0")})
			if !ok {
				t.Fatal("no job to pop")
			}
			if string(d.Payload) != "x" {
				continue
			}
			if _, ok := e.Get(b("l0"), d.ID); !ok {
				t.Fatalf("DELAY.GET of a popped pushed job %s: not found", d.ID)
			}
			if n, _, err := e.Ack(b("l0"), [][]byte{d.ID}); err != nil || n != 1 {
				t.Fatalf("ACK of a pushed job: %d %v", n, err)
			}
			if _, ok := e.Get(b("l0"), d.ID); ok {
				t.Fatal("acked job still found")
			}
			break
		}
		before := dump(e)
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		r := mustNew(t, opts)
		defer r.Close()
		if after := dump(r); after != before {
			t.Fatalf("restart changed the state:\nbefore:\n%s\nafter:\n%s", before, after)
		}
		checkIndex(t, r)
	})
}

// TestPushRunMergesSparseBlocks: removals from the middle (LREM) that leave
// blocks sparse merge them, so a run does not keep a block per survivor.
func TestPushRunMergesSparseBlocks(t *testing.T) {
	var r pushRun
	const n = 8 * runBlockLen
	for i := range n {
		r.add(uint64(i+1), uint32(i))
	}
	for i := 1; i < n-1; i++ {
		if i%8 != 0 && !r.remove(uint64(i+1), uint32(i)) {
			t.Fatalf("remove %d: not found", i)
		}
	}
	if r.len() != n/8+1 {
		t.Fatalf("len %d, want %d", r.len(), n/8+1)
	}
	if k := len(r.blocks); k > 3 {
		t.Fatalf("%d blocks hold %d ids: sparse blocks were not merged", k, r.len())
	}
	for i := range n {
		_, ok := r.find(uint64(i + 1))
		if want := i%8 == 0 || i == n-1; ok != want {
			t.Fatalf("find %d: %v, want %v", i, ok, want)
		}
	}
}

// TestPushRunOfASmallQueueIsSmall: a server with many queues of a job or
// two each must not pay a whole block per queue.
func TestPushRunOfASmallQueueIsSmall(t *testing.T) {
	var r pushRun
	r.add(7, 1)
	r.add(8, 2)
	if n := r.bytes(); n > 200 {
		t.Fatalf("a run of two ids holds %d bytes", n)
	}
	r.remove(7, 1)
	r.remove(8, 2)
	if len(r.blocks) != 0 || r.bytes() > 8 {
		t.Fatalf("an emptied run holds %d blocks, %d bytes", len(r.blocks), r.bytes())
	}
}
