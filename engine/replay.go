package engine

import "github.com/delayd/delayd/record"

// Replay's second core: the server-id index is built beside the replay
// (docs/decisions/replay.md). An add whose server id is above every id
// indexed so far cannot replace a job, so it hands (sid, slot) to a builder
// goroutine; every other record first waits for the builder (sync), so the
// index is the serial replay's wherever it is read. Only inside replayFile;
// a follower applying committed batches inserts as it goes.

// sidBatch is how many inserts go to the builder at once: enough that the
// channel handoff costs nothing per job, small enough to stay in cache.
const sidBatch = 4096

type sidSlot struct {
	sid  uint64
	slot uint32 // slot+1, as the sids table holds it
}

// sidBuilder hands server-id inserts to a goroutine. Used by the applier
// only (one goroutine), so its own fields need no lock.
type sidBuilder struct {
	work   chan []sidSlot // to the builder; nil asks it to say it is idle
	spare  chan []sidSlot // emptied batches back
	idle   chan struct{}  // the builder's answer to nil
	cur    []sidSlot
	behind bool // batches went out since the last sync
	n      int  // inserts deferred (tests)
	// ceil is at least every server id in the index (or on its way): an
	// add with a server id above it cannot replace a job. Unlike lastSID
	// it does not rise with a meta record, so the adds of a log written
	// after a rewrite's meta record still count as new when they are.
	ceil uint64
}

// startSidBuilder starts the builder for one replay of a log of logBytes
// (0: do not presize); stopSidBuilder must follow, whatever happens.
func (e *Engine) startSidBuilder(logBytes int64) {
	b := &sidBuilder{
		work:  make(chan []sidSlot, 4),
		spare: make(chan []sidSlot, 4),
		idle:  make(chan struct{}),
		cur:   make([]sidSlot, 0, sidBatch),
		// The builder starts by sizing the sids table: the first sync waits for it.
		behind: true,
	}
	for range 3 {
		b.spare <- make([]sidSlot, 0, sidBatch)
	}
	b.ceil = e.sidCeiling()
	go func() {
		e.presize(logBytes) // before the first insert: the applier leaves the sids table alone until then
		for batch := range b.work {
			if batch == nil {
				b.idle <- struct{}{}
				continue
			}
			for _, p := range batch {
				e.jobs.InsertSID(p.slot-1, p.sid)
			}
			b.spare <- batch[:0]
		}
		close(b.idle)
	}()
	e.j.build = b
}

// sidCeiling is the highest server id the index may hold: every id made or
// replayed raised lastSID.
func (e *Engine) sidCeiling() uint64 { return e.lastSID }

// deferSid queues the insert of a new server id for the builder. O(1).
func (b *sidBuilder) deferSid(sid uint64, slot uint32) {
	b.cur = append(b.cur, sidSlot{sid, slot + 1})
	b.n++
	b.ceil = max(b.ceil, sid)
	if len(b.cur) == cap(b.cur) {
		b.work <- b.cur
		b.cur = <-b.spare
		b.behind = true
	}
}

// sync returns once every insert queued so far is in the sids table; from then
// until the next deferSid the applier owns the index.
func (b *sidBuilder) sync() {
	if len(b.cur) > 0 {
		b.work <- b.cur
		b.cur = <-b.spare
		b.behind = true
	}
	if b.behind {
		b.work <- nil
		<-b.idle
		b.behind = false
	}
}

// stopSidBuilder syncs and ends the builder.
func (e *Engine) stopSidBuilder() {
	b := e.j.build
	if b == nil {
		return
	}
	b.sync()
	close(b.work)
	<-b.idle
	e.j.build = nil
	e.j.sidsDeferred = b.n
}

// deferrable says whether the add record r (decoded, not yet applied) may
// leave its index insert to the builder: a server id above every indexed
// one, with no client id that could read as one, and nothing due by its
// time in either wheel (a firing can end reservations, which deletes from
// the index). Anything else must sync first.
func (e *Engine) deferrable(r *record.Rec) bool {
	b := e.j.build
	if b == nil || r.Op != record.Add || r.ID != nil || e.jobs.SIDLike || r.SID <= b.ceil || e.wheel == nil {
		return false
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
		b.sync()
	}
}

// raiseSidCeil notes, after a record applied without the builder, that the
// index may now hold any server id made so far. A meta record makes none.
func (e *Engine) raiseSidCeil(op byte) {
	if b := e.j.build; b != nil && op != record.Meta {
		b.ceil = max(b.ceil, e.lastSID)
	}
}
