package engine

import "github.com/delayd/delayd/record"

// Features register here, once each: the record kinds a feature logs and
// how each applies, its part of a rewrite or snapshot, its reset, and its
// timer kind; apply, stateRecs, resetState and onTimer read the tables init
// builds (docs/architecture.md, "Adding a record kind"). The order is the
// order stateRecs writes in, so a new feature goes at the end.

// rewrite says how a record kind's effect reaches a log rewrite or a
// snapshot, which replace the log with the state it built.
type rewrite uint8

const (
	rewriteUnset rewrite = iota // not said: TestEveryKindRegistered fails
	rewriteState                // its feature's state writes it as it is
	rewriteJobs                 // the rewrite writes every live job as one (the job plan)
	rewriteMeta                 // the rewrite's first record
	rewriteNever                // a change: what it leaves is written as other kinds
)

// kind is one record kind's registration.
type kind struct {
	op byte
	// apply applies a decoded record of the kind, live (logApply) or on
	// replay. nil for direct kinds.
	apply func(e *Engine, r *record.Rec)
	// direct kinds are applied by apply's own switch, ahead of the table:
	// the replay hot path (an add, a pop, an ack) makes no call through a
	// function value, which would also move each record to the heap. The
	// unit is unframed by replayRecord before apply.
	direct  bool
	rewrite rewrite
}

// feature is one feature's registration.
type feature struct {
	name  string
	kinds []kind
	// state appends the records that recreate the feature's state, stamped
	// now, for a rewrite or a snapshot (after the meta record, before any
	// job). Called with mu held.
	state func(e *Engine, out []record.Rec, now int64) []record.Rec
	// reset drops the feature's state (resetState: FLUSHALL, a reload, a
	// rebuild); its timers went with the timer wheel.
	reset func(e *Engine)
	// timer is the timer kind the feature owns (timerFree: none), and
	// onTimer what a fired one does. Called with mu held.
	timer   uint8
	onTimer func(e *Engine, ref uint64, now int64)
}

// features is every feature, in stateRecs' order.
func features() []feature {
	return []feature{
		{
			name: "jobs",
			kinds: []kind{
				{op: record.Add, direct: true, rewrite: rewriteJobs},
				{op: record.Cancel, direct: true, rewrite: rewriteNever},
				{op: record.Pop, direct: true, rewrite: rewriteNever},
				{op: record.Reserve, direct: true, rewrite: rewriteNever}, // a reserved job is an add with FlagReserved
				{op: record.Move, direct: true, rewrite: rewriteNever},
				{op: record.LMove, direct: true, rewrite: rewriteNever},
				{op: record.Unit, direct: true, rewrite: rewriteNever}, // a rewrite is not a transaction
				{op: record.Meta, apply: (*Engine).applyMeta, rewrite: rewriteMeta},
				{op: record.Del, apply: func(e *Engine, r *record.Rec) { e.delQueue(r.Queue, r.Time) }, rewrite: rewriteNever},
				{op: record.Flush, apply: func(e *Engine, _ *record.Rec) { e.flushAll() }, rewrite: rewriteNever},
			},
		},
		{
			// DELAY.REQUEUE (requeue.go): a job's origin travels in its add
			// record and lives in jobs.Table's side tables, so it has no state
			// or reset of its own.
			name:  "requeue",
			kinds: []kind{{op: record.Requeue, apply: (*Engine).applyRequeue, rewrite: rewriteNever}},
		},
		{
			name:    "identity", // UNIQUE's tombstones (unique.go)
			kinds:   []kind{{op: record.Tomb, apply: (*Engine).applyTomb, rewrite: rewriteState}},
			state:   func(e *Engine, out []record.Rec, now int64) []record.Rec { return append(out, e.tombRecs(now)...) },
			reset:   func(e *Engine) { e.ident = identState{} },
			timer:   timerTomb,
			onTimer: func(e *Engine, ref uint64, _ int64) { e.tombEnded(ref) },
		},
		{
			name:  "limits", // DELAY.LIMIT (limit.go); the registry holds pauses too
			kinds: []kind{{op: record.Limit, apply: (*Engine).applyLimit, rewrite: rewriteState}},
			state: func(e *Engine, out []record.Rec, now int64) []record.Rec {
				return record.LimitRecs(out, &e.limits, now)
			},
			reset:   (*Engine).resetFlow,
			timer:   timerLimit,
			onTimer: func(e *Engine, ref uint64, _ int64) { e.limitTimer(ref) },
		},
		{
			name:  "pause", // DELAY.PAUSE (pause.go): reset with the limits' registry
			kinds: []kind{{op: record.Pause, apply: (*Engine).applyPause, rewrite: rewriteState}},
			state: func(e *Engine, out []record.Rec, now int64) []record.Rec {
				return record.PauseRecs(out, &e.limits, now)
			},
		},
		{
			name: "schedules", // DELAY.SCHEDULE (schedule.go)
			kinds: []kind{
				{op: record.Schedule, apply: (*Engine).applySchedule, rewrite: rewriteState},
				{op: record.Unschedule, apply: (*Engine).applyUnschedule, rewrite: rewriteNever},
				{op: record.Fire, apply: (*Engine).applyFire, rewrite: rewriteNever}, // the schedule's state counts it
			},
			state: func(e *Engine, out []record.Rec, now int64) []record.Rec {
				return record.ScheduleRecs(out, &e.sched, nil, now)
			},
			reset:   (*Engine).resetSchedules,
			timer:   timerSchedule,
			onTimer: (*Engine).onScheduleTimer,
		},
	}
}

// The tables apply, stateRecs, resetState and onTimer read, built once
// from features.
var (
	applyOf [256]func(e *Engine, r *record.Rec)
	stateOf []func(e *Engine, out []record.Rec, now int64) []record.Rec
	resetOf []func(e *Engine)
	timerOf [256]func(e *Engine, ref uint64, now int64)
)

func init() {
	for _, f := range features() {
		for _, k := range f.kinds {
			applyOf[k.op] = k.apply
		}
		if f.state != nil {
			stateOf = append(stateOf, f.state)
		}
		if f.reset != nil {
			resetOf = append(resetOf, f.reset)
		}
		if f.onTimer != nil {
			timerOf[f.timer] = f.onTimer
		}
	}
}

// applyRegistered applies a record of a kind that is not direct, through
// its registration. r is a copy: it, not apply's record, goes to the heap,
// and only for these rarer kinds.
func (e *Engine) applyRegistered(r record.Rec) {
	if f := applyOf[r.Op]; f != nil {
		f(e, &r)
	}
}

// applyMeta applies the first record of a rewritten log: the counters that
// must never go back.
func (e *Engine) applyMeta(r *record.Rec) {
	e.lastSID = max(e.lastSID, r.SID)
	e.seq = max(e.seq, r.Seq)
}
