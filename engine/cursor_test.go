package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"
)

// listUpcoming pages through a queue's delayed jobs count at a time,
// calling between after each page, and returns every id listed, in order.
func listUpcoming(t *testing.T, e *Engine, q string, count int, between func(last Upcoming)) []string {
	t.Helper()
	var ids []string
	var after *Cursor
	for pages := 0; ; pages++ {
		if pages > 10000 {
			t.Fatal("the listing does not end")
		}
		page := e.UpcomingAfter(b(q), count, after)
		for i := 1; i < len(page); i++ {
			if page[i].Due < page[i-1].Due {
				t.Fatalf("page out of order: %+v before %+v", page[i-1], page[i])
			}
		}
		for _, u := range page {
			ids = append(ids, string(u.ID))
		}
		if len(page) < count {
			return ids
		}
		last := page[len(page)-1]
		after = &Cursor{Time: last.Due, ID: last.ID}
		between(last)
	}
}

// A queue of a few thousand delayed jobs, many due the same millisecond,
// lists whole page by page: each job exactly once while jobs are added and
// cancelled between pages (never a page's last), and at least once when the
// page's last job is cancelled too, repeats only of its millisecond.
func TestUpcomingPagesListTheWholeQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		rng := rand.New(rand.NewPCG(3, 4))
		due := map[string]int64{}
		add := func(q, id string, delay int64) {
			addOpts(t, e, AddArgs{Queue: b(q), ID: b(id), Payload: b("p"), Delay: delay, Retry: -1})
			if q == "q" {
				due[id] = e.Now() + delay
			}
		}
		for i := range 3000 {
			add("q", fmt.Sprint("j", i), 1000+int64(rng.IntN(300))) // about 10 jobs a millisecond
			add("other", fmt.Sprint("o", i), 1000+int64(rng.IntN(300)))
		}
		for _, cancelLast := range []bool{false, true} {
			func() { // a subtest cannot run inside the bubble
				listed := map[string]bool{} // listed on an earlier page
				added, cancelled := map[string]bool{}, map[string]bool{}
				lastMs := map[int64]bool{} // the dues of cancelled cursors
				n := 0
				ids := listUpcoming(t, e, "q", 250, func(last Upcoming) {
					// Add jobs before and after the cursor; cancel two not
					// listed yet and, in the second run, the cursor's job.
					for k := range 4 {
						id := fmt.Sprintf("new%v-%d-%d", cancelLast, n, k)
						n++
						add("q", id, 900+int64(rng.IntN(500)))
						added[id] = true
					}
					for id := range due {
						if !listed[id] && id != string(last.ID) && !added[id] && !cancelled[id] && rng.IntN(60) == 0 {
							e.Cancel(b("q"), [][]byte{b(id)})
							cancelled[id] = true
						}
					}
					if cancelLast {
						e.Cancel(b("q"), [][]byte{last.ID})
						cancelled[string(last.ID)] = true
						lastMs[last.Due] = true
					}
				})
				seen := map[string]int{}
				for _, id := range ids {
					seen[id]++
					listed[id] = true
				}
				stays := 0
				for id, d := range due {
					stayed := !added[id] && !cancelled[id]
					if stayed {
						stays++
					}
					switch {
					case stayed && seen[id] == 0:
						t.Fatalf("job %s (due %d), delayed the whole listing, was missed", id, d)
					case seen[id] > 1 && !(cancelLast && lastMs[d]):
						t.Fatalf("job %s listed %d times", id, seen[id])
					}
				}
				for id := range cancelled {
					delete(due, id)
				}
				if stays < 2000 || len(cancelled) < 20 {
					t.Fatalf("cancel the last %v: %d jobs stayed, %d cancelled: the churn tests little", cancelLast, stays, len(cancelled))
				}
			}()
		}
	})
}

// DELAY.RESERVED pages the same way, by ack deadline; jobs acked between
// pages drop out, none held for the whole listing is missed or repeated.
func TestReservedPagesListEveryReservation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		for i := range 2000 {
			addOpts(t, e, AddArgs{Queue: b("q"), ID: b(fmt.Sprint("r", i)), Payload: b("p"), AckTimeout: []int64{60000, 90000}[i%2], Retry: -1})
		}
		for range 2000 {
			mustPop(t, e, "q") // every deadline is one of two milliseconds
		}
		acked := map[string]bool{}
		seen := map[string]int{}
		var after *Cursor
		for pages := 0; ; pages++ {
			page := e.ReservedAfter(b("q"), 300, after)
			for _, r := range page {
				seen[string(r.ID)]++
			}
			if len(page) < 300 {
				break
			}
			last := page[len(page)-1]
			after = &Cursor{Time: last.AckDeadline, ID: last.ID}
			for i := pages; i < 2000; i += 97 { // some not listed yet, maybe
				id := fmt.Sprint("r", i)
				if id != string(last.ID) && seen[id] == 0 && !acked[id] {
					e.Ack(b("q"), [][]byte{b(id)})
					acked[id] = true
				}
			}
			sleep(time.Millisecond)
		}
		for i := range 2000 {
			id := fmt.Sprint("r", i)
			if !acked[id] && seen[id] != 1 {
				t.Fatalf("reservation %s listed %d times", id, seen[id])
			}
			if acked[id] && seen[id] > 0 {
				t.Fatalf("reservation %s listed after its ACK", id)
			}
		}
	})
}
