package engine

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/delayd/delayd/schedule"
)

// Recurring schedules: DELAY.SCHEDULE, DELAY.UNSCHEDULE, DELAY.SCHEDULES.
//
// A schedule is state, like a job: keyed by (queue, name), logged, replayed,
// rewritten and replicated. Each firing at fire time T adds a ready job to
// the queue whose id is name:T (T in unix ms, due T), so a firing repeated
// after a crash or a failover is the same job, never a second one.
//
// Only a live leader decides firings: an engine that is neither replaying
// nor following arms one timer per schedule in the timer wheel (timers.go)
// and, when it fires, logs one fire record. Applying that record (live, on
// replay, on a follower) does all of the firing: it creates the job from the
// schedule's stored payload and options, unless a job of that id exists,
// and sets the schedule's last fire time and count. A fire record whose time
// is not after the schedule's last fire changes nothing, so a record applied
// twice (a rewrite's tail over its snapshot) fires once.
//
// Arming happens where a replay ends (New, a reload after a failed log
// write) and where a follower starts to lead (Lead, Rebuilt); Follow
// disarms. Arming applies the schedule's MISFIRE policy to the firings whose
// time passed while nobody fired them: skip (only the next future time),
// once (one catch-up firing at the latest missed time), all (every missed
// time in order, at most maxCatchUp). A live timer that fires late (the
// process stalled) catches up every firing whose time has come, whatever
// the policy: the server was up.
//
// Records (see record.go for the common prefix; the id is the schedule's
// name, a client id):
//
//	schedule:   op time queue 1 name expr zone every payload acktimeout retry
//	            deadletter misfire start end since last count   (the whole state)
//	unschedule: op time queue 1 name
//	fire:       op time queue 1 name firetime seq               (seq: the job's add order)
const (
	opSchedule   byte = 11
	opUnschedule byte = 12
	opFire       byte = 13
)

// MISFIRE policies.
const (
	MisfireSkip uint8 = iota
	MisfireOnce
	MisfireAll
)

var misfireNames = [...]string{"skip", "once", "all"}

// maxCatchUp bounds the catch-up firings of MISFIRE all at one arming.
const maxCatchUp = 1000

// MaxScheduleName bounds a schedule's name, so that name:T fits a job id.
const MaxScheduleName = 200

// ErrBadSchedule prefixes the errors of a schedule that cannot be made.
var ErrBadSchedule = errors.New("invalid schedule")

// ScheduleArgs describe one DELAY.SCHEDULE.
type ScheduleArgs struct {
	Queue, Name []byte
	// Cron (with Zone, "" for UTC) or Every (ms): exactly one is set.
	Cron, Zone string
	Every      int64
	Payload    []byte
	AckTimeout int64 // -1: the configured default
	Retry      int64 // -1: unlimited
	DeadLetter []byte
	Misfire    uint8
	Start, End int64 // unix ms; 0: none
}

// ScheduleInfo is one schedule as DELAY.SCHEDULES shows it.
type ScheduleInfo struct {
	Queue, Name []byte
	Spec        string // "CRON <expr> [TZ <zone>]" or "EVERY <ms>"
	Next        int64  // the next fire time, -1 when none (past END)
	Last        int64  // the last fire time, -1 when it never fired
	Fired       uint64
	Misfire     string
	Start, End  int64 // 0: none
}

// schedRec is the part of a schedule record the common rec has no field for.
type schedRec struct {
	expr, zone []byte
	every      int64
	misfire    uint8
	start, end int64
	since      int64 // when the spec was set: EVERY's anchor without START, and no firing is at or before it
	last       int64 // last fire time (0: none)
	count      uint64
}

type schedKey struct{ queue, name string }

// sched is one schedule: its state as its record carries it, the parsed
// spec, and, while armed, its timer.
type sched struct {
	key        schedKey
	st         schedRec
	payload    []byte
	ackTimeout int64
	retry      int64
	deadLetter []byte
	spec       *schedule.Spec // nil: the spec no longer parses (never fires)
	ref        uint64         // the timer's ref
	next       int64          // the next fire time; -1: none
	timer      uint32
	timed      bool
}

// schedules is every schedule of the engine. It owns the map and the refs;
// the engine arms and fires.
type schedules struct {
	byKey   map[schedKey]*sched
	byRef   map[uint64]*sched
	lastRef uint64
}

func (ss *schedules) get(k schedKey) *sched { return ss.byKey[k] }

// put stores s, replacing the schedule of the same key; it returns the one
// replaced (its timer is the caller's to stop).
func (ss *schedules) put(s *sched) *sched {
	if ss.byKey == nil {
		ss.byKey, ss.byRef = make(map[schedKey]*sched), make(map[uint64]*sched)
	}
	old := ss.byKey[s.key]
	if old != nil {
		delete(ss.byRef, old.ref)
	}
	ss.lastRef++
	s.ref = ss.lastRef
	ss.byKey[s.key], ss.byRef[s.ref] = s, s
	return old
}

func (ss *schedules) remove(s *sched) {
	delete(ss.byKey, s.key)
	delete(ss.byRef, s.ref)
}

// sorted lists the schedules by (queue, name), so that arming and rewriting
// happen in an order that does not depend on map iteration.
func (ss *schedules) sorted() []*sched {
	out := make([]*sched, 0, len(ss.byKey))
	for _, s := range ss.byKey {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *sched) int {
		return cmp.Or(cmp.Compare(a.key.queue, b.key.queue), cmp.Compare(a.key.name, b.key.name))
	})
	return out
}

// parseSpec parses a schedule's spec as its record holds it.
func parseSpec(st *schedRec) (*schedule.Spec, error) {
	if st.every > 0 {
		return schedule.Every(st.every)
	}
	return schedule.Cron(string(st.expr), string(st.zone))
}

// specText renders the spec as DELAY.SCHEDULE took it.
func specText(st *schedRec) string {
	if st.every > 0 {
		return "EVERY " + strconv.FormatInt(st.every, 10)
	}
	s := "CRON " + string(st.expr)
	if len(st.zone) > 0 {
		s += " TZ " + string(st.zone)
	}
	return s
}

// anchor is where EVERY's firings are counted from: START, or when the
// spec was set.
func (s *sched) anchor() int64 {
	if s.st.start > 0 {
		return s.st.start
	}
	return s.st.since
}

// base is the time the next firing comes strictly after: the later of when
// the spec was set, the last firing and just before START.
func (s *sched) base() int64 {
	return max(s.st.since, s.st.last, s.st.start-1)
}

// nextAfter is the schedule's first fire time after t, within END.
func (s *sched) nextAfter(t int64) (int64, bool) {
	if s.spec == nil {
		return 0, false
	}
	n, ok := s.spec.Next(t, s.anchor())
	if !ok || (s.st.end > 0 && n > s.st.end) {
		return 0, false
	}
	return n, true
}

// lastBefore is the latest fire time after base and before now, for
// MISFIRE once: a window that doubles from one second finds it without
// walking every missed time of a long downtime.
func (s *sched) lastBefore(now int64) (int64, bool) {
	base := s.base()
	for w := int64(1000); ; w *= 2 {
		from := max(base, now-w)
		t, ok := s.nextAfter(from)
		if ok && t < now {
			for {
				t2, ok := s.nextAfter(t)
				if !ok || t2 >= now {
					return t, true
				}
				t = t2
			}
		}
		if from == base || w > 1<<50 {
			return 0, false
		}
	}
}

// Schedule creates or replaces (by name) a recurring schedule of a queue.
// Replacing keeps the last fire time and the count; it keeps EVERY's anchor
// too when the spec and START are unchanged, so that a client that upserts
// its schedules at every start changes nothing. O(1) plus the search for
// the next fire time.
func (e *Engine) Schedule(a ScheduleArgs) (uint64, error) {
	if len(a.Name) == 0 || len(a.Name) > MaxScheduleName {
		return 0, fmt.Errorf("%w: a schedule name is 1 to %d bytes", ErrBadSchedule, MaxScheduleName)
	}
	if len(a.Payload) > e.opts.MaxPayload {
		return 0, ErrPayloadTooLarge
	}
	if len(a.Queue) > MaxKey || len(a.DeadLetter) > MaxKey {
		return 0, ErrKeyTooLong
	}
	if a.End > 0 && a.End < a.Start {
		return 0, fmt.Errorf("%w: END is before START", ErrBadSchedule)
	}
	st := schedRec{expr: []byte(a.Cron), zone: []byte(a.Zone), every: a.Every, misfire: a.Misfire, start: a.Start, end: a.End}
	if a.Every > 0 {
		st.expr, st.zone = nil, nil
	}
	spec, err := parseSpec(&st)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrBadSchedule, err)
	}
	wr, err := e.begin(0)
	if err != nil {
		return 0, err
	}
	defer wr.end()
	now := wr.now
	st.since = now
	if old := e.sched.get(schedKey{string(a.Queue), string(a.Name)}); old != nil {
		st.last, st.count = old.st.last, old.st.count
		if old.st.every == st.every && string(old.st.expr) == string(st.expr) &&
			string(old.st.zone) == string(st.zone) && old.st.start == st.start {
			st.since = old.st.since
		}
	}
	probe := sched{st: st, spec: spec}
	if _, ok := spec.Next(max(now, probe.base()), probe.anchor()); !ok {
		return 0, fmt.Errorf("%w: %v", ErrBadSchedule, schedule.ErrNever)
	}
	if a.AckTimeout < 0 {
		a.AckTimeout = e.opts.AckTimeout
	}
	r := rec{op: opSchedule, time: now, queue: a.Queue, id: a.Name, payload: a.Payload,
		ackTimeout: a.AckTimeout, retry: a.Retry, deadLetter: a.DeadLetter, sched: &st}
	ticket := e.logRec(&r)
	e.applySchedule(&r)
	return ticket, nil
}

// Unschedule removes a schedule; the jobs it made stay. O(1).
func (e *Engine) Unschedule(queue, name []byte) (bool, uint64, error) {
	wr, err := e.begin(0)
	if err != nil {
		return false, 0, err
	}
	defer wr.end()
	now := wr.now
	if e.sched.get(schedKey{string(queue), string(name)}) == nil {
		return false, 0, nil
	}
	r := rec{op: opUnschedule, time: now, queue: queue, id: name}
	ticket := e.logRec(&r)
	e.applyUnschedule(&r)
	return true, ticket, nil
}

// Schedules lists the schedules of one queue, or of every queue when all is
// set, by (queue, name). O(schedules log schedules).
func (e *Engine) Schedules(queue []byte, all bool) []ScheduleInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []ScheduleInfo
	for _, s := range e.sched.sorted() {
		if !all && s.key.queue != string(queue) {
			continue
		}
		last := s.st.last
		if s.st.count == 0 {
			last = -1
		}
		out = append(out, ScheduleInfo{Queue: []byte(s.key.queue), Name: []byte(s.key.name), Spec: specText(&s.st),
			Next: s.next, Last: last, Fired: s.st.count, Misfire: misfireNames[s.st.misfire%3],
			Start: s.st.start, End: s.st.end})
	}
	return out
}

// schedLive says whether this engine decides firings now: it is neither
// replaying a log nor following a leader. Called with mu held.
func (e *Engine) schedLive() bool {
	return !e.j.replaying && !e.repl.following.Load() && !e.closed
}

// applySchedule applies a schedule record, live or replayed: the state is
// set outright, and a live engine arms it.
func (e *Engine) applySchedule(r *rec) {
	st := *r.sched
	st.expr, st.zone = clone(st.expr), clone(st.zone)
	s := &sched{key: schedKey{string(r.queue), string(r.id)}, st: st, payload: clone(r.payload),
		ackTimeout: r.ackTimeout, retry: r.retry, deadLetter: clone(r.deadLetter), next: -1}
	spec, err := parseSpec(&s.st)
	if err != nil {
		// Only a tz database without a zone it had can get here: keep
		// the schedule, listed, but it cannot fire.
		e.opts.Logger.Warn().Err(err).Str("queue", s.key.queue).Str("schedule", s.key.name).
			Msg("a logged schedule no longer parses: it will not fire")
	} else {
		s.spec = spec
	}
	if old := e.sched.put(s); old != nil {
		e.stopSchedTimer(old)
	}
	e.schedChanged(s.key.queue)
	e.armSchedule(s, r.time, s.st.misfire)
}

// schedChanged tells WATCH and client tracking that a queue's schedules
// changed, as a change to its jobs does: a watched or cached DELAY.SCHEDULES
// is stale. The queue may hold no job (then it has no queue struct).
func (e *Engine) schedChanged(name string) {
	if qi, ok := e.byName[name]; ok {
		if q := &e.queues[qi]; q.watch != nil || e.trackAll {
			e.changed(q)
		}
		return
	}
	if w := e.watches[name]; w != nil || e.trackAll {
		e.changed(&queueEntry{name: name, watch: w})
	}
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}

// applyUnschedule applies an unschedule record.
func (e *Engine) applyUnschedule(r *rec) {
	if s := e.sched.get(schedKey{string(r.queue), string(r.id)}); s != nil {
		e.stopSchedTimer(s)
		e.sched.remove(s)
		e.schedChanged(s.key.queue)
	}
}

// applyFire applies a fire record: the job name:T is created (unless a job
// of that id exists) and the schedule's last fire time and count move. A
// record not after the last firing was applied already. O(1).
func (e *Engine) applyFire(r *rec) {
	s := e.sched.get(schedKey{string(r.queue), string(r.id)})
	if s == nil || r.due <= s.st.last {
		return
	}
	s.st.last = r.due
	s.st.count++
	if !e.schedLive() {
		s.next = -1
		if n, ok := s.nextAfter(s.base()); ok {
			s.next = n
		}
	}
	id := fireID(r.id, r.due)
	if qi, ok := e.queueFor(r.queue, false); ok {
		if _, exists := e.jobs.Lookup(&e.queues[qi].run, qi, id); exists {
			return
		}
	}
	e.put(&rec{op: opAdd, time: r.time, queue: r.queue, id: id, due: r.due, seq: r.seq, payload: s.payload,
		ackTimeout: s.ackTimeout, retry: s.retry, deadLetter: s.deadLetter}, true) // fresh: looked up just now
}

// fireID is the id of the job a firing at t makes: name:t.
func fireID(name []byte, t int64) []byte {
	id := make([]byte, 0, len(name)+21)
	id = append(append(id, name...), ':')
	return strconv.AppendInt(id, t, 10)
}

// fireSchedule fires s at t: one record, applied. Called with mu held, by a
// live engine only.
func (e *Engine) fireSchedule(s *sched, t int64) {
	e.seq++
	r := rec{op: opFire, time: e.recNow(), queue: []byte(s.key.queue), id: []byte(s.key.name), due: t, seq: e.seq}
	e.logRec(&r)
	e.applyFire(&r)
}

// armSchedule (re)arms s at now on a live engine: missed firings are
// handled by policy, one due now fires at once, and a timer waits for the
// next. An engine that is not live only computes the next fire time, for
// DELAY.SCHEDULES. Called with mu held.
func (e *Engine) armSchedule(s *sched, now int64, policy uint8) {
	e.stopSchedTimer(s)
	s.next = -1
	if !e.schedLive() {
		if n, ok := s.nextAfter(s.base()); ok {
			s.next = n
		}
		return
	}
	if first, ok := s.nextAfter(s.base()); ok && first < now {
		switch policy {
		case MisfireOnce:
			if t, ok := s.lastBefore(now); ok {
				e.fireSchedule(s, t)
			}
		case MisfireAll:
			n := 0
			for t, ok := first, true; ok && t < now; t, ok = s.nextAfter(t) {
				if n == maxCatchUp {
					e.opts.Logger.Warn().Str("queue", s.key.queue).Str("schedule", s.key.name).Int("fired", n).
						Int64("skipped_from", t).Msg("MISFIRE all: more missed firings than the catch-up limit; the rest are skipped")
					break
				}
				e.fireSchedule(s, t)
				n++
			}
		}
	}
	next, ok := s.nextAfter(max(s.base(), now-1))
	for n := 0; ok; n++ {
		if n == maxCatchUp {
			// A period shorter than the tick: give the rest of this tick up.
			next, ok = s.nextAfter(max(s.base(), now))
			continue
		}
		if next > now {
			if h, armed := e.addTimer(timerSchedule, s.ref, next); armed {
				s.timer, s.timed, s.next = h, true, next
				return
			}
		}
		// Due now (or not after the timer wheel's clock): fire at once.
		e.fireSchedule(s, next)
		next, ok = s.nextAfter(next)
	}
}

// stopSchedTimer cancels s's timer, if it has one.
func (e *Engine) stopSchedTimer(s *sched) {
	if s.timed {
		e.stopTimer(s.timer)
		s.timed = false
	}
}

// onScheduleTimer fires the schedule whose timer came due, then arms it
// again, catching up every firing whose time has come meanwhile.
func (e *Engine) onScheduleTimer(ref uint64, now int64) {
	s := e.sched.byRef[ref]
	if s == nil || !s.timed {
		return
	}
	s.timed = false // the wheel let go of the timer
	if !e.schedLive() || e.writable() != nil {
		// Not deciding firings now (a failed batch, a broken log): arming
		// again (Rebuilt, a restart) applies the MISFIRE policy.
		return
	}
	e.fireSchedule(s, s.next)
	e.armSchedule(s, now, MisfireAll)
}

// armSchedules arms every schedule where a live engine begins: at the end
// of a replay, or on becoming leader; each schedule's MISFIRE policy says
// what happens to the firings nobody made meanwhile. catchUp is for a
// state rebuilt under a server that stayed up (a reload after a failed log
// write, Rebuilt while still leading): the firings it dropped are made
// again, all of them, whatever the policy. Called with mu held.
func (e *Engine) armSchedules(catchUp bool) {
	if !e.schedLive() {
		return
	}
	now := e.recNow()
	for _, s := range e.sched.sorted() {
		policy := s.st.misfire
		if catchUp {
			policy = MisfireAll
		}
		e.armSchedule(s, now, policy)
	}
}

// disarmSchedules stops every schedule's timer, on becoming a follower.
func (e *Engine) disarmSchedules() {
	for _, s := range e.sched.byKey {
		e.stopSchedTimer(s)
	}
}

// resetSchedules drops every schedule (resetState: FLUSHALL, a reload or a
// rebuild). The timers went with the timer wheel.
func (e *Engine) resetSchedules() {
	e.sched = schedules{lastRef: e.sched.lastRef}
}

// scheduleRecs is every schedule as a record stamped now, for a rewrite or
// a snapshot (stateRecs).
func (e *Engine) scheduleRecs(now int64) []rec {
	var out []rec
	for _, s := range e.sched.sorted() {
		st := s.st
		out = append(out, rec{op: opSchedule, time: now, queue: []byte(s.key.queue), id: []byte(s.key.name),
			payload: s.payload, ackTimeout: s.ackTimeout, retry: s.retry, deadLetter: s.deadLetter, sched: &st})
	}
	return out
}

// appendSched appends the body of a schedule or fire record.
func (r *rec) appendSched(dst []byte) []byte {
	switch r.op {
	case opSchedule:
		st := r.sched
		dst = appendBytes(dst, st.expr)
		dst = appendBytes(dst, st.zone)
		dst = binary.AppendVarint(dst, st.every)
		dst = appendBytes(dst, r.payload)
		dst = binary.AppendVarint(dst, r.ackTimeout)
		dst = binary.AppendVarint(dst, r.retry)
		dst = appendBytes(dst, r.deadLetter)
		dst = append(dst, st.misfire)
		dst = binary.AppendVarint(dst, st.start)
		dst = binary.AppendVarint(dst, st.end)
		dst = binary.AppendVarint(dst, st.since)
		dst = binary.AppendVarint(dst, st.last)
		dst = binary.AppendUvarint(dst, st.count)
	case opFire:
		dst = binary.AppendVarint(dst, r.due)
		dst = binary.AppendUvarint(dst, r.seq)
	}
	return dst
}

// sched reads the body of a schedule or fire record; the name must be a
// client id.
func (d *decoder) sched(r *rec) {
	if r.id == nil {
		d.err = errBadRecord
		return
	}
	switch r.op {
	case opSchedule:
		st := &schedRec{}
		st.expr = d.bytes()
		st.zone = d.bytes()
		st.every = d.varint()
		r.payload = d.bytes()
		r.ackTimeout = d.varint()
		r.retry = d.varint()
		r.deadLetter = d.bytes()
		st.misfire = d.byte()
		st.start = d.varint()
		st.end = d.varint()
		st.since = d.varint()
		st.last = d.varint()
		st.count = d.uvarint()
		if len(r.deadLetter) == 0 {
			r.deadLetter = nil
		}
		if len(st.expr) == 0 {
			st.expr = nil
		}
		if len(st.zone) == 0 {
			st.zone = nil
		}
		if d.err == nil && (st.misfire > MisfireAll || (st.every > 0) == (st.expr != nil)) {
			d.err = errBadRecord
		}
		r.sched = st
	case opFire:
		r.due = d.varint()
		r.seq = d.uvarint()
	}
}
