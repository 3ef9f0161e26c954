package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/jobs"
)

// checkIndex fails unless every job is found by its id in its queue, and
// the push runs hold exactly the jobs flagged as pushed.
func checkIndex(t *testing.T, e *Engine) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	var buf [jobs.SIDLen]byte
	pushed := 0
	for s := range e.jobs.Len() {
		j := e.jobs.At(s)
		if j.State == jobs.StateFree {
			continue
		}
		if j.Flags&jobs.FlagInRun != 0 {
			pushed++
		}
		id := e.jobs.ID(j, &buf)
		if got, ok := e.jobs.Lookup(&e.queues[j.Queue].run, j.Queue, id); !ok || got != s {
			t.Fatalf("job %s of queue %s (slot %d, flags %b): lookup gives %d %v",
				id, e.queues[j.Queue].name, s, j.Flags, got, ok)
		}
	}
	inRuns := 0
	for i := range e.queues {
		inRuns += e.queues[i].run.Len()
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
