package engine

import (
	"time"

	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/record"
)

// The ready list of a queue answers Redis's list commands, so workers that
// already pop Redis lists need no change: LPUSH/RPUSH add ready jobs with
// server ids, LPOP/RPOP/BLPOP/BRPOP take them (removing them whatever their
// ack timeout), LLEN and LRANGE read the ready list, DEL removes every job of
// a queue.

// Push adds ready jobs with server-made ids, at the tail (RPUSH) or, one
// after the other, at the head (LPUSH). It returns the ready length right
// after the push, before any blocked client is served, as Redis replies:
// waiters are served after the last job is in place, oldest first, so
// `LPUSH k a b c` hands a BLPOP waiter c, and `RPUSH k x` with one waiter
// replies 1. Pushed jobs get the configured default ack timeout. O(1) per
// payload.
func (e *Engine) Push(queueName []byte, payloads [][]byte, head bool) (int, uint64, error) {
	return e.PushAt(queueName, payloads, head, 0)
}

// PushAt is Push at the time the command arrived, a Mono reading the
// caller made (0: the engine reads the clock), as AddArgs.Mono: a
// pipelined RPUSH then reads the clock once, in the command layer.
func (e *Engine) PushAt(queueName []byte, payloads [][]byte, head bool, at time.Duration) (int, uint64, error) {
	for _, p := range payloads {
		if len(p) > e.opts.MaxPayload {
			return 0, 0, ErrPayloadTooLarge
		}
	}
	if len(queueName) > MaxKey {
		return 0, 0, ErrKeyTooLong
	}
	wr, err := e.begin(at)
	if err != nil {
		return 0, 0, err
	}
	defer wr.end()
	now := wr.now
	if e.opts.MaxJobs > 0 && e.njobs+len(payloads) > e.opts.MaxJobs {
		return 0, 0, ErrMaxJobs
	}
	var ticket uint64
	flags := byte(record.FlagReady)
	if head {
		flags = record.FlagHead
	}
	var qi uint32
	for _, p := range payloads {
		e.seq++
		r := record.Rec{Op: record.Add, Time: now, Queue: queueName, SID: e.newSID(queueName, now), Due: now, Seq: e.seq,
			Flags: flags, Payload: p, AckTimeout: e.opts.AckTimeout, Retry: -1}
		ticket = e.logRec(&r)
		qi, _ = e.place(&r, true, true)
		e.stats.Added++
		e.queues[qi].Added++
	}
	n := e.queues[qi].Ready
	e.serve(qi) // the pops it logs follow every add record
	return n, ticket, nil
}

// ListPop removes up to count ready jobs from the head (or tail) of a queue.
// ok is false when the queue holds no ready job. O(count).
func (e *Engine) ListPop(queueName []byte, count int, right bool) ([]Delivery, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Delivery
	for len(out) < count {
		d, ok := e.popLocked([][]byte{queueName}, listMode(right), nil, 0)
		if !ok {
			break
		}
		out = append(out, d)
	}
	return out, len(out) > 0
}

// ListPopOne is LPOP or RPOP without a count: one job, into a Scratch (see
// Delivery), with no slice to build. O(1).
func (e *Engine) ListPopOne(queueName []byte, right bool, to *Scratch) (Delivery, bool) {
	return e.ListPopOneAt(queueName, right, to, 0)
}

// ListPopOneAt is ListPopOne at the time the command arrived (a Mono
// reading; 0: the engine reads the clock), as PushAt. A list pop reserves
// nothing, so the reading only advances the wheel, which never goes back
// (clockAt).
func (e *Engine) ListPopOneAt(queueName []byte, right bool, to *Scratch, at time.Duration) (Delivery, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	to.Reset()
	return e.popLocked([][]byte{queueName}, listMode(right), to, at)
}

func listMode(right bool) PopMode {
	if right {
		return PopRight
	}
	return PopLeft
}

// Len is the length of a queue's ready list. O(1).
func (e *Engine) Len(queueName []byte) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advanceLocked(e.nowMs())
	if qi, ok := e.queueFor(queueName, false); ok {
		return e.queues[qi].Ready
	}
	return 0
}

// Range returns the payloads of ready jobs start..stop (inclusive; negative
// counts from the end), as LRANGE does. O(start+count).
func (e *Engine) Range(queueName []byte, start, stop int64) [][]byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advanceLocked(e.nowMs())
	qi, ok := e.queueFor(queueName, false)
	if !ok {
		return nil
	}
	n := int64(e.queues[qi].Ready)
	if start < 0 {
		start = max(n+start, 0)
	}
	if stop < 0 {
		stop = n + stop
	}
	stop = min(stop, n-1)
	if start > stop || start >= n {
		return [][]byte{}
	}
	out := make([][]byte, 0, stop-start+1)
	i := int64(0)
	e.queues[qi].Order.Each(&e.jobs.Slab, func(s uint32) bool {
		if i >= start {
			out = append(out, append([]byte(nil), e.jobs.Payload(e.jobs.At(s))...))
		}
		i++
		return i <= stop
	})
	return out
}

// Del removes every job of the named queues, in any state, and returns how
// many of them held a job. Blocked clients stay blocked. The jobs are freed
// in the background (lazyfree.go): O(1) per queue here.
func (e *Engine) Del(names [][]byte) (int, uint64, error) {
	if e.readDoomed(names) {
		defer e.unlockDoomed()
	}
	wr, err := e.begin(0)
	if err != nil {
		return 0, 0, err
	}
	defer wr.end()
	var ticket uint64
	n := 0
	for _, name := range names {
		qi, ok := e.queueFor(name, false)
		if !ok {
			continue
		}
		q := &e.queues[qi]
		if q.Jobs() == 0 {
			continue
		}
		n++
		r := record.Rec{Op: record.Del, Time: e.recNow(), Queue: name}
		ticket = e.logRec(&r)
		e.delQueue(name, r.Time)
	}
	return n, ticket, nil
}

// delQueue removes every job of a queue (DEL, and its replay): a live
// engine, or a follower, leaves them to the freer; replay, which serves no
// client yet, frees them here. at is the DEL record's time.
func (e *Engine) delQueue(name []byte, at int64) {
	qi, ok := e.queueFor(name, false)
	if !ok {
		return
	}
	if !e.j.replaying {
		e.doom(qi, at)
		return
	}
	e.dropFar(qi) // after the opened checkpoint's mark, its runs' jobs of the queue go too
	e.releaseQueue(qi)
	q := &e.queues[qi]
	for s := q.Order.First(); s != 0; s = q.Order.First() {
		e.remove(s - 1)
		if !q.live {
			return
		}
	}
	if q.Jobs() > 0 { // held by a group limit, or not ready
		for s := range e.jobs.Len() {
			if j := e.jobs.At(s); j.State != jobs.StateFree && j.Queue == qi {
				e.remove(uint32(s))
				if !q.live {
					return
				}
			}
		}
	}
}

// ExistsCount counts the names that hold a job in any state, as EXISTS does
// (a name given twice counts twice).
func (e *Engine) ExistsCount(names [][]byte) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, name := range names {
		if qi, ok := e.queueFor(name, false); ok {
			if q := &e.queues[qi]; q.Jobs() > 0 {
				n++
			}
		}
	}
	return n
}
