package engine

import (
	"encoding/binary"
	"errors"
	"slices"
)

// ErrBadLimit is a LimitSpec out of range.
var ErrBadLimit = errors.New("limit out of range")

// Flow control: DELAY.LIMIT key [CONCURRENCY n] [RATE n per-ms]
// [GROUPCONCURRENCY n] | OFF.
//
// A limit belongs to a queue's name, not to the queue: a queue is freed when
// it empties, and its limit must hold when it fills again. The registry maps
// names to limits and attaches a limit to its queue when the queue is made,
// as watch.go attaches watches, so a queue with no limit pays one nil check
// per pop.
//
// Every take from a ready list obeys the limit, whatever the command
// (DELAY.POP, LPOP, BLPOP, RPOP, LMOVE and their blocking forms): a list
// pop cannot bypass a limit set for DELAY.POP. A take is refused while
//   - CONCURRENCY n: n jobs of the queue are reserved (a reservation is a
//     pop of a job with an ack timeout, until ACK, NACK, expiry or cancel);
//     list pops reserve nothing, so they do not count, but they wait too;
//   - RATE n per-ms: n jobs were taken in the last per-ms milliseconds;
//   - GROUPCONCURRENCY n: this applies per group (ready.go holds a group
//     with n reserved jobs out of the rings; the other groups go on).
// A queue that refuses is skipped: a DELAY.POP naming other keys takes from
// them, and a waiter parked on it is served when room frees (a reservation
// ends, or a token comes back: a timer of kind timerLimit).
//
// RATE is a bucket of n tokens in which each token spent comes back per-ms
// after it was spent: exactly "at most n in any window of per-ms", bursts
// of up to n included. (A bucket refilled continuously hands out up to 2n
// in one window: its n stored tokens plus the n refilled meanwhile.) It is
// kept as the times of the takes still in the window, one entry per
// millisecond that had any: at most min(n, per-ms) entries.
//
// The limit itself is logged (record op 15, set outright, all zero = OFF)
// and written by rewrite and snapshot. Which job goes when, and so the
// tokens, is the leader's decision: the pops it makes are logged, the
// bucket is not. A restart or a new leader starts with a full bucket.
//
//	limit: op time queue concurrency rate per groupconcurrency (uvarints)

// LimitSpec is a queue's flow limit; a zero field is no limit of that kind.
type LimitSpec struct {
	Concurrency      int64 // jobs reserved at once
	Rate, Per        int64 // at most Rate takes in any Per ms (both or neither)
	GroupConcurrency int64 // jobs of one group reserved at once
}

// MaxLimit bounds every number of a LimitSpec.
const MaxLimit = 1<<31 - 1

// IsZero says the spec sets no limit (OFF).
func (s LimitSpec) IsZero() bool { return s == LimitSpec{} }

// Valid says every field is in range and RATE has its window.
func (s LimitSpec) Valid() bool {
	in := func(n int64) bool { return n >= 0 && n <= MaxLimit }
	return in(s.Concurrency) && in(s.Rate) && in(s.Per) && in(s.GroupConcurrency) && (s.Rate == 0) == (s.Per == 0)
}

func (s LimitSpec) append(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(s.Concurrency))
	dst = binary.AppendUvarint(dst, uint64(s.Rate))
	dst = binary.AppendUvarint(dst, uint64(s.Per))
	return binary.AppendUvarint(dst, uint64(s.GroupConcurrency))
}

func (d *decoder) limitSpec() LimitSpec {
	s := LimitSpec{Concurrency: int64(d.uvarint()), Rate: int64(d.uvarint()), Per: int64(d.uvarint()),
		GroupConcurrency: int64(d.uvarint())}
	if d.err == nil && !s.Valid() {
		d.err = errBadRecord
	}
	return s
}

// flow is the registry of limits.
type flow struct {
	limits map[string]*limit
	byID   []*limit // a timer's ref is an index here
	idFree []uint32
	// freed lists queues whose waiters may be served because a reservation
	// ended; served at the end of the operation that ended it (serveFreed),
	// not in the middle of it.
	freed []uint32
}

// limit is one name's limit and, on the leader, its bucket.
type limit struct {
	id    uint32
	name  string
	spec  LimitSpec
	spent []spend // takes still in the window, oldest first, from spent[head]
	head  int
	n     int64 // their total
	timer uint32
	armed bool // timer is set for the oldest token's return
	// paused: DELAY.PAUSE (pause.go). A paused name with no limit has a
	// zero spec; the entry goes when neither is left.
	paused bool
}

type spend struct {
	at int64 // engine ms
	n  int64
}

// expire gives back the tokens spent at or before now-per.
func (l *limit) expire(now int64) {
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

// canTake says whether a pop may take a job from queue qi now: it has a
// ready job its order lets go and its limit has room. Called with mu held,
// on the live leader only (a refusal may arm the limit's timer).
func (e *Engine) canTake(qi uint32) bool {
	q := &e.queues[qi]
	if q.rd.first() == 0 {
		return false
	}
	if q.limit == nil {
		return true
	}
	l := q.limit
	if l.paused {
		return false // DELAY.RESUME serves the waiters
	}
	if l.spec.Concurrency > 0 && int64(q.reserved) >= l.spec.Concurrency {
		return false // a reservation's end serves the waiters
	}
	if l.spec.Rate > 0 {
		now := e.recNow()
		l.expire(now)
		if l.n >= l.spec.Rate {
			e.armLimit(l, l.spent[l.head].at+l.spec.Per)
			return false
		}
	}
	return true
}

// nextReady returns the slot a pop from the head (or the tail) of qi takes,
// and spends a token of its RATE. canTake(qi) must have said yes.
func (e *Engine) nextReady(qi uint32, tail bool) uint32 {
	q := &e.queues[qi]
	if l := q.limit; l != nil && l.spec.Rate > 0 {
		now := e.recNow()
		if k := len(l.spent); k > l.head && l.spent[k-1].at == now {
			l.spent[k-1].n++
		} else {
			l.spent = append(l.spent, spend{at: now, n: 1})
		}
		l.n++
	}
	if tail {
		return q.rd.last() - 1
	}
	return q.rd.first() - 1
}

// armLimit sets l's timer for due (when a token comes back), once.
func (e *Engine) armLimit(l *limit, due int64) {
	if l.armed {
		return
	}
	if h, ok := e.addTimer(timerLimit, uint64(l.id), due); ok {
		l.timer, l.armed = h, true
	}
}

// limitTimer runs when a token of a limit comes back: the queue's waiters
// may be served now.
func (e *Engine) limitTimer(ref uint64) {
	if ref >= uint64(len(e.flow.byID)) || e.flow.byID[ref] == nil {
		return
	}
	l := e.flow.byID[ref]
	l.armed = false
	if qi, ok := e.byName[l.name]; ok {
		e.serve(qi)
	}
}

// unreserved notes that a reservation of the job in slot s of queue qi
// ended (the queue's count is already down): its group may be released,
// and a limited queue's waiters may be served once the operation is done.
func (e *Engine) unreserved(qi, s uint32) {
	q := &e.queues[qi]
	if freed := q.rd.unreserve(&e.jobs, s); (freed || q.limit != nil) && q.whead != nil {
		if !slices.Contains(e.flow.freed, qi) { // a few queues at most: bounded by the queues with waiters
			e.flow.freed = append(e.flow.freed, qi)
		}
	}
}

// serveFreed serves the waiters of the queues where reservations ended.
func (e *Engine) serveFreed() {
	for len(e.flow.freed) > 0 {
		n := len(e.flow.freed) - 1
		qi := e.flow.freed[n]
		e.flow.freed = e.flow.freed[:n]
		if int(qi) < len(e.queues) && e.queues[qi].live {
			e.serve(qi)
		}
	}
}

// joinLane puts the job in slot s, new to queue qi, in its group and
// priority (ready.go).
func (e *Engine) joinLane(qi, s uint32, grp []byte, prio uint8) {
	q := &e.queues[qi]
	q.rd.join(&e.jobs, s, grp, prio, q.reserved)
}

// laneOf returns the group (a copy; nil for the default group) and the
// priority of the job in slot s.
func (e *Engine) laneOf(s uint32) ([]byte, uint8) {
	g, p := e.queues[e.jobs.at(s).queue].rd.laneOf(&e.jobs, s)
	if g == "" {
		return nil, p
	}
	return []byte(g), p
}

// attachLimit gives a new queue its name's limit, if it has one.
func (e *Engine) attachLimit(qi uint32) {
	q := &e.queues[qi]
	l := e.flow.limits[q.name]
	q.limit = l
	if l != nil && l.spec.GroupConcurrency > 0 {
		q.rd.setGroupCap(uint32(l.spec.GroupConcurrency), q.reserved)
	}
}

// resetFlow forgets the limits (resetState: replay, a reload or a restore
// sets them again from the records).
func (e *Engine) resetFlow() {
	e.flow = flow{}
}

// keepLimits puts back the limits a FLUSHALL keeps (resetState dropped
// them); their timers went with the others.
func (e *Engine) keepLimits(limits map[string]*limit) {
	for _, l := range limits {
		l.armed = false
		e.registerLimit(l)
	}
}

// unregisterLimit forgets a name's limit entry (no limit and not paused).
func (e *Engine) unregisterLimit(l *limit) {
	delete(e.flow.limits, l.name)
	e.flow.byID[l.id] = nil
	e.flow.idFree = append(e.flow.idFree, l.id)
}

func (e *Engine) registerLimit(l *limit) {
	f := &e.flow
	if f.limits == nil {
		f.limits = make(map[string]*limit)
	}
	if n := len(f.idFree); n > 0 {
		l.id = f.idFree[n-1]
		f.idFree = f.idFree[:n-1]
		f.byID[l.id] = l
	} else {
		l.id = uint32(len(f.byID))
		f.byID = append(f.byID, l)
	}
	f.limits[l.name] = l
}

// applyLimit applies a limit record, live or replayed: the name's limit is
// set outright, or removed when the record's spec is zero; then the
// queue's waiters are served, if there is room now.
func (e *Engine) applyLimit(r *rec) {
	name := string(r.queue)
	l := e.flow.limits[name]
	if r.limit.IsZero() {
		if l == nil {
			return
		}
		if l.armed {
			e.stopTimer(l.timer)
			l.armed = false
		}
		if !l.paused {
			e.unregisterLimit(l)
			l = nil
		} else {
			l.spent, l.head, l.n = nil, 0, 0 // the entry stays for the pause alone
		}
	} else if l == nil {
		l = &limit{name: name}
		e.registerLimit(l)
	}
	if l != nil {
		l.spec = r.limit
	}
	qi, ok := e.byName[name]
	if !ok {
		return
	}
	q := &e.queues[qi]
	q.limit = l
	var gc uint32
	if l != nil {
		gc = uint32(l.spec.GroupConcurrency)
	}
	q.rd.setGroupCap(gc, q.reserved)
	e.serve(qi)
}

// limitRecs appends a limit record for each limit, for a rewrite or a
// snapshot.
func (e *Engine) limitRecs(out []rec, now int64) []rec {
	names := make([]string, 0, len(e.flow.limits))
	for name, l := range e.flow.limits {
		if !l.spec.IsZero() { // only paused (pauseRecs)
			names = append(names, name)
		}
	}
	slices.Sort(names) // the same state makes the same snapshot
	for _, name := range names {
		out = append(out, rec{op: opLimit, time: now, queue: []byte(name), limit: e.flow.limits[name].spec})
	}
	return out
}

// SetLimit sets the flow limit of a queue name outright (a zero spec: OFF)
// and returns the log ticket to wait for. O(groups of the queue).
func (e *Engine) SetLimit(name []byte, s LimitSpec) (uint64, error) {
	if !s.Valid() {
		return 0, ErrBadLimit
	}
	if len(name) > MaxKey {
		return 0, ErrKeyTooLong
	}
	wr, err := e.begin(0)
	if err != nil {
		return 0, err
	}
	defer wr.end()
	now := wr.now
	r := rec{op: opLimit, time: now, queue: name, limit: s}
	ticket := e.logRec(&r) // before serving, whose pops follow it
	e.applyLimit(&r)
	return ticket, nil
}

// LimitInfo is a queue's limit as DELAY.LIMIT key shows it.
type LimitInfo struct {
	LimitSpec
	Tokens   int64 // RATE tokens left now (the leader's bucket); -1 without RATE
	Reserved int   // jobs of the queue reserved now
}

// Limit returns the flow limit of a queue name; ok is false when it has
// none.
func (e *Engine) Limit(name []byte) (LimitInfo, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	l, ok := e.flow.limits[string(name)]
	if !ok || l.spec.IsZero() { // paused, with no limit
		return LimitInfo{}, false
	}
	info := LimitInfo{LimitSpec: l.spec, Tokens: -1}
	if l.spec.Rate > 0 {
		l.expire(e.nowMs())
		info.Tokens = max(l.spec.Rate-l.n, 0)
	}
	if qi, ok := e.byName[string(name)]; ok {
		info.Reserved = e.queues[qi].reserved
	}
	return info, true
}
