//go:build latetrace

package latetrace

import (
	"fmt"
	"os"
	"slices"
	"sync"
	"time"
)

// On is true in the debug build.
const On = true

var lt struct {
	sync.Mutex
	wake, serve, woken, logged []time.Duration
	advance                    []time.Duration
	at                         map[any]time.Time    // resolved, not yet woken
	byTicket                   map[uint64]time.Time // woken, reply waiting for its log write
}

// Wake records how late the timer goroutine woke for its deadline.
func Wake(late time.Duration) {
	lt.Lock()
	lt.wake = append(lt.wake, late)
	lt.Unlock()
}

// Serve records how late a blocked client (w, a key compared by identity)
// was resolved with its job.
func Serve(w any, late time.Duration) {
	now := time.Now()
	lt.Lock()
	if lt.at == nil {
		lt.at, lt.byTicket = map[any]time.Time{}, map[uint64]time.Time{}
	}
	lt.serve = append(lt.serve, late)
	lt.at[w] = now
	lt.Unlock()
}

// Woken records how long after its resolution (Serve) the client's
// goroutine took the job; ticket, if not 0, is the log write its reply
// waits for (Durable).
func Woken(w any, ticket uint64) {
	now := time.Now()
	lt.Lock()
	if at, ok := lt.at[w]; ok {
		delete(lt.at, w)
		lt.woken = append(lt.woken, now.Sub(at))
		if ticket != 0 {
			lt.byTicket[ticket] = at
		}
	}
	lt.Unlock()
}

// Durable records how long after its resolution a job's reply was free to
// leave: its pop record, ticket, written to the log.
func Durable(ticket uint64) {
	now := time.Now()
	lt.Lock()
	if at, ok := lt.byTicket[ticket]; ok {
		delete(lt.byTicket, ticket)
		lt.logged = append(lt.logged, now.Sub(at))
	}
	lt.Unlock()
}

// Advance records how long one advance of the timer goroutine held the
// lock (firing, cascading coarse buckets, serving waiters).
func Advance(d time.Duration) {
	lt.Lock()
	lt.advance = append(lt.advance, d)
	lt.Unlock()
}

// Dump prints the percentiles of everything recorded to stderr.
func Dump() {
	lt.Lock()
	defer lt.Unlock()
	for _, x := range []struct {
		name string
		v    []time.Duration
	}{{"timer woke after deadline", lt.wake}, {"waiter resolved after due", lt.serve},
		{"client goroutine took the job after resolve", lt.woken}, {"pop record written after resolve", lt.logged},
		{"timer goroutine's advance took", lt.advance}} {
		if len(x.v) == 0 {
			continue
		}
		slices.Sort(x.v)
		q := func(p float64) time.Duration { return x.v[min(int(p*float64(len(x.v))), len(x.v)-1)] }
		fmt.Fprintf(os.Stderr, "latetrace: %s: n=%d p50=%v p90=%v p99=%v p99.9=%v max=%v\n",
			x.name, len(x.v), q(.5), q(.9), q(.99), q(.999), x.v[len(x.v)-1])
	}
}
