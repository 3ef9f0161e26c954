package engine

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/delayd/delayd/record"
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
// Records: record.Schedule (the whole state), record.Unschedule and
// record.Fire; the schedule's name is the record's client id.

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

type schedKey struct{ queue, name string }

// sched is one schedule: its state as its record carries it, the parsed
// spec, and, while armed, its timer.
type sched struct {
	key        schedKey
	st         record.Sched
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
func parseSpec(st *record.Sched) (*schedule.Spec, error) {
	if st.Every > 0 {
		return schedule.Every(st.Every)
	}
	return schedule.Cron(string(st.Expr), string(st.Zone))
}

// specText renders the spec as DELAY.SCHEDULE took it.
func specText(st *record.Sched) string {
	if st.Every > 0 {
		return "EVERY " + strconv.FormatInt(st.Every, 10)
	}
	s := "CRON " + string(st.Expr)
	if len(st.Zone) > 0 {
		s += " TZ " + string(st.Zone)
	}
	return s
}

// anchor is where EVERY's firings are counted from: START, or when the
// spec was set.
func (s *sched) anchor() int64 {
	if s.st.Start > 0 {
		return s.st.Start
	}
	return s.st.Since
}

// base is the time the next firing comes strictly after: the later of when
// the spec was set, the last firing and just before START.
func (s *sched) base() int64 {
	return max(s.st.Since, s.st.Last, s.st.Start-1)
}

// nextAfter is the schedule's first fire time after t, within END.
func (s *sched) nextAfter(t int64) (int64, bool) {
	if s.spec == nil {
		return 0, false
	}
	n, ok := s.spec.Next(t, s.anchor())
	if !ok || (s.st.End > 0 && n > s.st.End) {
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
	st := record.Sched{Expr: []byte(a.Cron), Zone: []byte(a.Zone), Every: a.Every, Misfire: a.Misfire, Start: a.Start, End: a.End}
	if a.Every > 0 {
		st.Expr, st.Zone = nil, nil
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
	st.Since = now
	if old := e.sched.get(schedKey{string(a.Queue), string(a.Name)}); old != nil {
		st.Last, st.Count = old.st.Last, old.st.Count
		if old.st.Every == st.Every && string(old.st.Expr) == string(st.Expr) &&
			string(old.st.Zone) == string(st.Zone) && old.st.Start == st.Start {
			st.Since = old.st.Since
		}
	}
	probe := sched{st: st, spec: spec}
	if _, ok := spec.Next(max(now, probe.base()), probe.anchor()); !ok {
		return 0, fmt.Errorf("%w: %v", ErrBadSchedule, schedule.ErrNever)
	}
	if a.AckTimeout < 0 {
		a.AckTimeout = e.opts.AckTimeout
	}
	r := record.Rec{Op: record.Schedule, Time: now, Queue: a.Queue, ID: a.Name, Payload: a.Payload,
		AckTimeout: a.AckTimeout, Retry: a.Retry, DeadLetter: a.DeadLetter, Sched: &st}
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
	r := record.Rec{Op: record.Unschedule, Time: now, Queue: queue, ID: name}
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
		last := s.st.Last
		if s.st.Count == 0 {
			last = -1
		}
		out = append(out, ScheduleInfo{Queue: []byte(s.key.queue), Name: []byte(s.key.name), Spec: specText(&s.st),
			Next: s.next, Last: last, Fired: s.st.Count, Misfire: misfireNames[s.st.Misfire%3],
			Start: s.st.Start, End: s.st.End})
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
func (e *Engine) applySchedule(r *record.Rec) {
	st := *r.Sched
	st.Expr, st.Zone = clone(st.Expr), clone(st.Zone)
	s := &sched{key: schedKey{string(r.Queue), string(r.ID)}, st: st, payload: clone(r.Payload),
		ackTimeout: r.AckTimeout, retry: r.Retry, deadLetter: clone(r.DeadLetter), next: -1}
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
	e.armSchedule(s, r.Time, s.st.Misfire)
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
func (e *Engine) applyUnschedule(r *record.Rec) {
	if s := e.sched.get(schedKey{string(r.Queue), string(r.ID)}); s != nil {
		e.stopSchedTimer(s)
		e.sched.remove(s)
		e.schedChanged(s.key.queue)
	}
}

// applyFire applies a fire record: the job name:T is created (unless a job
// of that id exists) and the schedule's last fire time and count move. A
// record not after the last firing was applied already. O(1).
func (e *Engine) applyFire(r *record.Rec) {
	s := e.sched.get(schedKey{string(r.Queue), string(r.ID)})
	if s == nil || r.Due <= s.st.Last {
		return
	}
	s.st.Last = r.Due
	s.st.Count++
	if !e.schedLive() {
		s.next = -1
		if n, ok := s.nextAfter(s.base()); ok {
			s.next = n
		}
	}
	id := fireID(r.ID, r.Due)
	if qi, ok := e.queueFor(r.Queue, false); ok {
		if _, exists := e.jobs.Lookup(&e.queues[qi].run, qi, id); exists {
			return
		}
	}
	e.put(&record.Rec{Op: record.Add, Time: r.Time, Queue: r.Queue, ID: id, Due: r.Due, Seq: r.Seq, Payload: s.payload,
		AckTimeout: s.ackTimeout, Retry: s.retry, DeadLetter: s.deadLetter}, true) // fresh: looked up just now
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
	r := record.Rec{Op: record.Fire, Time: e.recNow(), Queue: []byte(s.key.queue), ID: []byte(s.key.name), Due: t, Seq: e.seq}
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
		policy := s.st.Misfire
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
func (e *Engine) scheduleRecs(now int64) []record.Rec {
	var out []record.Rec
	for _, s := range e.sched.sorted() {
		st := s.st
		out = append(out, record.Rec{Op: record.Schedule, Time: now, Queue: []byte(s.key.queue), ID: []byte(s.key.name),
			Payload: s.payload, AckTimeout: s.ackTimeout, Retry: s.retry, DeadLetter: s.deadLetter, Sched: &st})
	}
	return out
}
