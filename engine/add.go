package engine

import (
	"time"

	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/record"
)

// Adding jobs: DELAY.ADD, DELAY.ADDAT, and the put that replay shares.

// AddArgs describe one DELAY.ADD / DELAY.ADDAT.
type AddArgs struct {
	Queue   []byte
	ID      []byte // nil: the server makes one
	Payload []byte
	// Delay in ms from now, or, with At set, the absolute unix ms Due.
	Delay   int64
	At      bool
	Due     int64
	Replace bool
	// AckTimeout in ms; -1: the configured default. 0: a pop removes the
	// job; above 0 a pop reserves it until DELAY.ACK or the timeout.
	AckTimeout int64
	// Retry bounds redeliveries (at most Retry+1 deliveries); -1: unlimited.
	Retry int64
	// DeadLetter names the queue that gets the job when no redelivery is
	// left; nil: the job is dropped (and logged).
	DeadLetter []byte
	// Unique keeps the id taken for this many ms after the job ends (acked,
	// cancelled, dead-lettered, dropped), so a late re-add is a no-op; 0: no.
	Unique int64
	// Debounce: re-adding this id while it is delayed replaces its payload
	// and pushes its due time out, but never past the first add plus this
	// many ms; 0: no.
	Debounce int64
	// Group puts the job in a group of its queue (fair round-robin and
	// per-group limits); nil: the queue's default group.
	Group []byte
	// Priority 0..9, higher handed out first; 0 is the default.
	Priority uint8
	// Mono is when the command arrived or later, read by the caller with
	// Mono, which spares the engine reading the clock again (clockAt); 0:
	// the engine reads it.
	Mono time.Duration
	// Into, if set, holds the returned id until its next use, as a pop's
	// Scratch does: a connection writes the reply before its next command,
	// so DELAY.ADD allocates nothing for its id. nil: a fresh allocation.
	Into *Scratch
}

// AddResult is what an add did. Ticket is the log position the reply must
// wait for (0 when nothing was logged).
type AddResult struct {
	ID     []byte // freshly allocated, or in AddArgs.Into
	Added  bool   // false: the id existed and REPLACE was not given
	Ticket uint64
}

// Add stores a job. An existing id without Replace changes nothing. O(1).
func (e *Engine) Add(a AddArgs) (AddResult, error) {
	if len(a.Payload) > e.opts.MaxPayload {
		return AddResult{}, ErrPayloadTooLarge
	}
	if a.ID != nil && (len(a.ID) == 0 || len(a.ID) > 256) {
		return AddResult{}, ErrBadID
	}
	if len(a.Queue) > MaxKey || len(a.DeadLetter) > MaxKey {
		return AddResult{}, ErrKeyTooLong
	}
	wr, err := e.begin(a.Mono)
	if err != nil {
		return AddResult{}, err
	}
	defer wr.end()
	now, up := wr.now, wr.up
	r := record.Rec{Op: record.Add, Time: now, Queue: a.Queue, ID: a.ID, Due: a.Due, Payload: a.Payload,
		AckTimeout: a.AckTimeout, Retry: a.Retry, DeadLetter: a.DeadLetter,
		UniqueTTL: a.Unique, Group: a.Group, Priority: a.Priority}
	if !a.At && a.Delay > 0 {
		r.Due = up + a.Delay
	} else if !a.At {
		r.Due = now
	}
	if r.AckTimeout < 0 {
		r.AckTimeout = e.opts.AckTimeout
	}
	if a.ID != nil && e.tombHeld(a.Queue, a.ID, now) {
		return AddResult{}, nil // UNIQUE: a job with this id ended within its ttl (REPLACE too)
	}
	qi, existed := e.queueFor(a.Queue, false)
	exists := false
	var s uint32
	if existed && a.ID != nil {
		if s, exists = e.lookup(qi, a.ID); exists {
			// DEBOUNCE replaces a job that is still delayed, as REPLACE does.
			if !a.Replace && (a.Debounce <= 0 || e.jobs.At(s).State != jobs.StateDelayed) {
				return AddResult{}, nil
			}
			if e.jobs.At(s).IDLen == 0 { // keep a server-made id in its compact form
				r.ID, r.SID = nil, e.jobs.At(s).SID
			}
		}
	}
	if a.Debounce > 0 {
		e.debounce(&r, s, exists && e.jobs.At(s).State == jobs.StateDelayed, up, a.Debounce)
	}
	if !exists && e.opts.MaxJobs > 0 && e.njobs >= e.opts.MaxJobs {
		return AddResult{}, ErrMaxJobs
	}
	if a.ID == nil {
		r.SID = e.newSID(a.Queue, now)
	}
	e.seq++
	r.Seq = e.seq
	// Logged before it is applied: if a waiter takes the job at once, its
	// pop must follow the add in the log.
	res := AddResult{Added: true, Ticket: e.logRec(&r)}
	// put, counting the add before a waiter can take the job (and the
	// queue go with it).
	qi, ready := e.place(&r, a.ID == nil, false)
	e.queues[qi].Added++
	if ready {
		e.serve(qi)
	}
	e.serveFreed()
	a.Into.Reset()
	if r.ID != nil {
		res.ID = a.Into.Hold(r.ID)
	} else {
		res.ID = a.Into.HoldSID(r.SID)
	}
	e.stats.Added++
	return res, nil
}

// newSID makes the next server id for a job of the named queue. O(1).
func (e *Engine) newSID(queueName []byte, now int64) uint64 {
	e.lastSID = jobs.NextSID(e.lastSID, now)
	if !e.jobs.SIDLike {
		return e.lastSID
	}
	// A client may have chosen this very string as its own id.
	if qi, ok := e.queueFor(queueName, false); ok {
		e.lastSID = e.jobs.FreeSID(&e.queues[qi].run, qi, e.lastSID)
	}
	return e.lastSID
}

// put applies an add record: the job is created, or replaced whole if its id
// exists, and scheduled. Live adds and replay both come here, so replay
// rebuilds exactly what was live. fresh says the id was just made, so there
// is nothing to replace. O(1) plus any jobs that fall due.
func (e *Engine) put(r *record.Rec, fresh bool) {
	if qi, ready := e.place(r, fresh, false); ready {
		e.serve(qi)
	}
	e.serveFreed() // a replaced reservation may have made room
}

// place is put without serving waiters: it returns the job's queue and
// whether the job went to its ready list, so that a caller adding several
// jobs (LPUSH, RPUSH) serves waiters once, after the last, as Redis does.
// fresh says its server id was just made (above every id filed), pushed
// that a live list push made it; either way a server id goes to the
// queue's push run (jobs/pushrun.go) rather than the sids table.
func (e *Engine) place(r *record.Rec, fresh, pushed bool) (uint32, bool) {
	id := r.ID // nil for a server id: jobs.Table.Insert files those by r.sid
	if id != nil && !e.jobs.SIDLike {
		_, e.jobs.SIDLike = jobs.ParseSID(id)
	}
	if !fresh {
		var buf [jobs.SIDLen]byte
		if id == nil {
			id = jobs.RenderSID(&buf, r.SID)
		}
		if qi, ok := e.queueFor(r.Queue, false); ok {
			if s, ok := e.replaced(qi, id); ok {
				e.jobs.DropIdent(s) // replaced, not ended: no tombstone
				e.remove(s)
			} else if r.ID == nil {
				e.unfar(qi, r.SID) // a far job restated (far.go)
			} else {
				e.unfarID(qi, r.ID)
			}
		}
	}
	qi, _ := e.queueFor(r.Queue, true)
	s := e.allocSlot()
	j := e.jobs.At(s)
	j.Queue = qi
	j.SID = r.SID
	j.IDLen = uint16(len(r.ID))
	if e.j.keepBy == 0 || !e.keepOnDisk(j, r) {
		j.Data = e.storeData(r.ID, r.Payload)
	}
	size := jobs.DataSize(j)
	e.queues[qi].Bytes += size
	h := e.homeSeg()
	e.jobs.SetHome(s, h)
	e.j.live.Add(h, size)
	j.Due, j.Seq, j.Deliveries = r.Due, r.Seq, r.Deliveries
	j.AckTimeout = uint32(min(max(r.AckTimeout, 0), 1<<32-1))
	j.Retry = int32(min(max(r.Retry, -1), 1<<31-1))
	e.queues[qi].Join(&e.jobs.Slab, s, r.Group, r.Priority)
	if r.DeadLetter != nil {
		j.Flags |= jobs.FlagDL
		e.jobs.DeadLetters[s] = append([]byte(nil), r.DeadLetter...)
	}
	e.jobs.SetIdent(s, r.UniqueTTL, r.DebounceUntil)
	if r.Origin != nil {
		e.jobs.SetOrigin(s, r.Origin)
	}
	e.jobs.SetReason(s, r.Reason)
	switch {
	case e.j.deferIdx:
		e.j.build.Defer(r.SID, s) // replay.go: another goroutine inserts it
	case (pushed || fresh) && id == nil && r.SID > e.queues[qi].run.Last():
		e.jobs.FileInRun(&e.queues[qi].run, s)
	default:
		e.jobs.Insert(s, id)
	}
	e.njobs++
	e.lastSID = max(e.lastSID, r.SID)
	e.seq = max(e.seq, r.Seq)
	switch {
	case r.Flags&record.FlagReserved != 0:
		e.reserveAt(s, r.Deadline)
		return qi, false
	case r.Flags&record.FlagHead != 0:
		e.pushReady(s, true)
	case r.Flags&record.FlagReady == 0 && r.Due > r.Time && e.wheel.Add(s, r.Due, r.Seq):
		e.markDelayed(s)
		e.poke(r.Due)
		return qi, false
	default:
		// Jobs already due in the wheel became ready before this one.
		e.advanceLocked(r.Time)
		e.pushReady(s, false)
	}
	return qi, true
}

func (e *Engine) storeData(id, payload []byte) uint64 {
	if len(id) == 0 {
		return jobs.PackData(e.jobs.Arena.Alloc(payload), len(payload))
	}
	if len(payload) == 0 {
		return e.jobs.Arena.Alloc(id)
	}
	// One block for both keeps one ref per job.
	buf := make([]byte, 0, len(id)+len(payload))
	buf = append(append(buf, id...), payload...)
	return jobs.PackData(e.jobs.Arena.Alloc(buf), len(payload))
}
