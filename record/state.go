package record

import (
	"encoding/binary"
	"errors"

	"github.com/delayd/delayd/queue"
	"github.com/delayd/delayd/schedule"
)

// The state of a queue name that is not its jobs (its limit, its pause, its
// schedules) as records that set it outright: what a rewrite and a snapshot
// write of it, what a queue's move to another engine carries (an export:
// MIGRATE, docs/decisions/slot-moves.md), and what clears it at the source.

// LimitRecs appends a limit record, stamped now, for each name of ls with a
// limit (a name only paused has PauseRecs' record alone).
func LimitRecs(out []Rec, ls *queue.Limits, now int64) []Rec {
	for _, name := range ls.Names(func(l *queue.Limit) bool { return !l.Spec().IsZero() }) {
		out = append(out, Rec{Op: Limit, Time: now, Queue: []byte(name), Limit: ls.Of(name).Spec()})
	}
	return out
}

// PauseRecs appends a pause record, stamped now, for each paused name of
// ls. Their order with LimitRecs' does not matter: a limit record keeps the
// name's pause and a pause record its limit.
func PauseRecs(out []Rec, ls *queue.Limits, now int64) []Rec {
	for _, name := range ls.Names((*queue.Limit).Paused) {
		out = append(out, Rec{Op: Pause, Time: now, Queue: []byte(name), Flags: 1})
	}
	return out
}

// ScheduleRecs appends every schedule of t (of queue name only, unless name
// is nil) as a record stamped now, by (queue, name).
func ScheduleRecs(out []Rec, t *schedule.Table, name []byte, now int64) []Rec {
	for _, s := range t.Sorted() {
		if name != nil && s.Key.Queue != string(name) {
			continue
		}
		st := s.St
		out = append(out, Rec{Op: Schedule, Time: now, Queue: []byte(s.Key.Queue), ID: []byte(s.Key.Name),
			Payload: s.Payload, AckTimeout: s.AckTimeout, Retry: s.Retry, DeadLetter: s.DeadLetter, Sched: &st})
	}
	return out
}

// QueueState is what of queue name's state is not jobs, stamped now: its
// limit, its pause and its schedules.
func QueueState(name []byte, now int64, ls *queue.Limits, t *schedule.Table) []Rec {
	var out []Rec
	if l := ls.Of(string(name)); l != nil {
		if !l.Spec().IsZero() {
			out = append(out, Rec{Op: Limit, Time: now, Queue: name, Limit: l.Spec()})
		}
		if l.Paused() {
			out = append(out, Rec{Op: Pause, Time: now, Queue: name, Flags: 1})
		}
	}
	return ScheduleRecs(out, t, name, now)
}

// QueueDrop is what removes queue name with the state QueueState writes,
// stamped now: a DEL when it holds jobs, its limit and its pause cleared,
// its schedules removed.
func QueueDrop(name []byte, now int64, hasJobs bool, ls *queue.Limits, t *schedule.Table) []Rec {
	var out []Rec
	if hasJobs {
		out = append(out, Rec{Op: Del, Time: now, Queue: name})
	}
	for _, r := range QueueState(name, now, ls, t) {
		if r.Op == Schedule {
			r = Rec{Op: Unschedule, Time: now, Queue: name, ID: r.ID}
		} else {
			r.Limit, r.Flags = queue.Spec{}, 0 // a zero limit, an unpause
		}
		out = append(out, r)
	}
	return out
}

// An export is one queue's records for another engine: a format byte (the
// payload's version, so that a target of a later release can tell what it
// reads), then each record as a uvarint length and the record.

// exportFormat is the export's version.
const exportFormat = 1

// ErrBadExport is a payload ReadExport cannot read.
var ErrBadExport = errors.New("ERR the migration payload is malformed")

// NewExport returns an export holding no record yet.
func NewExport() []byte { return []byte{exportFormat} }

// AppendExport appends r to the export out, encoded through scratch.
func AppendExport(out []byte, r *Rec, scratch *[]byte) []byte {
	*scratch = r.Encode((*scratch)[:0])
	return AppendSnap(out, *scratch)
}

// ReadExport returns the records of an export of queue name, aliasing
// payload: only the kinds an export holds (adds, limits, pauses,
// schedules), all of name; anything else is ErrBadExport.
func ReadExport(name, payload []byte) ([]Rec, error) {
	if len(payload) == 0 || payload[0] != exportFormat {
		return nil, ErrBadExport
	}
	var recs []Rec
	for b := payload[1:]; len(b) > 0; {
		n, k := binary.Uvarint(b)
		if k <= 0 || n == 0 || n > uint64(len(b)-k) {
			return nil, ErrBadExport
		}
		var r Rec
		if r.Decode(b[k:k+int(n)]) != nil || string(r.Queue) != string(name) {
			return nil, ErrBadExport
		}
		switch r.Op {
		case Add, Limit, Pause, Schedule:
		default:
			return nil, ErrBadExport
		}
		recs = append(recs, r)
		b = b[k+int(n):]
	}
	return recs, nil
}
