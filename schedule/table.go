package schedule

import (
	"cmp"
	"errors"
	"slices"
	"strconv"
)

// MISFIRE policies: what arming does with the firings whose time passed
// while nobody fired them.
const (
	MisfireSkip uint8 = iota // only the next future time
	MisfireOnce              // one catch-up firing at the latest missed time
	MisfireAll               // every missed time in order, at most MaxCatchUp
)

var misfireNames = [...]string{"skip", "once", "all"}

// MisfireName is the policy's name as DELAY.SCHEDULE takes it.
func MisfireName(p uint8) string { return misfireNames[p%3] }

// MaxCatchUp bounds the catch-up firings of MISFIRE all at one arming.
const MaxCatchUp = 1000

// Rec is a schedule's own state, as its record carries it (the engine's
// record codec reads and writes these fields).
type Rec struct {
	Expr, Zone []byte // the cron expression and its zone; nil with Every
	Every      int64  // the period in ms; 0 with a cron expression
	Misfire    uint8
	Start, End int64  // unix ms; 0: none
	Since      int64  // when the spec was set: EVERY's anchor without START, and no firing is at or before it
	Last       int64  // last fire time (0: none)
	Count      uint64 // firings so far
}

// NewRec is the state of a new schedule and its parsed spec: a cron
// expression (with its zone, "" for UTC) or, when every > 0, a period in
// ms; START and END in unix ms, 0 for none. Since is the caller's to set.
func NewRec(cron, zone string, every int64, misfire uint8, start, end int64) (Rec, *Spec, error) {
	if end > 0 && end < start {
		return Rec{}, nil, errors.New("END is before START")
	}
	r := Rec{Every: every, Misfire: misfire, Start: start, End: end}
	if every <= 0 {
		r.Expr, r.Zone = []byte(cron), []byte(zone)
	}
	spec, err := r.Parse()
	return r, spec, err
}

// Parse parses the spec r holds.
func (r *Rec) Parse() (*Spec, error) {
	if r.Every > 0 {
		return Every(r.Every)
	}
	return Cron(string(r.Expr), string(r.Zone))
}

// Text renders the spec as DELAY.SCHEDULE took it.
func (r *Rec) Text() string {
	if r.Every > 0 {
		return "EVERY " + strconv.FormatInt(r.Every, 10)
	}
	s := "CRON " + string(r.Expr)
	if len(r.Zone) > 0 {
		s += " TZ " + string(r.Zone)
	}
	return s
}

// anchor is where EVERY's firings are counted from: START, or when the
// spec was set.
func (r *Rec) anchor() int64 {
	if r.Start > 0 {
		return r.Start
	}
	return r.Since
}

// Base is the time the next firing comes strictly after: the later of when
// the spec was set, the last firing and just before START.
func (r *Rec) Base() int64 {
	return max(r.Since, r.Last, r.Start-1)
}

// Replaces makes r, the new state of a schedule that replaces old, keep
// old's last fire time and count, and EVERY's anchor too when the spec and
// START are unchanged: a client that upserts its schedules at every start
// changes nothing.
func (r *Rec) Replaces(old *Rec) {
	r.Last, r.Count = old.Last, old.Count
	if old.Every == r.Every && string(old.Expr) == string(r.Expr) &&
		string(old.Zone) == string(r.Zone) && old.Start == r.Start {
		r.Since = old.Since
	}
}

// FiresAfter says whether spec, the parsed spec of r, fires at all after
// now (END aside: a schedule past its END is kept and listed).
func (r *Rec) FiresAfter(spec *Spec, now int64) bool {
	_, ok := spec.Next(max(now, r.Base()), r.anchor())
	return ok
}

// Key names a schedule: its queue and its name.
type Key struct{ Queue, Name string }

// Sched is one schedule: its state as its record carries it, what the jobs
// it makes are added with, the parsed spec, and, while armed, the engine's
// timer.
type Sched struct {
	Key        Key
	St         Rec
	Payload    []byte
	AckTimeout int64
	Retry      int64
	DeadLetter []byte
	Spec       *Spec  // nil: the spec no longer parses (never fires)
	Ref        uint64 // the timer's ref, given by Table.Put
	Next       int64  // the next fire time; -1: none
	Timer      uint32 // the engine's timer handle, while Timed
	Timed      bool
}

// NewSched is the schedule a record states, its bytes copied (a record's
// may alias a read buffer), its spec parsed, not armed. When the spec no
// longer parses (a tz database without a zone it had), the schedule is
// returned with err and no Spec: it is kept and listed, but never fires.
func NewSched(key Key, st *Rec, payload []byte, ackTimeout, retry int64, deadLetter []byte) (*Sched, error) {
	s := &Sched{Key: key, St: *st, Payload: clone(payload), AckTimeout: ackTimeout, Retry: retry,
		DeadLetter: clone(deadLetter), Next: -1}
	s.St.Expr, s.St.Zone = clone(st.Expr), clone(st.Zone)
	spec, err := s.St.Parse()
	if err == nil {
		s.Spec = spec
	}
	return s, err
}

// clone copies b; nil and empty are both nil.
func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}

// NextAfter is the schedule's first fire time after t, within END.
func (s *Sched) NextAfter(t int64) (int64, bool) {
	if s.Spec == nil {
		return 0, false
	}
	n, ok := s.Spec.Next(t, s.St.anchor())
	if !ok || (s.St.End > 0 && n > s.St.End) {
		return 0, false
	}
	return n, true
}

// lastBefore is the latest fire time after Base and before now, for
// MISFIRE once: a window that doubles from one second finds it without
// walking every missed time of a long downtime.
func (s *Sched) lastBefore(now int64) (int64, bool) {
	base := s.St.Base()
	for w := int64(1000); ; w *= 2 {
		from := max(base, now-w)
		t, ok := s.NextAfter(from)
		if ok && t < now {
			for {
				t2, ok := s.NextAfter(t)
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

// Owed are the fire times, in order, that arming s at now makes up under
// policy: of the times after Base and before now, none (skip), the latest
// (once), or every one (all) up to MaxCatchUp. When all has more, capped is
// set and rest is the first time left unmade. Firing one of them moves
// only Last, which no later time of the list depends on.
func (s *Sched) Owed(now int64, policy uint8) (owed []int64, rest int64, capped bool) {
	first, ok := s.NextAfter(s.St.Base())
	if !ok || first >= now {
		return nil, 0, false
	}
	switch policy {
	case MisfireOnce:
		if t, ok := s.lastBefore(now); ok {
			owed = append(owed, t)
		}
	case MisfireAll:
		for t, ok := first, true; ok && t < now; t, ok = s.NextAfter(t) {
			if len(owed) == MaxCatchUp {
				return owed, t, true
			}
			owed = append(owed, t)
		}
	}
	return owed, 0, false
}

// FireID is the id of the job a firing at t makes: name:t (t in unix ms),
// so that a firing made again after a crash or a failover is the same job.
func FireID(name []byte, t int64) []byte {
	id := make([]byte, 0, len(name)+21)
	id = append(append(id, name...), ':')
	return strconv.AppendInt(id, t, 10)
}

// Info is one schedule as DELAY.SCHEDULES shows it.
type Info struct {
	Queue, Name []byte
	Spec        string // "CRON <expr> [TZ <zone>]" or "EVERY <ms>"
	Next        int64  // the next fire time, -1 when none (past END)
	Last        int64  // the last fire time, -1 when it never fired
	Fired       uint64
	Misfire     string
	Start, End  int64 // 0: none
}

// Table is every schedule, by key and by timer ref. The engine arms and
// fires; the table only keeps them.
type Table struct {
	byKey   map[Key]*Sched
	byRef   map[uint64]*Sched
	lastRef uint64
}

// Get is the schedule of key k, or nil.
func (t *Table) Get(k Key) *Sched { return t.byKey[k] }

// ByRef is the schedule whose timer has ref, or nil (a schedule replaced
// or removed since its timer was set).
func (t *Table) ByRef(ref uint64) *Sched { return t.byRef[ref] }

// Put stores s under a new ref, replacing the schedule of the same key; it
// returns the one replaced (its timer is the caller's to stop).
func (t *Table) Put(s *Sched) *Sched {
	if t.byKey == nil {
		t.byKey, t.byRef = make(map[Key]*Sched), make(map[uint64]*Sched)
	}
	old := t.byKey[s.Key]
	if old != nil {
		delete(t.byRef, old.Ref)
	}
	t.lastRef++
	s.Ref = t.lastRef
	t.byKey[s.Key], t.byRef[s.Ref] = s, s
	return old
}

// Remove forgets s.
func (t *Table) Remove(s *Sched) {
	delete(t.byKey, s.Key)
	delete(t.byRef, s.Ref)
}

// Reset drops every schedule. Refs keep counting up, so a timer of a
// dropped schedule never finds a new one.
func (t *Table) Reset() { *t = Table{lastRef: t.lastRef} }

// Sorted lists the schedules by (queue, name), so that arming and rewriting
// happen in an order that does not depend on map iteration.
func (t *Table) Sorted() []*Sched {
	out := make([]*Sched, 0, len(t.byKey))
	for _, s := range t.byKey {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *Sched) int {
		return cmp.Or(cmp.Compare(a.Key.Queue, b.Key.Queue), cmp.Compare(a.Key.Name, b.Key.Name))
	})
	return out
}

// List is the schedules of queue, or of every queue when all is set, by
// (queue, name). O(schedules log schedules).
func (t *Table) List(queue []byte, all bool) []Info {
	var out []Info
	for _, s := range t.Sorted() {
		if !all && s.Key.Queue != string(queue) {
			continue
		}
		last := s.St.Last
		if s.St.Count == 0 {
			last = -1
		}
		out = append(out, Info{Queue: []byte(s.Key.Queue), Name: []byte(s.Key.Name), Spec: s.St.Text(),
			Next: s.Next, Last: last, Fired: s.St.Count, Misfire: MisfireName(s.St.Misfire),
			Start: s.St.Start, End: s.St.End})
	}
	return out
}
