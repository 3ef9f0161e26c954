package engine

import (
	"encoding/binary"
	"errors"

	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/queue"
	"github.com/delayd/delayd/record"
)

// Moving a queue to another engine, whole and at once (MIGRATE between Raft
// groups, docs/decisions/slot-moves.md): ExportQueue writes the queue as a
// snapshot writes it, ImportQueue applies that on the target as one unit
// (one logged transaction: the target's group commits all of it or none),
// and DropQueue removes it from the source as another. All three are admin
// operations, off the hot paths: each holds the lock for the queue's jobs.
//
// What moves: every job in its state (ready in list order, delayed with
// its due time, reserved with its deadline and deliveries, with options,
// origin and failure reason), the queue's schedules, its limit and its
// pause. UNIQUE's tombstones are kept by a hash of queue and id, which
// names no queue: they stay, and end, where they were.

// ErrBadMigration is a payload ImportQueue cannot read.
var ErrBadMigration = errors.New("ERR the migration payload is malformed")

// migrateFormat leads an export: the payload's version, so that a target
// of a later release can tell what it reads.
const migrateFormat = 1

// ExportQueue returns the records that rebuild the queue on another engine,
// each a uvarint length then the record, after a format byte; jobs is the
// number of jobs, and ok false when the queue holds nothing (no job,
// schedule, limit or pause). Clients blocked on the queue are released
// without a job (their server sends them after it). O(the queue's jobs and
// the schedules).
func (e *Engine) ExportQueue(name []byte) (payload []byte, njobs int, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.nowMs()
	if e.wheel != nil {
		e.advanceLocked(now)
		now = e.wheel.Now()
	}
	if qi, found := e.queueFor(name, false); found {
		// Clients blocked on the queue are released without a job: one
		// served here after the export would hold a job the target has too.
		for l := e.queues[qi].waiters.First(); l != nil; l = e.queues[qi].waiters.First() {
			e.resolve(l.W, false)
		}
	}
	out := []byte{migrateFormat}
	var buf []byte
	put := func(r *record.Rec) {
		buf = r.Encode(buf[:0])
		out = binary.AppendUvarint(out, uint64(len(buf)))
		out = append(out, buf...)
	}
	n := 0
	for _, r := range e.queueStateRecs(name, now) {
		put(&r)
		n++
	}
	if qi, found := e.queueFor(name, false); found && e.queues[qi].live && e.wheel != nil {
		q := &e.queues[qi]
		q.Order.Each(&e.jobs.Slab, func(s uint32) bool {
			r := e.addRec(s, record.FlagReady)
			r.Time = now
			put(&r)
			njobs++
			return true
		})
		for cursor := uint64(0); ; {
			cursor = e.jobs.Scan(qi, cursor, 1024, func(s uint32) {
				var r record.Rec
				switch e.jobs.At(s).State {
				case jobs.StateDelayed:
					r = e.addRec(s, 0)
				case jobs.StateReserved:
					deadline, _ := e.wheel.Due(s)
					r = e.addRec(s, record.FlagReserved)
					r.Deadline = deadline
				default:
					return // ready: written in list order above
				}
				r.Time = now
				put(&r)
				njobs++
			})
			if cursor == 0 {
				break
			}
		}
	}
	return out, njobs, n+njobs > 0
}

// queueStateRecs is the queue's part of stateRecs: its limit, its pause
// and its schedules. Called with mu held.
func (e *Engine) queueStateRecs(name []byte, now int64) []record.Rec {
	var out []record.Rec
	if l := e.limits.Of(string(name)); l != nil {
		if !l.Spec().IsZero() {
			out = append(out, record.Rec{Op: record.Limit, Time: now, Queue: name, Limit: l.Spec()})
		}
		if l.Paused() {
			out = append(out, record.Rec{Op: record.Pause, Time: now, Queue: name, Flags: 1})
		}
	}
	for _, s := range e.sched.Sorted() {
		if s.Key.Queue == string(name) {
			st := s.St
			out = append(out, record.Rec{Op: record.Schedule, Time: now, Queue: name, ID: []byte(s.Key.Name),
				Payload: s.Payload, AckTimeout: s.AckTimeout, Retry: s.Retry, DeadLetter: s.DeadLetter, Sched: &st})
		}
	}
	return out
}

// ImportQueue applies what ExportQueue wrote of queue name, as one unit
// (a payload holding another queue's records is refused): a job whose id
// the queue holds already is left as it is (so an import that runs again,
// after a move cut short, adds nothing twice); the queue's limit, pause
// and schedules are set as exported. Every record is stamped with this
// engine's time and add order; due times and deadlines are absolute, as
// exported. Waiters on the queue are served after. O(records).
func (e *Engine) ImportQueue(name, payload []byte) (added int, ticket uint64, err error) {
	if len(payload) == 0 || payload[0] != migrateFormat {
		return 0, 0, ErrBadMigration
	}
	var recs []record.Rec
	for b := payload[1:]; len(b) > 0; {
		n, k := binary.Uvarint(b)
		if k <= 0 || n == 0 || n > uint64(len(b)-k) {
			return 0, 0, ErrBadMigration
		}
		var r record.Rec
		if r.Decode(b[k:k+int(n)]) != nil || !importable(r.Op) || string(r.Queue) != string(name) {
			return 0, 0, ErrBadMigration
		}
		recs = append(recs, r)
		b = b[k+int(n):]
	}
	wr, err := e.begin(0)
	if err != nil {
		return 0, 0, err
	}
	defer wr.end()
	adds := 0
	for i := range recs {
		if err := e.gateAllows(recs[i].Op); err != nil {
			return 0, 0, err
		}
		if recs[i].Op == record.Add {
			adds++
		}
	}
	if e.opts.MaxJobs > 0 && e.njobs+adds > e.opts.MaxJobs {
		return 0, 0, ErrMaxJobs // the whole queue or none of it
	}
	ticket, err = e.asUnit(func(logApply func(r *record.Rec)) {
		for i := range recs {
			r := &recs[i]
			r.Time = wr.now
			if r.Op == record.Add {
				if e.holds(r) {
					continue
				}
				e.seq++
				r.Seq = e.seq
				added++
			}
			logApply(r)
		}
	})
	return added, ticket, err
}

// importable says which record kinds an export holds.
func importable(op byte) bool {
	switch op {
	case record.Add, record.Limit, record.Pause, record.Schedule:
		return true
	}
	return false
}

// holds says whether the queue of an add record has its job's id already.
// Called with mu held.
func (e *Engine) holds(r *record.Rec) bool {
	qi, ok := e.queueFor(r.Queue, false)
	if !ok {
		return false
	}
	id := r.ID
	var buf [jobs.SIDLen]byte
	if id == nil {
		id = jobs.RenderSID(&buf, r.SID)
	}
	_, ok = e.jobs.Lookup(&e.queues[qi].run, qi, id)
	return ok
}

// DropQueue removes a queue with everything ExportQueue moves, as one
// unit: its jobs (as DEL), its limit and pause, its schedules. Clients
// blocked on it stay blocked: their server sends them on. O(the queue's
// schedules); its jobs are freed in the background, as DEL frees them.
func (e *Engine) DropQueue(name []byte) (ticket uint64, err error) {
	wr, err := e.begin(0)
	if err != nil {
		return 0, err
	}
	defer wr.end()
	var recs []record.Rec
	if qi, ok := e.queueFor(name, false); ok && e.queues[qi].Jobs() > 0 {
		recs = append(recs, record.Rec{Op: record.Del, Time: wr.now, Queue: name})
	}
	if l := e.limits.Of(string(name)); l != nil {
		if !l.Spec().IsZero() {
			recs = append(recs, record.Rec{Op: record.Limit, Time: wr.now, Queue: name})
		}
		if l.Paused() {
			recs = append(recs, record.Rec{Op: record.Pause, Time: wr.now, Queue: name})
		}
	}
	for _, s := range e.sched.Sorted() {
		if s.Key.Queue == string(name) {
			recs = append(recs, record.Rec{Op: record.Unschedule, Time: wr.now, Queue: name, ID: []byte(s.Key.Name)})
		}
	}
	return e.asUnit(func(logApply func(r *record.Rec)) {
		for i := range recs {
			logApply(&recs[i])
		}
	})
}

// asUnit runs fn, whose records are each logged then applied as replay
// applies them, gathered in one unit (as Atomic gathers a transaction's),
// then serves the waiters they made jobs ready for, their pops in the
// unit too. Called with mu held (begin).
func (e *Engine) asUnit(fn func(logApply func(r *record.Rec))) (uint64, error) {
	e.inTx = true
	var buf []byte
	var err error
	fn(func(r *record.Rec) {
		if err != nil {
			return
		}
		buf = r.Encode(buf[:0])
		e.logRec(r)
		e.j.replaying = true // its effects are the record's own: none logged
		err = e.apply(buf)
		e.j.replaying = false
	})
	for _, qi := range e.txServe {
		if int(qi) < len(e.queues) && e.queues[qi].live {
			e.serveWaiters(qi)
		}
	}
	e.txServe = e.txServe[:0]
	ticket := e.endUnit()
	e.inTx = false
	return ticket, err
}

// QueuesWithState lists the names match accepts of queues that hold a
// schedule, a limit or a pause, with or without jobs: what a slot's move
// must carry beside its keys. O(schedules + limits).
func (e *Engine) QueuesWithState(match func(name string) bool) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	add := func(name string) {
		if !seen[name] && match(name) {
			seen[name] = true
			out = append(out, name)
		}
	}
	for _, name := range e.limits.Names(func(*queue.Limit) bool { return true }) {
		add(name)
	}
	for _, s := range e.sched.Sorted() {
		add(s.Key.Queue)
	}
	return out
}
