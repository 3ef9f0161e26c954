package engine

import (
	"cmp"
	"slices"

	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/record"
)

// Job identity beyond the job's life: UNIQUE's tombstones and DEBOUNCE's
// cap (docs/decisions/identity.md). Package jobs keeps the per-job options
// and the tombstones and decides what a job's end leaves
// (jobs.Table.EndUnique); this file applies it: the timers, the records.
// A tombstone is derived from the record that ended its job, never logged,
// except by a rewrite or a snapshot (record.Tomb, through stateRecs).

// identState is the engine's identity state: the tombstones.
type identState struct {
	tombs jobs.Tombs
}

// entomb leaves the tombstone of a UNIQUE job that ends at time at, and
// forgets its UNIQUE option (so a later removal of the same slot does not
// leave a second one). Called before the job's id and queue are gone. O(1).
func (e *Engine) entomb(s uint32, at int64) {
	ttl, ok := e.jobs.EndUnique(s)
	if !ok {
		return
	}
	var buf [jobs.SIDLen]byte
	j := e.jobs.At(s)
	e.setTomb(jobs.TombKey([]byte(e.queues[j.Queue].name), e.jobs.ID(j, &buf)), at+ttl)
}

// entombEnded is entomb for a delivery that ended without an ACK and left no
// redelivery (exhausted): a NACK's records carry its time; an expiry is not
// logged, so its time is the reservation's deadline, which replay knows too.
func (e *Engine) entombEnded(s uint32, logged bool) {
	if e.jobs.At(s).Flags&jobs.FlagUnique == 0 {
		return
	}
	at := e.recNow()
	if !logged {
		at = e.wheel.LastDue(s)
	}
	e.entomb(s, at)
}

// setTomb keeps (queue, id) taken until end, unless a tombstone already
// holds it longer. An end already past makes none. O(1).
func (e *Engine) setTomb(key uint64, end int64) {
	if h, ok := e.ident.tombs.Get(key); ok {
		if due, ok := e.tm.Due(h); ok && due >= end {
			return
		}
		e.stopTimer(h)
		e.ident.tombs.Delete(key)
	}
	if h, ok := e.addTimer(timerTomb, key, end); ok {
		e.ident.tombs.Put(key, h)
	}
}

// tombEnded is the timer action of a tombstone whose time is up.
func (e *Engine) tombEnded(key uint64) { e.ident.tombs.Delete(key) }

// tombHeld says whether (queue, id) is still taken by a tombstone at now:
// read from the tombstone's end, so it holds exactly until then whatever
// the tick. O(1).
func (e *Engine) tombHeld(queue, id []byte, now int64) bool {
	if e.ident.tombs.Len() == 0 {
		return false
	}
	h, ok := e.ident.tombs.Get(jobs.TombKey(queue, id))
	if !ok {
		return false
	}
	end, ok := e.tm.Due(h)
	return ok && end > now
}

// tombRecs are the records that recreate every tombstone (stateRecs), in
// key order, so that two snapshots of the same state are the same bytes.
func (e *Engine) tombRecs(now int64) []record.Rec {
	out := make([]record.Rec, 0, e.ident.tombs.Len())
	for key, h := range e.ident.tombs.All() {
		if end, ok := e.tm.Due(h); ok && end > now {
			out = append(out, record.Rec{Op: record.Tomb, Time: now, SID: key, Due: end})
		}
	}
	slices.SortFunc(out, func(a, b record.Rec) int { return cmp.Compare(a.SID, b.SID) })
	return out
}

// applyTomb replays a tombstone record.
func (e *Engine) applyTomb(r *record.Rec) { e.setTomb(r.SID, r.Due) }

// debounce computes the add record r of a DEBOUNCE add (a.Debounce > 0):
// the limit is the one of the delayed job being re-added (slot s, when
// readd), or, for a new job or one that is not delayed, now (rounded up, as
// relative times are) plus max-wait; the due time is capped by it.
func (e *Engine) debounce(r *record.Rec, s uint32, readd bool, up, maxWait int64) {
	r.DebounceUntil = up + maxWait
	if readd {
		if until, ok := e.jobs.DebounceUntil(s); ok {
			r.DebounceUntil = until
		}
	}
	r.Due = min(r.Due, r.DebounceUntil)
}
