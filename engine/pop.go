package engine

import (
	"time"
	"unsafe"

	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/record"
)

// Removing and popping jobs: DELAY.CANCEL, the pops, and handing a
// delivery back.

// Cancel removes the named jobs of a queue, in any state, and returns how
// many existed and the log ticket to wait for. O(1) per id.
func (e *Engine) Cancel(queueName []byte, ids [][]byte) (int, uint64, error) {
	wr, err := e.begin(0)
	if err != nil {
		return 0, 0, err
	}
	defer wr.end()
	var ticket uint64
	n := 0
	for _, id := range ids {
		qi, ok := e.queueFor(queueName, false)
		if !ok {
			break // the last job went and the queue with it
		}
		if s, ok := e.lookup(qi, id); ok {
			r := e.recFor(record.Cancel, s)
			ticket = e.logRec(&r) // encodes r before remove frees the id it aliases
			e.remove(s)
			n++
		}
	}
	e.stats.Cancelled += uint64(n)
	e.serveFreed()
	return n, ticket, nil
}

// recFor builds the cancel or pop record of the job in slot s. The record
// is encoded (or dropped, with the log off) before the lock is let go, and
// encoding only reads it, so its queue is a view of the queue's name rather
// than a copy: a pop or an ack then allocates nothing for its record.
func (e *Engine) recFor(op byte, s uint32) record.Rec {
	j := e.jobs.At(s)
	name := e.queues[j.Queue].name
	r := record.Rec{Op: op, Time: e.recNow(), Queue: unsafe.Slice(unsafe.StringData(name), len(name)), SID: j.SID}
	if j.IDLen > 0 {
		r.ID = e.jobs.Arena.Bytes(j.Data, int(j.IDLen))
	}
	return r
}

// del applies a cancel or pop record.
func (e *Engine) del(r *record.Rec) {
	var buf [jobs.SIDLen]byte
	id := r.ID
	if id == nil {
		id = jobs.RenderSID(&buf, r.SID)
	}
	if qi, ok := e.queueFor(r.Queue, false); ok {
		if s, ok := e.jobs.Lookup(&e.queues[qi].run, qi, id); ok {
			e.remove(s)
		}
	}
}

// --- popping -----------------------------------------------------------------

// Delivery is a job handed to a client: copies, safe after the lock is gone.
// It carries what is needed to put the job back if the client turns out to
// be gone, and the log ticket its reply must wait for.
//
// A pop given a Scratch (PopOrWaitInto, ListPopOne) fills it in cheaper
// memory: Queue is then the caller's own name slice, and ID and Payload
// live in the Scratch until its next pop.
//
// ID is nil for a list pop (LPOP, BLPOP...) of a job with a server id: a
// list reply carries no id, and rendering it was 2% of a pipelined LPOP.
type Delivery struct {
	Queue      []byte
	ID         []byte
	Payload    []byte
	Due        int64
	Ticket     uint64
	Deliveries uint32
	Reserved   bool // the job waits for DELAY.ACK (it has an ack timeout)
	moved      bool // moved to another ready list (BLMOVE): nothing to hand back
	priority   uint8
	sid        uint64
	seq        uint64
	ackTimeout uint32
	retry      int32
	deadLetter []byte
	ident      jobs.Ident // UNIQUE, DEBOUNCE (unique.go)
	group      *[]byte    // a pointer keeps Delivery in its allocation size class
	// rare: a dead-lettered job's origin (requeue.go) and a failure
	// reason (reason.go), behind one pointer, as group, so Delivery stays
	// in its allocation size class. Ticket moved up so Deliveries packs
	// with the bools.
	rare *rareParts
}

// rareParts are the parts of a delivered job few jobs have.
type rareParts struct {
	origin *jobs.Origin // never changed once made: shared with the table
	reason string
}

// Scratch is a connection's memory for the ids and payloads its pops hand
// out (jobs.Scratch).
type Scratch = jobs.Scratch

// Pop takes the first ready job of the first non-empty queue, trying names in
// order, as BLPOP does. O(number of names).
func (e *Engine) Pop(names [][]byte) (Delivery, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.popLocked(names, PopDelay, nil, 0)
}

// PopMode says how a pop takes a job.
type PopMode uint8

const (
	// PopDelay is DELAY.POP: from the head; a job with an ack timeout is
	// reserved until DELAY.ACK.
	PopDelay PopMode = iota
	// PopLeft and PopRight are the list pops (LPOP, BLPOP; RPOP, BRPOP):
	// the job is removed whatever its ack timeout.
	PopLeft
	PopRight
)

// popLocked pops as Pop does. With a Scratch, the Delivery's Queue is the
// caller's name and its id and payload are copied into the Scratch (see
// Delivery); without one, all three are copies of their own.
func (e *Engine) popLocked(names [][]byte, mode PopMode, to *Scratch, at time.Duration) (Delivery, bool) {
	if e.closed || e.replWritable() != nil {
		return Delivery{}, false
	}
	// One clock read serves the advance and a reservation's deadline; at,
	// the command's arrival (list pops only: they reserve nothing), spares
	// even that one.
	now, up := e.clockAt(at)
	e.advanceLocked(now)
	for _, name := range names {
		qi, ok := e.queueFor(name, false)
		if !ok || !e.canTake(qi) {
			continue
		}
		d := e.take(e.nextReady(qi, mode == PopRight), mode != PopDelay, to, up)
		if to != nil {
			d.Queue = name
		}
		return d, true
	}
	return Delivery{}, false
}

// takeFrom takes the job at the end of qi's ready order that mode pops
// from, for a waiter; canTake(qi) must have said yes.
func (e *Engine) takeFrom(qi uint32, mode PopMode) Delivery {
	return e.take(e.nextReady(qi, mode == PopRight), mode != PopDelay, nil, 0)
}

// take hands the ready job in slot s to a client: it is reserved if it has
// an ack timeout and the pop is not plain, else removed. Pops are served even
// when the log has failed (they are dropped from it then: after a restart
// such a job is delivered again, never lost). With a Scratch, the id and
// payload are copied into it and Queue is left for the caller to set;
// without one, all three get memory of their own. up is the time read by
// the caller rounded up to a whole ms (clock), which a reservation's
// deadline counts from; 0 reads the clock.
func (e *Engine) take(s uint32, plain bool, to *Scratch, up int64) Delivery {
	var buf [jobs.SIDLen]byte
	j := e.jobs.At(s)
	e.warmNext(j)
	j.Deliveries++
	e.stats.Delivered++
	q := &e.queues[j.Queue]
	q.Deliveries++
	if j.Deliveries > 1 {
		e.stats.Redelivered++
		q.Redeliveries++
	}
	e.observeLateness(j)
	d := Delivery{
		Payload:    to.Hold(e.jobs.Payload(j)),
		Due:        j.Due,
		Deliveries: j.Deliveries,
		sid:        j.ServerID(), // 0 for client ids
		seq:        j.Seq,
		ackTimeout: j.AckTimeout,
		retry:      j.Retry,
	}
	switch {
	case j.IDLen > 0:
		d.ID = to.Hold(e.jobs.ID(j, &buf))
	case !plain:
		d.ID = to.HoldSID(j.SID)
	}
	if to == nil {
		d.Queue = []byte(q.name)
	}
	if j.Flags&jobs.FlagDL != 0 {
		d.deadLetter = e.jobs.DeadLetters[s]
	}
	if j.Flags&(jobs.FlagUnique|jobs.FlagDebounce) != 0 {
		d.ident = e.jobs.Idents[s]
	}
	if j.Lane != 0 {
		var g []byte
		g, d.priority = e.laneOf(s)
		if g != nil {
			d.group = &g
		}
	}
	if j.Flags&(jobs.FlagOrigin|jobs.FlagReason|jobs.FlagTimedOut) != 0 {
		d.rare = &rareParts{origin: e.jobs.Origins[s], reason: e.jobs.Reason(s)}
	}
	if j.AckTimeout > 0 && !plain {
		e.unlinkReady(s)
		e.seq++
		j.Seq = e.seq
		d.Reserved = true
		r := e.recFor(record.Reserve, s)
		if up == 0 {
			_, up = e.clock()
		}
		r.Due, r.Deliveries, r.Seq = up+int64(j.AckTimeout), j.Deliveries, j.Seq
		e.reserveAt(s, r.Due)
		d.Ticket = e.logRec(&r)
		return d
	}
	r := e.recFor(record.Pop, s)
	d.Ticket = e.logRec(&r) // encodes r before remove frees the id it aliases
	e.remove(s)
	return d
}

// warmNext prefetches what the next pop from the same end of j's list will
// read, as j is taken: j's neighbour n (in cache from the pop before) gives
// n's payload and n's own neighbour, what the next pop takes and relinks.
// The jobs of one list among many are far apart in the slab; those misses
// were a fifth of LPOP's CPU over 1,000 keys (docs/decisions/pop-path.md).
// A pop from the middle of a list (LREM, a fair queue's lane) warms nothing.
func (e *Engine) warmNext(j *jobs.Job) {
	n, head := j.Next, true
	if j.Prev != 0 {
		if n != 0 {
			return
		}
		n, head = j.Prev, false
	}
	if n == 0 {
		return
	}
	nj := e.jobs.At(n - 1)
	far := nj.Next
	if !head {
		far = nj.Prev
	}
	if far != 0 {
		prefetch(unsafe.Pointer(e.jobs.At(far - 1)))
	}
	if nj.Flags&jobs.FlagOnDisk != 0 {
		return // its payload is in the log (spill.go)
	}
	if p := e.jobs.Arena.Addr(nj.Data); p != nil {
		prefetch(p)
	}
}

// Requeue puts a delivered job back at the head of its ready list: the client
// it was handed to was gone before the reply reached it. If the id was reused
// meanwhile, the newer job wins and the returned job is dropped.
//
// The delivery did not reach a worker, so it does not count as one.
func (e *Engine) Requeue(d Delivery) bool {
	if d.moved {
		// Already in its destination's ready list, where the client leaving
		// cannot lose it; as in Redis, the move stands.
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.replWritable() != nil {
		// Not the leader now: the pop that took the job did not commit, or
		// the new leader's reservation deadline gives the job back.
		return false
	}
	e.advanceLocked(e.nowMs())
	deliveries := d.Deliveries - 1
	id := d.ID
	if id == nil {
		var buf [jobs.SIDLen]byte
		id = jobs.RenderSID(&buf, d.sid) // a list pop's: the id was not rendered
	}
	if qi, ok := e.queueFor(d.Queue, false); ok {
		if s, taken := e.jobs.Lookup(&e.queues[qi].run, qi, id); taken {
			j := e.jobs.At(s)
			if !d.Reserved || j.State != jobs.StateReserved || j.Deliveries != d.Deliveries {
				return false // the id now names another job, or this one moved on
			}
			// Still reserved by the delivery that failed: back to the head.
			e.detach(s)
			j.Deliveries = deliveries
			r := e.recFor(record.Move, s)
			r.Due, r.Seq, r.Deliveries, r.Flags = j.Due, j.Seq, deliveries, record.FlagHead
			e.logRec(&r)
			e.pushReady(s, true)
			e.serve(qi)
			e.stats.Requeued++
			return true
		}
	}
	if d.Reserved {
		return false // acknowledged or expired meanwhile
	}
	r := record.Rec{Op: record.Add, Time: e.recNow(), Queue: d.Queue, SID: d.sid, Due: d.Due,
		Seq: d.seq, Deliveries: deliveries, Flags: record.FlagHead, Payload: d.Payload,
		AckTimeout: int64(d.ackTimeout), Retry: int64(d.retry), DeadLetter: d.deadLetter,
		UniqueTTL: d.ident.UniqueTTL, DebounceUntil: d.ident.DebounceUntil, Priority: d.priority}
	if d.group != nil {
		r.Group = *d.group
	}
	if d.rare != nil {
		r.Origin, r.Reason = d.rare.origin, []byte(d.rare.reason)
	}
	if d.sid == 0 {
		r.ID = d.ID
	}
	e.logRec(&r) // before put, which may hand the job to a waiter
	e.put(&r, false)
	e.stats.Requeued++
	return true
}
