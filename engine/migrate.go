package engine

import (
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
var ErrBadMigration = record.ErrBadExport

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
	out, buf := record.NewExport(), []byte(nil)
	state := record.QueueState(name, now, &e.limits, &e.sched)
	for i := range state {
		out = record.AppendExport(out, &state[i], &buf)
	}
	if qi, found := e.queueFor(name, false); found && e.queues[qi].live && e.wheel != nil {
		out, njobs = record.AppendQueueJobs(out, &e.jobs, &e.queues[qi].Queue, qi, name, now,
			func(s uint32) int64 { d, _ := e.wheel.Due(s); return d })
	}
	return out, njobs, len(state)+njobs > 0
}

// ImportQueue applies what ExportQueue wrote of queue name, as one unit
// (a payload holding another queue's records is refused): a job whose id
// the queue holds already is left as it is (so an import that runs again,
// after a move cut short, adds nothing twice); the queue's limit, pause
// and schedules are set as exported. Every record is stamped with this
// engine's time and add order; due times and deadlines are absolute, as
// exported. Waiters on the queue are served after. O(records).
func (e *Engine) ImportQueue(name, payload []byte) (added int, ticket uint64, err error) {
	recs, err := record.ReadExport(name, payload)
	if err != nil {
		return 0, 0, err
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
				if _, ok := e.find(r); ok {
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
	qi, ok := e.queueFor(name, false)
	recs := record.QueueDrop(name, wr.now, ok && e.queues[qi].Jobs() > 0, &e.limits, &e.sched)
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
