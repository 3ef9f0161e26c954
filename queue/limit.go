package queue

import (
	"iter"
	"slices"
)

// Flow control: DELAY.LIMIT key [CONCURRENCY n] [RATE n per-ms]
// [GROUPCONCURRENCY n] | OFF, and DELAY.PAUSE key.
//
// A limit belongs to a queue's name, not to the queue: a queue is freed when
// it empties, and its limit must hold when it fills again. Limits maps names
// to limits; the engine attaches a name's limit to its queue when the queue
// is made (Queue.SetLimit), so a queue with no limit pays one nil check per
// pop.
//
// Every take from a ready order obeys the limit, whatever the command
// (DELAY.POP, LPOP, BLPOP, RPOP, LMOVE and their blocking forms): a list
// pop cannot bypass a limit set for DELAY.POP. A take is refused while
//   - the name is paused (DELAY.PAUSE);
//   - CONCURRENCY n: n jobs of the queue are reserved (a reservation is a
//     pop of a job with an ack timeout, until ACK, NACK, expiry or cancel);
//     list pops reserve nothing, so they do not count, but they wait too;
//   - RATE n per-ms: n jobs were taken in the last per-ms milliseconds;
//   - GROUPCONCURRENCY n: this applies per group (the Order holds a group
//     with n reserved jobs out of its rings; the other groups go on).
// A queue that refuses is skipped by a pop naming other keys. Only RATE's
// refusal ends by itself, so only it says when to ask again (CanTake's
// retryAt): the engine sets a timer for that time and serves the queue's
// waiters then. A pause ends with DELAY.RESUME and a reservation with its
// ACK, NACK or expiry; the engine serves the waiters at those.
//
// RATE is a bucket of n tokens in which each token spent comes back per-ms
// after it was spent: exactly "at most n in any window of per-ms", bursts
// of up to n included. (A bucket refilled continuously hands out up to 2n
// in one window: its n stored tokens plus the n refilled meanwhile.) It is
// kept as the times of the takes still in the window, one entry per
// millisecond that had any: at most min(n, per-ms) entries.
//
// Which job goes when, and so the tokens, is the leader's decision: the pops
// it makes are logged, the bucket is not. A restart or a new leader starts
// with a full bucket.

// Spec is a queue's flow limit; a zero field is no limit of that kind.
type Spec struct {
	Concurrency      int64 // jobs reserved at once
	Rate, Per        int64 // at most Rate takes in any Per ms (both or neither)
	GroupConcurrency int64 // jobs of one group reserved at once
}

// MaxLimit bounds every number of a Spec.
const MaxLimit = 1<<31 - 1

// IsZero says the spec sets no limit (OFF).
func (s Spec) IsZero() bool { return s == Spec{} }

// Valid says every field is in range and RATE has its window.
func (s Spec) Valid() bool {
	in := func(n int64) bool { return n >= 0 && n <= MaxLimit }
	return in(s.Concurrency) && in(s.Rate) && in(s.Per) && in(s.GroupConcurrency) && (s.Rate == 0) == (s.Per == 0)
}

// Limit is one name's limit and pause flag and, on the leader, its RATE
// bucket.
type Limit struct {
	id     uint32
	name   string
	spec   Spec
	spent  []spend // takes still in the window, oldest first, from spent[head]
	head   int
	n      int64 // their total
	paused bool  // a paused name with no limit has a zero spec

	// Timer and Armed are the engine's: the timer it set for the retryAt
	// CanTake answered, so that it sets one at a time and can stop it.
	Timer uint32
	Armed bool
}

type spend struct {
	at int64 // engine ms
	n  int64
}

// ID is the limit's index in its Limits, stable while it is registered:
// what a timer names it by.
func (l *Limit) ID() uint32 { return l.id }

// Name is the queue name the limit belongs to.
func (l *Limit) Name() string { return l.name }

// Spec is the limit as set (zero: only paused).
func (l *Limit) Spec() Spec { return l.spec }

// Paused says whether the name is paused.
func (l *Limit) Paused() bool { return l.paused }

// Tokens is the RATE tokens left at now; -1 without RATE.
func (l *Limit) Tokens(now int64) int64 {
	if l.spec.Rate == 0 {
		return -1
	}
	l.expire(now)
	return max(l.spec.Rate-l.n, 0)
}

// expire gives back the tokens spent at or before now-per.
func (l *Limit) expire(now int64) {
	for l.head < len(l.spent) && l.spent[l.head].at+l.spec.Per <= now {
		l.n -= l.spent[l.head].n
		l.head++
	}
	switch {
	case l.head == len(l.spent):
		l.spent, l.head = l.spent[:0], 0
	case l.head > 64 && l.head > len(l.spent)/2:
		// Amortized O(1): the live half moves once per half expired.
		l.spent = append(l.spent[:0], l.spent[l.head:]...)
		l.head = 0
	}
}

// allows says whether a queue with reserved jobs reserved may have one
// more taken at now; when only RATE refuses, retryAt is when its oldest
// token comes back.
func (l *Limit) allows(reserved int, now int64) (ok bool, retryAt int64) {
	if l.paused {
		return false, 0
	}
	if l.spec.Concurrency > 0 && int64(reserved) >= l.spec.Concurrency {
		return false, 0
	}
	if l.spec.Rate > 0 {
		l.expire(now)
		if l.n >= l.spec.Rate {
			return false, l.spent[l.head].at + l.spec.Per
		}
	}
	return true, 0
}

// spendToken takes a RATE token at now.
func (l *Limit) spendToken(now int64) {
	if k := len(l.spent); k > l.head && l.spent[k-1].at == now {
		l.spent[k-1].n++
	} else {
		l.spent = append(l.spent, spend{at: now, n: 1})
	}
	l.n++
}

// Limits is the registry of limits and pauses by queue name.
type Limits struct {
	byName map[string]*Limit
	byID   []*Limit // a timer's ref is an index here
	idFree []uint32
}

// Len is the number of names with a limit or a pause.
func (f *Limits) Len() int { return len(f.byName) }

// Of returns the limit of a name, or nil.
func (f *Limits) Of(name string) *Limit { return f.byName[name] }

// ByID returns the limit a timer names, or nil if it is gone.
func (f *Limits) ByID(id uint64) *Limit {
	if id >= uint64(len(f.byID)) {
		return nil
	}
	return f.byID[id]
}

// All yields every limit, in no order.
func (f *Limits) All() iter.Seq[*Limit] {
	return func(yield func(*Limit) bool) {
		for _, l := range f.byName {
			if !yield(l) {
				return
			}
		}
	}
}

// Names returns the names whose limit keep accepts, sorted: the same state
// makes the same rewrite or snapshot.
func (f *Limits) Names(keep func(*Limit) bool) []string {
	var names []string
	for name, l := range f.byName {
		if keep(l) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// SetSpec sets a name's limit outright and returns its entry, nil when the
// name has neither a limit nor a pause left; ok is false when nothing
// changed (OFF for a name with no entry). A zero spec of a paused name
// keeps the entry for the pause and empties its bucket. The caller stops
// the entry's timer first if the spec is zero.
func (f *Limits) SetSpec(name string, s Spec) (l *Limit, ok bool) {
	l = f.byName[name]
	if s.IsZero() {
		if l == nil {
			return nil, false
		}
		if !l.paused {
			f.unregister(l)
			return nil, true
		}
		l.spent, l.head, l.n = nil, 0, 0
	} else if l == nil {
		l = f.register(name)
	}
	l.spec = s
	return l, true
}

// SetPaused sets a name's pause flag outright and returns its entry, nil
// when the name has neither a limit nor a pause left; ok is false when
// nothing changed (a resume of a name with no entry).
func (f *Limits) SetPaused(name string, paused bool) (l *Limit, ok bool) {
	l = f.byName[name]
	switch {
	case l == nil && !paused:
		return nil, false
	case l == nil:
		l = f.register(name)
	}
	l.paused = paused
	if !paused && l.spec.IsZero() {
		f.unregister(l)
		return nil, true
	}
	return l, true
}

func (f *Limits) register(name string) *Limit {
	if f.byName == nil {
		f.byName = make(map[string]*Limit)
	}
	l := &Limit{name: name}
	if n := len(f.idFree); n > 0 {
		l.id = f.idFree[n-1]
		f.idFree = f.idFree[:n-1]
		f.byID[l.id] = l
	} else {
		l.id = uint32(len(f.byID))
		f.byID = append(f.byID, l)
	}
	f.byName[name] = l
	return l
}

func (f *Limits) unregister(l *Limit) {
	delete(f.byName, l.name)
	f.byID[l.id] = nil
	f.idFree = append(f.idFree, l.id)
}
