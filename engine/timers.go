package engine

import (
	"github.com/delayd/delayd/record"
	"github.com/delayd/delayd/wheel"
)

// Timers are the engine's clocks that are not jobs: a recurring schedule's
// next firing, the end of a finished unique id's tombstone, the moment a
// rate-limited queue earns its next token. They ride a second timing wheel
// whose handles index e.tm.recs, so a job's slot stays its handle in the
// job wheel and neither slab grows for the other. The engine's one timer
// goroutine sleeps until the earlier of the two wheels' deadlines, and
// advanceLocked moves both: jobs first, then timers, so a timer firing at
// t sees every job due by t already ready.
//
// What a timer means is its kind and ref; the kind's feature owns it
// (features.go), and onTimer dispatches to it. Whether a
// kind is armed on replay or only by a live leader is the kind's business
// (a schedule fires only where firings are decided; a tombstone's end is
// derived from the time its job ended, live and on replay alike).

// Timer kinds.
const (
	timerFree     uint8 = iota
	timerSchedule       // ref: the schedule's index (schedule.go)
	timerTomb           // ref: the tombstone's key (unique.go)
	timerLimit          // ref: the limit's ID (queue.Limits; limit.go)
)

// timer is one record of the timer slab.
type timer struct {
	kind uint8
	ref  uint64
}

// timers is the second wheel and its slab of records.
type timers struct {
	w    *wheel.Wheel
	recs []timer
	free []uint32
	buf  []uint32
	seq  uint64
}

// addTimer schedules a timer of this kind and ref at due (unix ms) and
// returns its handle; ok is false when due is not after the wheel's clock
// (the caller acts at once instead). Called with mu held. O(1).
func (e *Engine) addTimer(kind uint8, ref uint64, due int64) (uint32, bool) {
	t := &e.tm
	if t.w == nil {
		now := e.opNow
		if e.wheel != nil {
			now = e.wheel.Now()
		}
		t.w = wheel.New(e.opts.Tick, now)
	}
	var h uint32
	if n := len(t.free); n > 0 {
		h = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		t.recs = append(t.recs, timer{})
		h = uint32(len(t.recs) - 1)
	}
	t.seq++
	if !t.w.Add(h, due, t.seq) {
		t.free = append(t.free, h)
		return 0, false
	}
	t.recs[h] = timer{kind: kind, ref: ref}
	e.poke(due)
	return h, true
}

// stopTimer cancels a timer addTimer returned. O(1).
func (e *Engine) stopTimer(h uint32) {
	t := &e.tm
	if t.w != nil && t.w.Remove(h) {
		t.recs[h] = timer{}
		t.free = append(t.free, h)
	}
}

// timerDue is when a scheduled timer fires.
func (e *Engine) timerDue(h uint32) (int64, bool) {
	if e.tm.w == nil {
		return 0, false
	}
	return e.tm.w.Due(h)
}

// nextTimer is the timer wheel's next deadline.
func (e *Engine) nextTimer() (int64, bool) {
	if e.tm.w == nil {
		return 0, false
	}
	return e.tm.w.NextDeadline()
}

// advanceTimers fires every timer due by now, in (due, order set). Called
// by advanceLocked after the job wheel moved.
func (e *Engine) advanceTimers(now int64) {
	t := &e.tm
	if t.w == nil {
		return
	}
	if dl, ok := t.w.NextDeadline(); !ok || dl > now {
		t.w.Advance(now, nil) // keep the clock with the job wheel's
		return
	}
	fired := t.w.Advance(now, t.buf[:0])
	t.buf = nil // a timer's action may advance again (it should not)
	for _, h := range fired {
		tr := t.recs[h]
		t.recs[h] = timer{}
		t.free = append(t.free, h)
		e.onTimer(tr, now)
	}
	t.buf = fired[:0]
}

// onTimer runs a fired timer's action. Called with mu held.
func (e *Engine) onTimer(t timer, now int64) {
	if fire := timerOf[t.kind]; fire != nil {
		fire(e, t.ref, now) // the kind's owner (features.go)
	}
}

// resetTimers drops every timer (resetState: whatever they stood for is
// rebuilt by replay or re-armed).
func (e *Engine) resetTimers() {
	e.tm = timers{}
}

// stateRecs returns the records that recreate the engine's state that is
// not jobs (each feature's state: tombstones, limits, pauses, schedules;
// features.go), stamped now, for a log rewrite and a cluster snapshot; they
// go right after the meta record, before any job. Called with mu held.
func (e *Engine) stateRecs(now int64) []record.Rec {
	var out []record.Rec
	for _, state := range stateOf {
		out = state(e, out, now)
	}
	return out
}
