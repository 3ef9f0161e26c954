package record

import (
	"bytes"
	"encoding/binary"

	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/queue"
)

// A job as a record: the add record that recreates it whole, which a
// rewrite, a snapshot, a compaction, a restatement and a queue's export
// write.

// Whole is the add record that recreates the job in slot s of t as it is,
// its queue q of name, stamped now; flags say its state (0: delayed,
// FlagReady, FlagReserved, whose Deadline the caller sets). By value: a
// snapshot or a rewrite encodes a million of them, and a Rec on the heap
// each was a fifth of a snapshot's time.
func Whole(t *jobs.Table, q *queue.Queue, s uint32, name []byte, now int64, flags byte) Rec {
	j := t.At(s)
	r := Rec{Op: Add, Time: now, Queue: name, SID: j.SID, Due: j.Due, Seq: j.Seq, Deliveries: j.Deliveries, Flags: flags,
		Payload: t.Payload(j), AckTimeout: int64(j.AckTimeout), Retry: int64(j.Retry), DeadLetter: t.DeadLetters[s]}
	if j.IDLen > 0 {
		r.ID = t.Arena.Bytes(j.Data, int(j.IDLen))
	}
	if ji, ok := t.IdentOf(s); ok { // a rewrite keeps UNIQUE and DEBOUNCE
		r.UniqueTTL, r.DebounceUntil = ji.UniqueTTL, ji.DebounceUntil
	}
	if j.Flags&jobs.FlagOrigin != 0 {
		r.Origin = t.Origins[s]
	}
	if j.Flags&(jobs.FlagReason|jobs.FlagTimedOut) != 0 {
		r.Reason = []byte(t.Reason(s))
	}
	if j.Lane != 0 {
		r.Group, r.Priority = LaneOf(t, q, s)
	}
	return r
}

// LaneOf returns the group (a copy; nil for the default group) and the
// priority of the job in slot s of t, of queue q.
func LaneOf(t *jobs.Table, q *queue.Queue, s uint32) ([]byte, uint8) {
	g, p := q.Order.LaneOf(&t.Slab, s)
	if g == "" {
		return nil, p
	}
	return []byte(g), p
}

// AppendQueueJobs appends to the export out every job of queue q (index qi,
// named name) as Whole writes it, stamped now: the ready jobs in line
// order, then the delayed ones and the reservations (deadline gives a
// reservation's) in slot order; replay puts the delayed back in (due, add
// order). It returns the export and the jobs appended.
func AppendQueueJobs(out []byte, t *jobs.Table, q *queue.Queue, qi uint32, name []byte, now int64,
	deadline func(s uint32) int64) ([]byte, int) {
	var buf []byte
	n := 0
	put := func(s uint32, flags byte) {
		r := Whole(t, q, s, name, now, flags)
		if flags == FlagReserved {
			r.Deadline = deadline(s)
		}
		out = AppendExport(out, &r, &buf)
		n++
	}
	q.Order.Each(&t.Slab, func(s uint32) bool {
		put(s, FlagReady)
		return true
	})
	for cursor := uint64(0); ; {
		cursor = t.Scan(qi, cursor, 1024, func(s uint32) {
			switch t.At(s).State {
			case jobs.StateDelayed:
				put(s, 0)
			case jobs.StateReserved:
				put(s, FlagReserved)
			}
		})
		if cursor == 0 {
			return out, n
		}
	}
}

// Cand is a job a record tailed from the log may let go to disk (payloads
// on disk, docs/decisions/payloads-on-disk.md): the segment the record
// lies in and where the payload lies there (-1 for a move record, which
// carries none: its job is restated and spilled from the restatement), the
// job's server id, add order and queue, or its client id.
type Cand struct {
	Seg      uint64
	Off      int64
	SID, Seq uint64
	Queue    string
	ID       string // a client id; "" for a server id
}

// Tailed says what rec, read from the log at off in segment seg, offers to
// disk: an add record with a payload of a small block (moved false), or a
// move that left the job delayed (moved true), due after beyond (the
// horizon's time when the tail began: a record due sooner offers nothing,
// and is decoded only); ok false for any other record.
// last is the caller's last candidate: its queue's name is shared when
// the record's is the same (a tail holds runs of one queue's records: one
// string a run, not one a record, to collect).
func Tailed(seg uint64, off int64, rec []byte, last *Cand, beyond int64) (c Cand, moved, ok bool) {
	if r, at, ok := AddPayload(rec); ok && r.Due > beyond && len(r.Payload) <= jobs.MaxSmall {
		c = Cand{seg, off + int64(at), r.SID, r.Seq, last.name(r.Queue), string(r.ID)}
	} else if r, ok := MovedLater(rec); ok && r.Due > beyond {
		c, moved = Cand{seg, -1, r.SID, r.Seq, last.name(r.Queue), string(r.ID)}, true
	} else {
		return Cand{}, false, false
	}
	*last = c
	return c, moved, true
}

// name is q as a string, c's own if it is the same.
func (c *Cand) name(q []byte) string {
	if c.Queue == string(q) {
		return c.Queue
	}
	return string(q)
}

// Fits says j is still the job c's record left (its id and add order),
// delayed beyond horizon, with a payload that may go to disk, or, a client
// id's whose id and payload are too big a block for that, one that may
// leave memory whole for the far-future buckets.
func (c *Cand) Fits(j *jobs.Job, horizon int64) bool {
	if j.State != jobs.StateDelayed || j.Seq != c.Seq || j.Due <= horizon || (c.ID != "") != (j.IDLen > 0) || c.ID == "" && j.SID != c.SID {
		return false
	}
	return jobs.CanSpill(j, max(c.Off, 0)) || c.ID != "" && j.Flags&jobs.FlagOnDisk == 0 && j.Plen() > 0 // what Engine.out takes
}

// sizeTag begins the queue field of a snapshot's meta record that says
// how many jobs follow (SizeMark), so a restore sizes its id index once
// instead of growing it through every power of two. As with FarMark, a
// release that does not know it applies the meta record it is.
const sizeTag = "\x00snapshot-size:"

// SizeMark is the queue field of a snapshot's meta record: the jobs it
// holds with a client id and with a server id. A hint: a restore may see
// more or fewer.
func SizeMark(clientIDs, serverIDs uint64) []byte {
	return binary.AppendUvarint(binary.AppendUvarint([]byte(sizeTag), clientIDs), serverIDs)
}

// SizeOf returns the counts of r, if r is a meta record with a SizeMark.
func SizeOf(r *Rec) (clientIDs, serverIDs uint64, ok bool) {
	q, ok := bytes.CutPrefix(r.Queue, []byte(sizeTag))
	if r.Op != Meta || !ok {
		return 0, 0, false
	}
	c, k := binary.Uvarint(q)
	if k <= 0 {
		return 0, 0, false
	}
	s, k2 := binary.Uvarint(q[k:])
	return c, s, k2 > 0 && k+k2 == len(q)
}

// JobsEndMark is the queue field of the meta record a snapshot writes
// after its last job: the adds between a SizeMark and it are of distinct
// jobs, which a restore into an empty engine files without looking each
// up first. A release that does not know it applies the meta record it is.
var JobsEndMark = []byte("\x00snapshot-jobs-end")

// IsJobsEnd says whether r is the meta record that ends a snapshot's jobs.
func IsJobsEnd(r *Rec) bool { return r.Op == Meta && bytes.Equal(r.Queue, JobsEndMark) }

// farMarkTag begins the queue field of a meta record that marks a
// checkpoint of the far-future buckets (FarMark). No meta record carried a
// queue before: a release that does not know the mark applies it as the
// meta record it is.
const farMarkTag = "\x00far-checkpoint:"

// FarMark is the queue field of the meta record that marks checkpoint n of
// the far-future buckets in the log (docs/decisions/far-future-buckets.md):
// replay skips, before it, every record of a job the checkpoint's runs hold.
func FarMark(n uint64) []byte { return binary.AppendUvarint([]byte(farMarkTag), n) }

// MarkOf returns the checkpoint r marks, if r is a mark (FarMark).
func MarkOf(r *Rec) (uint64, bool) {
	q, ok := bytes.CutPrefix(r.Queue, []byte(farMarkTag))
	if r.Op != Meta || !ok {
		return 0, false
	}
	n, k := binary.Uvarint(q)
	return n, k == len(q) && k > 0
}
