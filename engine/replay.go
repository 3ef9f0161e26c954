package engine

import (
	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/record"
)

// Replay's second core: the server-id index is built beside the replay
// (docs/decisions/replay.md). An add whose server id is above every id
// indexed so far cannot replace a job, so it hands (sid, slot) to a builder
// goroutine; every other record first waits for the builder (sync), so the
// index is the serial replay's wherever it is read. Only inside replayFile;
// a follower applying committed batches inserts as it goes.

// startSidBuilder starts the builder (jobs.SIDBuilder) for one replay of a
// log of logBytes (0: do not presize); stopSidBuilder must follow,
// whatever happens.
func (e *Engine) startSidBuilder(logBytes int64) {
	b := jobs.NewSIDBuilder(e.sidCeiling())
	// presize comes before the first insert: the applier leaves the sids
	// table alone until then.
	go b.Run(&e.jobs, func() { e.presize(logBytes) })
	e.j.build = b
}

// sidCeiling is the highest server id the index may hold: every id made or
// replayed raised lastSID.
func (e *Engine) sidCeiling() uint64 { return e.lastSID }

// stopSidBuilder syncs and ends the builder.
func (e *Engine) stopSidBuilder() {
	b := e.j.build
	if b == nil {
		return
	}
	b.Stop()
	e.j.build = nil
	e.j.sidsDeferred = b.N
}

// deferrable says whether the add record r (decoded, not yet applied) may
// leave its index insert to the builder: a server id above every indexed
// one, with no client id that could read as one, and nothing due by its
// time in either wheel (a firing can end reservations, which deletes from
// the index). Anything else must sync first.
func (e *Engine) deferrable(r *record.Rec) bool {
	b := e.j.build
	if b == nil || r.Op != record.Add || r.ID != nil || e.jobs.SIDLike || r.SID <= b.Ceil || e.wheel == nil {
		return false
	}
	if e.far.set != nil && e.far.set.Has(r.SID) {
		return false // a far job restated: place takes it out of the buckets (the records farSkips skipped left Ceil below it)
	}
	if dl, ok := e.wheel.NextDeadline(); ok && dl <= r.Time {
		return false
	}
	if dl, ok := e.tm.NextDeadline(); ok && dl <= r.Time {
		return false
	}
	return true
}

// synced is called before applying a record that was not deferrable: the
// builder catches up, and whatever the record does to the index is covered
// by the ceiling from then on.
func (e *Engine) syncSids() {
	if b := e.j.build; b != nil {
		b.Sync()
	}
}

// raiseSidCeil notes, after a record applied without the builder, that the
// index may now hold any server id made so far. A meta record makes none.
func (e *Engine) raiseSidCeil(op byte) {
	if b := e.j.build; b != nil && op != record.Meta {
		b.Ceil = max(b.Ceil, e.lastSID)
	}
}
