package engine

import (
	"github.com/delayd/delayd/record"
	"github.com/delayd/delayd/wheel"
)

// Timers are the engine's clocks that are not jobs: a recurring schedule's
// next firing, the end of a finished unique id's tombstone, the moment a
// rate-limited queue earns its next token. They ride a second timing wheel
// (wheel.Timers) whose handles index a slab of (kind, ref), so a job's slot
// stays its handle in the job wheel and neither slab grows for the other. The engine's one timer
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

// addTimer schedules a timer of this kind and ref at due (unix ms) and
// returns its handle; ok is false when due is not after the wheel's clock
// (the caller acts at once instead). Called with mu held. O(1).
func (e *Engine) addTimer(kind uint8, ref uint64, due int64) (uint32, bool) {
	if !e.tm.Started() {
		now := e.opNow
		if e.wheel != nil {
			now = e.wheel.Now()
		}
		e.tm.Start(e.opts.Tick, now)
	}
	h, ok := e.tm.Add(wheel.Timer{Kind: kind, Ref: ref}, due)
	if ok {
		e.poke(due)
	}
	return h, ok
}

// stopTimer cancels a timer addTimer returned. O(1).
func (e *Engine) stopTimer(h uint32) { e.tm.Stop(h) }

// advanceTimers fires every timer due by now, in (due, order set). Called
// by advanceLocked after the job wheel moved.
func (e *Engine) advanceTimers(now int64) {
	fired := e.tm.Advance(now)
	for _, h := range fired {
		e.onTimer(e.tm.Take(h), now)
	}
	e.tm.Recycle(fired)
}

// onTimer runs a fired timer's action. Called with mu held.
func (e *Engine) onTimer(t wheel.Timer, now int64) {
	if fire := timerOf[t.Kind]; fire != nil {
		fire(e, t.Ref, now) // the kind's owner (features.go)
	}
}

// resetTimers drops every timer (resetState: whatever they stood for is
// rebuilt by replay or re-armed).
func (e *Engine) resetTimers() {
	e.tm = wheel.Timers{}
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
