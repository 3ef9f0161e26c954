package engine

import (
	"errors"
	"slices"

	"github.com/delayd/delayd/queue"
	"github.com/delayd/delayd/record"
)

// ErrBadLimit is a LimitSpec out of range.
var ErrBadLimit = errors.New("limit out of range")

// DELAY.LIMIT key [CONCURRENCY n] [RATE n per-ms] [GROUPCONCURRENCY n] | OFF.
// What a limit means and how it gates a take is package queue's
// (queue/limit.go). The engine logs a limit when it is set (record.Limit,
// set outright, all zero = OFF) and writes it in a rewrite and a snapshot;
// attaches a name's limit to its queue when the queue is made; sets the
// timer a refused RATE asks for (timerLimit); and serves a queue's waiters
// when room frees (the timer, a reservation's end, a new limit).
// LimitSpec is a queue's flow limit; a zero field is no limit of that kind.
type LimitSpec = queue.Spec

// MaxLimit bounds every number of a LimitSpec.
const MaxLimit = queue.MaxLimit

// canTake says whether a pop may take a job from queue qi now: it has a
// ready job its order lets go and its limit has room. Called with mu held,
// on the live leader only: a refusal by RATE arms the limit's timer.
func (e *Engine) canTake(qi uint32) bool {
	q := &e.queues[qi]
	if q.Limit == nil {
		// CanTake's answer for a queue with no limit, with no call: the
		// common case of every pop.
		return q.Order.First() != 0
	}
	ok, retryAt := q.CanTake(e.recNow())
	if retryAt != 0 {
		e.armLimit(q.Limit, retryAt)
	}
	return ok
}

// nextReady returns the slot a pop from the head (or the tail) of qi takes,
// and spends a token of its RATE. canTake(qi) must have said yes. It
// inlines into the pops, so a pop makes one call here (Take), as it did
// when this was the engine's: keep it small (recNow inlines too; reading
// it only for a limited queue would cost the inlining).
func (e *Engine) nextReady(qi uint32, tail bool) uint32 {
	return e.queues[qi].Take(e.recNow(), tail)
}

// armLimit sets l's timer for due (when a token comes back), once.
func (e *Engine) armLimit(l *queue.Limit, due int64) {
	if l.Armed {
		return
	}
	if h, ok := e.addTimer(timerLimit, uint64(l.ID()), due); ok {
		l.Timer, l.Armed = h, true
	}
}

// limitTimer runs when a token of a limit comes back: the queue's waiters
// may be served now.
func (e *Engine) limitTimer(ref uint64) {
	l := e.limits.ByID(ref)
	if l == nil {
		return
	}
	l.Armed = false
	if qi, ok := e.byName[l.Name()]; ok {
		e.serve(qi)
	}
}

// unreserve ends the reservation of the job in slot s of queue qi: if that
// may make room (its group was held, or the queue is limited), the queue's
// waiters are served once the operation is done.
func (e *Engine) unreserve(qi, s uint32) {
	q := &e.queues[qi]
	if room := q.Unreserve(&e.jobs.Slab, s); room && q.waiters.Len() > 0 {
		if !slices.Contains(e.freed, qi) { // a few queues at most: bounded by the queues with waiters
			e.freed = append(e.freed, qi)
		}
	}
}

// serveFreed serves the waiters of the queues where reservations ended.
func (e *Engine) serveFreed() {
	for len(e.freed) > 0 {
		n := len(e.freed) - 1
		qi := e.freed[n]
		e.freed = e.freed[:n]
		if int(qi) < len(e.queues) && e.queues[qi].live {
			e.serve(qi)
		}
	}
}

// laneOf returns the group (a copy; nil for the default group) and the
// priority of the job in slot s.
func (e *Engine) laneOf(s uint32) ([]byte, uint8) {
	return record.LaneOf(&e.jobs, &e.queues[e.jobs.At(s).Queue].Queue, s)
}

// resetFlow forgets the limits (resetState: replay, a reload or a restore
// sets them again from the records).
func (e *Engine) resetFlow() {
	e.limits, e.freed = queue.Limits{}, nil
}

// keepLimits puts back the limits a FLUSHALL keeps (resetState dropped
// them); their timers went with the others.
func (e *Engine) keepLimits(limits queue.Limits) {
	for l := range limits.All() {
		l.Armed = false
	}
	e.limits = limits
}

// applyLimit applies a limit record, live or replayed: the name's limit is
// set outright, or removed when the record's spec is zero; then the
// queue's waiters are served, if there is room now.
func (e *Engine) applyLimit(r *record.Rec) {
	name := string(r.Queue)
	if l := e.limits.Of(name); l != nil && l.Armed && r.Limit.IsZero() {
		e.stopTimer(l.Timer)
		l.Armed = false
	}
	l, ok := e.limits.SetSpec(name, r.Limit)
	if !ok {
		return
	}
	qi, ok := e.byName[name]
	if !ok {
		return
	}
	e.queues[qi].SetLimit(l)
	e.serve(qi)
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
	r := record.Rec{Op: record.Limit, Time: now, Queue: name, Limit: s}
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
	l := e.limits.Of(string(name))
	if l == nil || l.Spec().IsZero() { // paused, with no limit
		return LimitInfo{}, false
	}
	info := LimitInfo{LimitSpec: l.Spec(), Tokens: l.Tokens(e.nowMs())}
	if qi, ok := e.byName[string(name)]; ok {
		info.Reserved = e.queues[qi].Reserved
	}
	return info, true
}
