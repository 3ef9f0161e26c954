//go:build latetrace

package engine

import (
	"fmt"
	"os"
	"slices"
	"sync"
	"time"
)

// A debug build (go build -tags latetrace) records, for every job handed to
// a blocked client, how long after the first nanosecond of its due
// millisecond the timer goroutine woke and the waiter was resolved, and
// prints the percentiles to stderr when the engine stops. Not in the
// normal build: traceOn is false there and the calls compile away.
const traceOn = true

var lt struct {
	sync.Mutex
	wake, serve, woken, logged []time.Duration
	advance                    []time.Duration
	at                         map[*Waiter]time.Time // resolved, not yet woken
	byTicket                   map[uint64]time.Time  // woken, reply waiting for its log write
}

// traceWake records how late the timer goroutine woke for deadline dl.
func (e *Engine) traceWake(dl int64) {
	d := e.opts.Now().Sub(e.start.Add(time.Duration(dl-e.startMs) * time.Millisecond))
	lt.Lock()
	lt.wake = append(lt.wake, d)
	lt.Unlock()
}

// traceServe records how late waiter w was resolved with its job.
func (e *Engine) traceServe(w *Waiter) {
	now := time.Now()
	d := e.opts.Now().Sub(e.start.Add(time.Duration(w.d.Due-e.startMs) * time.Millisecond))
	lt.Lock()
	if lt.at == nil {
		lt.at, lt.byTicket = map[*Waiter]time.Time{}, map[uint64]time.Time{}
	}
	lt.serve = append(lt.serve, d)
	lt.at[w] = now
	lt.Unlock()
}

// traceWoken records how long after its resolution the client's goroutine
// took the job (Waiter.Result).
func traceWoken(w *Waiter) {
	now := time.Now()
	lt.Lock()
	if at, ok := lt.at[w]; ok {
		delete(lt.at, w)
		lt.woken = append(lt.woken, now.Sub(at))
		if w.d.Ticket != 0 {
			lt.byTicket[w.d.Ticket] = at
		}
	}
	lt.Unlock()
}

// traceDurable records how long after its resolution a job's reply was
// free to leave: its pop record written to the log (WaitDurable returned).
func traceDurable(ticket uint64) {
	now := time.Now()
	lt.Lock()
	if at, ok := lt.byTicket[ticket]; ok {
		delete(lt.byTicket, ticket)
		lt.logged = append(lt.logged, now.Sub(at))
	}
	lt.Unlock()
}

// traceAdvance records how long one advance of the timer goroutine held
// the lock (firing, cascading coarse buckets, serving waiters).
func traceAdvance(d time.Duration) {
	lt.Lock()
	lt.advance = append(lt.advance, d)
	lt.Unlock()
}

func traceDump() {
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
