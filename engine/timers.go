package engine

import (
	"github.com/delayd/delayd/record"
	"github.com/delayd/delayd/wheel"
)

// Timers are the engine's clocks that are not jobs (a schedule's firing, a
// tombstone's end, a rate limit's next token), on a second wheel
// (wheel.Timers; docs/decisions/timer-set.md) so a job's slot stays its
// handle in the job wheel. advanceLocked moves the job wheel first, so a
// timer firing at t sees every job due by t ready. A kind's feature owns
// it (features.go) and decides whether it is armed on replay.

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
