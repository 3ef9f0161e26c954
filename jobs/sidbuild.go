package jobs

// SIDBuilder takes a replay's server-id inserts to another goroutine
// (docs/decisions/replay.md): an add whose server id is above every one
// indexed so far cannot replace a job, so the applier hands (sid, slot) to
// the builder (Defer) and goes on; before anything else reads or changes
// the index it waits for the builder (Sync), so the index is the serial
// replay's wherever it is read. The owner runs Run on a goroutine of its
// own and ends it with Stop. The applier's side is one goroutine, so its
// fields need no lock.
type SIDBuilder struct {
	work   chan []sidSlot // to the builder; nil asks it to say it is idle
	spare  chan []sidSlot // emptied batches back
	idle   chan struct{}  // the builder's answer to nil
	cur    []sidSlot
	behind bool // batches went out since the last sync
	// N counts the inserts deferred (tests).
	N int
	// Ceil is at least every server id in the index (or on its way): an
	// add with a server id above it cannot replace a job. Unlike the
	// owner's last id it does not rise with a meta record, so the adds of
	// a log written after a rewrite's meta record still count as new when
	// they are.
	Ceil uint64
}

// sidBatch is how many inserts go to the builder at once: enough that the
// channel handoff costs nothing per job, small enough to stay in cache.
const sidBatch = 4096

type sidSlot struct {
	sid  uint64
	slot uint32 // slot+1, as the sids table holds it
}

// NewSIDBuilder returns a builder whose index holds no server id above
// ceil.
func NewSIDBuilder(ceil uint64) *SIDBuilder {
	b := &SIDBuilder{
		work:  make(chan []sidSlot, 4),
		spare: make(chan []sidSlot, 4),
		idle:  make(chan struct{}),
		cur:   make([]sidSlot, 0, sidBatch),
		// Run starts with first (sizing the sids table): the first Sync
		// waits for it.
		behind: true,
		Ceil:   ceil,
	}
	for range 3 {
		b.spare <- make([]sidSlot, 0, sidBatch)
	}
	return b
}

// Run is the builder: first, then every batch into t's sids table, until
// Stop. The applier leaves the sids table alone until first is done.
func (b *SIDBuilder) Run(t *Table, first func()) {
	first()
	for batch := range b.work {
		if batch == nil {
			b.idle <- struct{}{}
			continue
		}
		for _, p := range batch {
			t.InsertSID(p.slot-1, p.sid)
		}
		b.spare <- batch[:0]
	}
	close(b.idle)
}

// Defer queues the insert of a new server id. O(1).
func (b *SIDBuilder) Defer(sid uint64, slot uint32) {
	b.cur = append(b.cur, sidSlot{sid, slot + 1})
	b.N++
	b.Ceil = max(b.Ceil, sid)
	if len(b.cur) == cap(b.cur) {
		b.work <- b.cur
		b.cur = <-b.spare
		b.behind = true
	}
}

// Sync returns once every insert queued so far is in the sids table; from
// then until the next Defer the applier owns the index.
func (b *SIDBuilder) Sync() {
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

// Stop syncs and ends Run.
func (b *SIDBuilder) Stop() {
	b.Sync()
	close(b.work)
	<-b.idle
}
