package engine

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/record"
)

// The server-id index is built on another goroutine during replay
// (replay.go). Runs of new adds go there; every record that needs the index
// (a cancel, an ack, a pop, an add of a known id, a record before which
// something fires) waits for it. The state after a restart must be the
// state before, with every id findable and no removed id left, whether the
// log is a fresh one or starts with a rewrite's snapshot.
func TestReplayBuildsIndexBesideTheReplay(t *testing.T) {
	for _, rewrite := range []bool{false, true} {
		t.Run(fmt.Sprint("rewrite=", rewrite), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fs := aof.NewMemFS()
				rng := rand.New(rand.NewPCG(3, 4))
				e := mustNew(t, exact(fs, FsyncNo))
				live := map[string]string{} // id -> queue, while not removed
				queueOf := map[string]string{}
				var order []string
				add := func(n int, ackTimeout int64) {
					for range n {
						q := fmt.Sprint("q", rng.IntN(3))
						res, err := e.Add(AddArgs{Queue: []byte(q), Payload: []byte("p"), Delay: int64(rng.IntN(400)),
							AckTimeout: ackTimeout, Retry: -1})
						if err != nil {
							t.Fatal(err)
						}
						live[string(res.ID)] = q
						queueOf[string(res.ID)] = q
						order = append(order, string(res.ID))
					}
				}
				// Long runs of new adds (deferred), broken by cancels of
				// old ids, pops with acks and reservations that expire.
				for round := range 6 {
					add(1500, []int64{0, 50}[round%2])
					for range 150 {
						id := order[rng.IntN(len(order))]
						q, ok := live[id]
						if !ok {
							continue
						}
						n, _, err := e.Cancel([]byte(q), [][]byte{[]byte(id)})
						if err != nil || n != 1 {
							t.Fatalf("cancel %s: %d, %v", id, n, err)
						}
						delete(live, id)
					}
					time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
					for range 100 {
						d, ok := e.Pop([][]byte{[]byte("q0"), []byte("q1"), []byte("q2")})
						if !ok {
							break
						}
						// Half the reservations are acked, half expire.
						if d.Reserved && rng.IntN(2) == 0 {
							if n, _, err := e.Ack(d.Queue, [][]byte{d.ID}); err != nil || n != 1 {
								t.Fatalf("ack %s: %d, %v", d.ID, n, err)
							}
						}
						delete(live, string(d.ID)) // not a candidate for a cancel any more
					}
					if rewrite && round == 2 {
						if err := e.Rewrite(); err != nil {
							t.Fatal(err)
						}
						synctest.Wait()
					}
				}
				before := dump(e)
				if err := e.Close(); err != nil {
					t.Fatal(err)
				}
				e = mustNew(t, exact(fs, FsyncNo))
				defer e.Close()
				if after := dump(e); after != before {
					t.Fatalf("state after restart differs\nbefore:\n%s\nafter:\n%s", before, after)
				}
				if e.j.sidsDeferred < len(order)/2 {
					t.Errorf("%d of %d adds left their index insert to the builder, want most", e.j.sidsDeferred, len(order))
				}
				// Every job the dump shows is found by its id; every other is gone.
				for _, id := range order {
					e.mu.Lock()
					qi, ok := e.queueFor([]byte(queueOf[id]), false)
					found := false
					if ok {
						_, found = e.jobs.Lookup(&e.queues[qi].run, qi, []byte(id))
					}
					e.mu.Unlock()
					if want := strings.Contains(before, id); found != want {
						t.Fatalf("id %s in %s: found %v, want %v", id, queueOf[id], found, want)
					}
				}
			})
		})
	}
}

// A log whose server ids are out of order (a rewrite's snapshot lists jobs
// by ready list, then by slot) may add an id that is below the highest one
// replayed so far and yet already taken: that add replaces the job, so it
// must see the index whole, not leave its insert to the builder.
func TestReplayAddOfATakenIdBelowTheHighestReplaces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		w, err := aof.OpenAppend(fs, seg1, 0)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UnixMilli()
		for i, r := range []record.Rec{
			{Op: record.Meta, Time: now, SID: 100, Seq: 10}, // a rewrite's: ids up to 100 were made
			{Op: record.Add, Time: now, Queue: []byte("q"), SID: 50, Due: now + 1000, Seq: 1, Payload: []byte("old"), Retry: -1},
			{Op: record.Add, Time: now, Queue: []byte("q"), SID: 70, Due: now + 2000, Seq: 2, Payload: []byte("b"), Retry: -1},
			{Op: record.Add, Time: now, Queue: []byte("q"), SID: 50, Due: now + 3000, Seq: 3, Payload: []byte("new"), Retry: -1},
		} {
			if i > 0 {
				r.AckTimeout = -1
			}
			w.Append(r.Encode(nil))
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		e := mustNew(t, logged(fs, FsyncNo))
		defer e.Close()
		if e.njobs != 2 {
			t.Fatalf("%d jobs, want 2 (the third add replaces the first)", e.njobs)
		}
		var buf [jobs.SIDLen]byte
		if j, ok := e.Get([]byte("q"), jobs.RenderSID(&buf, 50)); !ok || string(j.Payload) != "new" {
			t.Fatalf("job 50: %+v %v, want the new payload", j, ok)
		}
		if e.j.sidsDeferred != 2 {
			t.Errorf("%d inserts deferred, want 2 (50 and 70, new ids above the ones indexed)", e.j.sidsDeferred)
		}
	})
}
