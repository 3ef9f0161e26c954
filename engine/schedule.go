package engine

import (
	"errors"
	"fmt"

	"github.com/delayd/delayd/record"
	"github.com/delayd/delayd/schedule"
)

// Recurring schedules: DELAY.SCHEDULE, DELAY.UNSCHEDULE, DELAY.SCHEDULES
// (docs/decisions/schedules.md). Package schedule keeps the table and
// decides when each fires next and which firings are owed; this file
// applies those decisions: records, timers, and the jobs firings add. Only
// a live leader arms timers; a firing is one idempotent fire record, whose
// application (live, replayed, followed) creates the job name:T.
//
// Records: record.Schedule (the whole state), record.Unschedule and
// record.Fire; the schedule's name is the record's client id.

// MISFIRE policies (schedule.MisfireSkip..).
const (
	MisfireSkip = schedule.MisfireSkip
	MisfireOnce = schedule.MisfireOnce
	MisfireAll  = schedule.MisfireAll
)

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
type ScheduleInfo = schedule.Info

// Schedule creates or replaces (by name) a recurring schedule of a queue.
// Replacing keeps the last fire time and the count, and EVERY's anchor when
// the spec and START are unchanged (schedule.Rec.Replaces). O(1) plus the
// search for the next fire time.
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
	st, spec, err := schedule.NewRec(a.Cron, a.Zone, a.Every, a.Misfire, a.Start, a.End)
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
	if old := e.sched.Get(schedule.Key{Queue: string(a.Queue), Name: string(a.Name)}); old != nil {
		st.Replaces(&old.St)
	}
	if !st.FiresAfter(spec, now) {
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
	if e.sched.Get(schedule.Key{Queue: string(queue), Name: string(name)}) == nil {
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
	return e.sched.List(queue, all)
}

// schedLive says whether this engine decides firings now: it is neither
// replaying a log nor following a leader. Called with mu held.
func (e *Engine) schedLive() bool {
	return !e.j.replaying && !e.repl.following.Load() && !e.closed
}

// applySchedule applies a schedule record, live or replayed: the state is
// set outright, and a live engine arms it.
func (e *Engine) applySchedule(r *record.Rec) {
	s, err := schedule.NewSched(schedule.Key{Queue: string(r.Queue), Name: string(r.ID)}, r.Sched,
		r.Payload, r.AckTimeout, r.Retry, r.DeadLetter)
	if err != nil {
		// Only a tz database without a zone it had can get here: keep
		// the schedule, listed, but it cannot fire.
		e.opts.Logger.Warn().Err(err).Str("queue", s.Key.Queue).Str("schedule", s.Key.Name).
			Msg("a logged schedule no longer parses: it will not fire")
	}
	if old := e.sched.Put(s); old != nil {
		e.stopSchedTimer(old)
	}
	e.schedChanged(s.Key.Queue)
	e.armSchedule(s, r.Time, s.St.Misfire)
}

// schedChanged tells WATCH and client tracking that a queue's schedules
// changed, as a change to its jobs does: a watched or cached DELAY.SCHEDULES
// is stale. The queue may hold no job (then it has no queue struct).
func (e *Engine) schedChanged(name string) {
	if qi, ok := e.byName[name]; ok {
		if q := &e.queues[qi]; q.watch != nil || e.watches.All {
			e.changed(q)
		}
		return
	}
	if w := e.watches.Lookup(name); w != nil || e.watches.All {
		e.changed(&queueEntry{name: name, watch: w})
	}
}

// applyUnschedule applies an unschedule record.
func (e *Engine) applyUnschedule(r *record.Rec) {
	if s := e.sched.Get(schedule.Key{Queue: string(r.Queue), Name: string(r.ID)}); s != nil {
		e.stopSchedTimer(s)
		e.sched.Remove(s)
		e.schedChanged(s.Key.Queue)
	}
}

// applyFire applies a fire record: the job name:T is created (unless a job
// of that id exists) and the schedule's last fire time and count move. A
// record not after the last firing was applied already. O(1).
func (e *Engine) applyFire(r *record.Rec) {
	s := e.sched.Get(schedule.Key{Queue: string(r.Queue), Name: string(r.ID)})
	if s == nil || r.Due <= s.St.Last {
		return
	}
	s.St.Last = r.Due
	s.St.Count++
	if !e.schedLive() {
		s.Next = -1
		if n, ok := s.NextAfter(s.St.Base()); ok {
			s.Next = n
		}
	}
	id := schedule.FireID(r.ID, r.Due)
	if qi, ok := e.queueFor(r.Queue, false); ok {
		if _, exists := e.lookup(qi, id); exists {
			return
		}
	}
	e.put(&record.Rec{Op: record.Add, Time: r.Time, Queue: r.Queue, ID: id, Due: r.Due, Seq: r.Seq, Payload: s.Payload,
		AckTimeout: s.AckTimeout, Retry: s.Retry, DeadLetter: s.DeadLetter}, true) // fresh: looked up just now
}

// fireSchedule fires s at t: one record, applied. Called with mu held, by a
// live engine only.
func (e *Engine) fireSchedule(s *schedule.Sched, t int64) {
	e.seq++
	r := record.Rec{Op: record.Fire, Time: e.recNow(), Queue: []byte(s.Key.Queue), ID: []byte(s.Key.Name), Due: t, Seq: e.seq}
	e.logRec(&r)
	e.applyFire(&r)
}

// armSchedule (re)arms s at now on a live engine: the missed firings its
// policy owes are made (Sched.Owed), one due now fires at once, and a timer
// waits for the next. An engine that is not live only computes the next
// fire time, for DELAY.SCHEDULES. Called with mu held.
func (e *Engine) armSchedule(s *schedule.Sched, now int64, policy uint8) {
	e.stopSchedTimer(s)
	s.Next = -1
	if !e.schedLive() {
		if n, ok := s.NextAfter(s.St.Base()); ok {
			s.Next = n
		}
		return
	}
	owed, rest, capped := s.Owed(now, policy)
	for _, t := range owed {
		e.fireSchedule(s, t)
	}
	if capped {
		e.opts.Logger.Warn().Str("queue", s.Key.Queue).Str("schedule", s.Key.Name).Int("fired", len(owed)).
			Int64("skipped_from", rest).Msg("MISFIRE all: more missed firings than the catch-up limit; the rest are skipped")
	}
	next, ok := s.NextAfter(max(s.St.Base(), now-1))
	for n := 0; ok; n++ {
		if n == schedule.MaxCatchUp {
			// A period shorter than the tick: give the rest of this tick up.
			next, ok = s.NextAfter(max(s.St.Base(), now))
			continue
		}
		if next > now {
			if h, armed := e.addTimer(timerSchedule, s.Ref, next); armed {
				s.Timer, s.Timed, s.Next = h, true, next
				return
			}
		}
		// Due now (or not after the timer wheel's clock): fire at once.
		e.fireSchedule(s, next)
		next, ok = s.NextAfter(next)
	}
}

// stopSchedTimer cancels s's timer, if it has one.
func (e *Engine) stopSchedTimer(s *schedule.Sched) {
	if s.Timed {
		e.stopTimer(s.Timer)
		s.Timed = false
	}
}

// onScheduleTimer fires the schedule whose timer came due, then arms it
// again, catching up every firing whose time has come meanwhile.
func (e *Engine) onScheduleTimer(ref uint64, now int64) {
	s := e.sched.ByRef(ref)
	if s == nil || !s.Timed {
		return
	}
	s.Timed = false // the wheel let go of the timer
	if !e.schedLive() || e.writable() != nil {
		// Not deciding firings now (a failed batch, a broken log): arming
		// again (Rebuilt, a restart) applies the MISFIRE policy.
		return
	}
	e.fireSchedule(s, s.Next)
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
	for _, s := range e.sched.Sorted() {
		policy := s.St.Misfire
		if catchUp {
			policy = MisfireAll
		}
		e.armSchedule(s, now, policy)
	}
}

// disarmSchedules stops every schedule's timer, on becoming a follower.
func (e *Engine) disarmSchedules() {
	for _, s := range e.sched.Sorted() {
		e.stopSchedTimer(s)
	}
}

// resetSchedules drops every schedule (resetState: FLUSHALL, a reload or a
// rebuild). The timers went with the timer wheel.
func (e *Engine) resetSchedules() { e.sched.Reset() }
