package engine

import (
	"bytes"
	"time"

	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/record"
)

// Moving a queue whole to another server (`delayd export`, `delayd
// import`): DELAY.SCAN reads every job of a queue, whatever its state, in
// pages as Redis's SCAN does; DELAY.IMPORT writes one back with what it had
// (deliveries, options, origin, failure reason). Both stay off the hot
// paths: a scan page holds the lock for a bounded walk of the slab, an
// import is an add record as a rewrite writes it
// (docs/decisions/export-import.md).

// ScanJob is one job as DELAY.SCAN shows it: what DELAY.GET shows, and what
// a copy of the job on another server needs besides.
type ScanJob struct {
	JobInfo
	// Seq is its add order: ready jobs were made ready in (Due, Seq) order,
	// but for those pushed to the head (LPUSH), which is how an export
	// puts a queue's ready jobs back in line.
	Seq        uint64
	AckTimeout int64  // ms; 0: a pop removes it
	Retry      int64  // redeliveries allowed; -1: unlimited
	DeadLetter []byte // nil: none
	// OriginOpts are a dead-lettered job's options in its origin queue
	// (DELAY.REQUEUE's defaults); zero unless Origin is set.
	OriginOpts jobs.Origin
}

// ScanJobs returns up to count jobs of a queue from the job slot cursor
// on, and the cursor of the next page (0: done), as jobs.Table.Scan walks
// them: a job present for the whole scan is returned exactly once. With
// far-future buckets the cursor also walks them (scanFar), and such a job
// is returned at least once. Slot numbers are one engine's: a cursor means
// nothing after a restart, or on another node of a cluster. O(visited
// slots), bounded. An error is a bucket's run that could not be read.
func (e *Engine) ScanJobs(queueName []byte, cursor uint64, count int) (next uint64, out []ScanJob, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advanceLocked(e.nowMs()) // the states a pop would see
	qi, ok := e.queueFor(queueName, false)
	if !ok {
		return 0, nil, nil
	}
	out = make([]ScanJob, 0, max(0, min(count, e.queues[qi].Jobs())))
	if e.far.set != nil {
		return e.scanFar(qi, queueName, cursor, count, out)
	}
	next = e.jobs.Scan(qi, cursor, count, func(s uint32) {
		out = append(out, e.scanJob(s, queueName))
	})
	return next, out, nil
}

// scanJob is DELAY.SCAN's view of the job in slot s: its add record (what
// a rewrite keeps of it) read for the options. Called with mu held.
func (e *Engine) scanJob(s uint32, queueName []byte) ScanJob {
	r := e.addRec(s, 0)
	sj := ScanJob{JobInfo: e.infoOf(s, queueName), Seq: r.Seq,
		AckTimeout: r.AckTimeout, Retry: r.Retry, DeadLetter: bytes.Clone(r.DeadLetter)}
	if o := r.Origin; o != nil {
		sj.OriginOpts = jobs.Origin{AckTimeout: o.AckTimeout, Retry: o.Retry, DeadLetter: bytes.Clone(o.DeadLetter)}
	}
	return sj
}

// ImportArgs is one job to write as another server had it. Unlike an add,
// it carries the deliveries, origin and failure reason the job had; like
// DELAY.ADDAT with ID, it never touches a job that exists.
type ImportArgs struct {
	Queue, ID, Payload []byte
	Due                int64 // unix ms; now or past: ready now, at the tail
	Deliveries         uint32
	AckTimeout         int64 // -1: the configured default
	Retry              int64 // -1: unlimited
	DeadLetter         []byte
	Group              []byte
	Priority           uint8
	Origin             *jobs.Origin // a dead-lettered job's queue and options before (AckTimeout -1: the default); nil: none
	Reason             []byte       // its last failure reason; nil: none
	Mono               time.Duration
}

// Import writes a job with the id it had: added reports false when the
// queue holds that id (or a UNIQUE tombstone keeps it), and then nothing
// changed, so an import can run again. An id that reads as a server-made
// id is kept in that compact form, as the source kept it. The record is an
// add record as a rewrite writes it: replay and followers need nothing new.
// O(1).
func (e *Engine) Import(a ImportArgs) (added bool, ticket uint64, err error) {
	switch {
	case len(a.Payload) > e.opts.MaxPayload:
		return false, 0, ErrPayloadTooLarge
	case len(a.ID) == 0 || len(a.ID) > 256:
		return false, 0, ErrBadID
	case len(a.Queue) > MaxKey || len(a.DeadLetter) > MaxKey || a.Origin != nil && len(a.Origin.Queue) > MaxKey:
		return false, 0, ErrKeyTooLong
	}
	wr, err := e.begin(a.Mono)
	if err != nil {
		return false, 0, err
	}
	defer wr.end()
	now := wr.now
	if e.tombHeld(a.Queue, a.ID, now) {
		return false, 0, nil
	}
	if qi, ok := e.queueFor(a.Queue, false); ok {
		if _, exists := e.lookup(qi, a.ID); exists {
			return false, 0, nil
		}
	}
	if e.opts.MaxJobs > 0 && e.njobs >= e.opts.MaxJobs {
		return false, 0, ErrMaxJobs
	}
	r := record.Rec{Op: record.Add, Time: now, Queue: a.Queue, ID: a.ID, Due: a.Due, Payload: a.Payload,
		Deliveries: a.Deliveries, AckTimeout: a.AckTimeout, Retry: a.Retry, DeadLetter: a.DeadLetter,
		Group: a.Group, Priority: a.Priority, Origin: a.Origin, Reason: a.Reason}
	if r.AckTimeout < 0 {
		r.AckTimeout = e.opts.AckTimeout
	}
	if o := a.Origin; o != nil && o.AckTimeout < 0 {
		r.Origin = &jobs.Origin{Queue: o.Queue, AckTimeout: e.opts.AckTimeout, Retry: o.Retry, DeadLetter: o.DeadLetter}
	}
	var buf [jobs.SIDLen]byte
	if sid, ok := jobs.ParseSID(a.ID); ok && string(jobs.RenderSID(&buf, sid)) == string(a.ID) {
		r.ID, r.SID = nil, sid
	}
	e.seq++
	r.Seq = e.seq
	ticket = e.logRec(&r)
	qi, ready := e.place(&r, false, false)
	e.queues[qi].Added++
	if ready {
		e.serve(qi)
	}
	e.serveFreed()
	e.stats.Added++
	return true, ticket, nil
}
