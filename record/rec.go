package record

import (
	"encoding/binary"
	"unsafe"

	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/queue"
	"github.com/delayd/delayd/schedule"
)

// Flags of add, move and lmove: head puts the job at the head of its ready
// list, ready at the tail (neither: delayed until due), reserved makes it
// reserved until Deadline.
const (
	FlagHead     = 1 << 0
	FlagReady    = 1 << 1
	FlagReserved = 1 << 2
)

// The add record's optional tail: a uvarint of these bits, then each field
// whose bit is set, in this order. A record with none set has no tail, so
// plain adds cost nothing and older logs read unchanged.
const (
	extUnique   = 1 << 0 // varint UniqueTTL
	extDebounce = 1 << 1 // varint DebounceUntil
	extGroup    = 1 << 2 // bytes Group
	extPriority = 1 << 3 // byte Priority
	extOrigin   = 1 << 4 // bytes queue, varint acktimeout, varint retry, bytes deadletter
	extReason   = 1 << 5 // bytes Reason
	extKnown    = extUnique | extDebounce | extGroup | extPriority | extOrigin | extReason
)

// The move record's optional tail, as the add's: a uvarint of bits, then
// the fields. A NACK with a reason, or a delivery handed back with one,
// carries it here.
const (
	moveReason   = 1 << 0 // bytes Reason
	moveExtKnown = moveReason
)

// Rec is one record of any kind; which fields a kind uses is its layout
// (op.go). Decoded byte strings alias the record's bytes.
type Rec struct {
	Op         byte
	Time       int64
	Queue      []byte
	SID        uint64
	ID         []byte // client id; nil for a server id
	Due        int64  // add, move: when ready; reserve: the ack deadline
	Seq        uint64
	Deliveries uint32
	Flags      byte
	Payload    []byte
	AckTimeout int64
	Retry      int64 // -1: unlimited
	DeadLetter []byte
	Deadline   int64 // add with FlagReserved
	// add's optional tail (see extUnique...): absent in records of jobs
	// that use none of them, and in logs written before they existed.
	UniqueTTL     int64        // UNIQUE: ms the id stays taken after the job ends
	DebounceUntil int64        // DEBOUNCE: unix ms the due time may not pass
	Group         []byte       // GROUP: the job's group within its queue
	Priority      uint8        // PRIORITY: 0..9, higher first
	Origin        *jobs.Origin // a dead-lettered job's origin queue and options
	Reason        []byte       // add, move: the job's last failure reason; nil: none, or unchanged
	Dst           []byte       // lmove, requeue: the destination queue
	DSID          uint64       // lmove, requeue: the job's id in Dst (DID nil: a server id)
	DID           []byte

	Limit queue.Spec    // limit: the name's flow limit, all zero for none
	Sched *schedule.Rec // schedule: the schedule's own fields
}

// Encode appends r to dst; r is of any kind but a unit (AppendUnit). The switch, not a table of functions, is the
// dispatch: a call through a function value makes r escape, and every
// DELAY.ADD encodes a record.
func (r *Rec) Encode(dst []byte) []byte {
	switch r.Op {
	case Tomb:
		dst = append(dst, Tomb)
		dst = binary.AppendVarint(dst, r.Time)
		dst = binary.AppendUvarint(dst, r.SID)
		return binary.AppendVarint(dst, r.Due)
	case Pause:
		dst = append(dst, Pause)
		dst = binary.AppendVarint(dst, r.Time)
		dst = AppendBytes(dst, r.Queue)
		return append(dst, r.Flags)
	case Requeue:
		dst = append(dst, Requeue)
		dst = binary.AppendVarint(dst, r.Time)
		dst = AppendBytes(dst, r.Queue)
		dst = AppendID(dst, r.SID, r.ID)
		dst = AppendBytes(dst, r.Dst)
		dst = AppendID(dst, r.DSID, r.DID)
		dst = binary.AppendUvarint(dst, r.Seq)
		dst = binary.AppendVarint(dst, r.AckTimeout)
		dst = binary.AppendVarint(dst, r.Retry)
		return AppendBytes(dst, r.DeadLetter)
	}
	dst = append(dst, r.Op)
	dst = binary.AppendVarint(dst, r.Time)
	dst = AppendBytes(dst, r.Queue)
	switch r.Op {
	case Limit:
		s := r.Limit
		dst = binary.AppendUvarint(dst, uint64(s.Concurrency))
		dst = binary.AppendUvarint(dst, uint64(s.Rate))
		dst = binary.AppendUvarint(dst, uint64(s.Per))
		return binary.AppendUvarint(dst, uint64(s.GroupConcurrency))
	case Del, Flush:
		return dst
	}
	dst = AppendID(dst, r.SID, r.ID)
	switch r.Op {
	case Meta:
		dst = binary.AppendUvarint(dst, r.Seq)
	case Reserve:
		dst = binary.AppendVarint(dst, r.Due)
		dst = binary.AppendUvarint(dst, uint64(r.Deliveries))
		dst = binary.AppendUvarint(dst, r.Seq)
	case Move:
		dst = binary.AppendVarint(dst, r.Due)
		dst = binary.AppendUvarint(dst, r.Seq)
		dst = binary.AppendUvarint(dst, uint64(r.Deliveries))
		dst = append(dst, r.Flags)
		if len(r.Reason) > 0 {
			dst = binary.AppendUvarint(dst, moveReason)
			dst = AppendBytes(dst, r.Reason)
		}
	case LMove:
		dst = AppendBytes(dst, r.Dst)
		dst = AppendID(dst, r.DSID, r.DID)
		dst = binary.AppendUvarint(dst, r.Seq)
		dst = append(dst, r.Flags)
	case Schedule:
		st := r.Sched
		dst = AppendBytes(dst, st.Expr)
		dst = AppendBytes(dst, st.Zone)
		dst = binary.AppendVarint(dst, st.Every)
		dst = AppendBytes(dst, r.Payload)
		dst = binary.AppendVarint(dst, r.AckTimeout)
		dst = binary.AppendVarint(dst, r.Retry)
		dst = AppendBytes(dst, r.DeadLetter)
		dst = append(dst, st.Misfire)
		dst = binary.AppendVarint(dst, st.Start)
		dst = binary.AppendVarint(dst, st.End)
		dst = binary.AppendVarint(dst, st.Since)
		dst = binary.AppendVarint(dst, st.Last)
		dst = binary.AppendUvarint(dst, st.Count)
	case Fire:
		dst = binary.AppendVarint(dst, r.Due)
		dst = binary.AppendUvarint(dst, r.Seq)
	case Add:
		dst = binary.AppendVarint(dst, r.Due)
		dst = binary.AppendUvarint(dst, r.Seq)
		dst = binary.AppendUvarint(dst, uint64(r.Deliveries))
		dst = append(dst, r.Flags)
		dst = AppendBytes(dst, r.Payload)
		dst = binary.AppendVarint(dst, r.AckTimeout)
		dst = binary.AppendVarint(dst, r.Retry)
		dst = AppendBytes(dst, r.DeadLetter)
		dst = binary.AppendVarint(dst, r.Deadline)
		dst = r.appendExt(dst)
	}
	return dst
}

// appendExt appends the add record's optional tail.
func (r *Rec) appendExt(dst []byte) []byte {
	var bits uint64
	if r.UniqueTTL != 0 {
		bits |= extUnique
	}
	if r.DebounceUntil != 0 {
		bits |= extDebounce
	}
	if len(r.Group) > 0 {
		bits |= extGroup
	}
	if r.Priority != 0 {
		bits |= extPriority
	}
	if r.Origin != nil {
		bits |= extOrigin
	}
	if len(r.Reason) > 0 {
		bits |= extReason
	}
	if bits == 0 {
		return dst
	}
	dst = binary.AppendUvarint(dst, bits)
	if bits&extUnique != 0 {
		dst = binary.AppendVarint(dst, r.UniqueTTL)
	}
	if bits&extDebounce != 0 {
		dst = binary.AppendVarint(dst, r.DebounceUntil)
	}
	if bits&extGroup != 0 {
		dst = AppendBytes(dst, r.Group)
	}
	if bits&extPriority != 0 {
		dst = append(dst, r.Priority)
	}
	if bits&extOrigin != 0 {
		o := r.Origin
		dst = AppendBytes(dst, o.Queue)
		dst = binary.AppendVarint(dst, o.AckTimeout)
		dst = binary.AppendVarint(dst, o.Retry)
		dst = AppendBytes(dst, o.DeadLetter)
	}
	if bits&extReason != 0 {
		dst = AppendBytes(dst, r.Reason)
	}
	return dst
}

// Decode parses one record of any kind but a unit (DecodeUnit); slices
// alias b. It accepts only what Encode writes, so a record reads back to
// the bytes it came from.
func (r *Rec) Decode(b []byte) error {
	if r.decodeAdd(b) {
		return nil
	}
	return r.decode(b)
}

// decode is Decode for every record, decodeAdd's the fast one.
func (r *Rec) decode(b []byte) error {
	d := Decoder{B: b}
	*r = Rec{Op: d.Byte(), Time: d.Varint()}
	switch r.Op {
	case Tomb:
		r.SID = d.Uvarint()
		r.Due = d.Varint()
		return d.end()
	case Pause:
		r.Queue, r.Flags = d.Bytes(), d.Byte()
		if d.Err == nil && r.Flags > 1 {
			d.fail(ErrBad)
		}
		return d.end()
	case Requeue:
		r.Queue = d.Bytes()
		r.SID, r.ID = d.ID()
		r.Dst = d.Bytes()
		r.DSID, r.DID = d.ID()
		r.Seq = d.Uvarint()
		r.AckTimeout = d.Varint()
		r.Retry = d.Varint()
		if r.DeadLetter = d.Bytes(); len(r.DeadLetter) == 0 {
			r.DeadLetter = nil
		}
		return d.end()
	}
	r.Queue = d.Bytes()
	switch r.Op {
	case Limit:
		r.Limit = queue.Spec{Concurrency: int64(d.Uvarint()), Rate: int64(d.Uvarint()), Per: int64(d.Uvarint()),
			GroupConcurrency: int64(d.Uvarint())}
		if d.Err == nil && !r.Limit.Valid() {
			d.fail(ErrBad)
		}
	case Del, Flush:
	default:
		r.SID, r.ID = d.ID()
	}
	switch r.Op {
	case Meta:
		r.Seq = d.Uvarint()
	case Reserve:
		r.Due = d.Varint()
		r.Deliveries = uint32(d.Uvarint())
		r.Seq = d.Uvarint()
	case Move:
		r.Due = d.Varint()
		r.Seq = d.Uvarint()
		r.Deliveries = uint32(d.Uvarint())
		r.Flags = d.Byte()
		d.moveExt(r)
	case Add:
		r.Due = d.Varint()
		r.Seq = d.Uvarint()
		r.Deliveries = uint32(d.Uvarint())
		r.Flags = d.Byte()
		r.Payload = d.Bytes()
		r.AckTimeout = d.Varint()
		r.Retry = d.Varint()
		r.DeadLetter = d.Bytes()
		r.Deadline = d.Varint()
		d.ext(r)
		if len(r.DeadLetter) == 0 {
			r.DeadLetter = nil
		}
	case LMove:
		r.Dst = d.Bytes()
		r.DSID, r.DID = d.ID()
		r.Seq = d.Uvarint()
		r.Flags = d.Byte()
	case Schedule, Unschedule, Fire:
		d.sched(r)
	case Cancel, Pop, Del, Flush, Limit:
	default:
		d.Err, d.B = ErrNewer, nil
	}
	return d.end()
}

// decodeAdd is Decode for an add record without the optional tail, the
// record a cluster follower and a restart's replay read most: its fields
// are read with an index in a register, where a Decoder's methods would
// store and load the rest of the record for each (BenchmarkDecodeAdd).
// false leaves r to the general path, which reads what this does not and
// says what is wrong.
func (r *Rec) decodeAdd(b []byte) bool {
	if len(b) == 0 || b[0] != Add {
		return false
	}
	*r = Rec{Op: Add}
	i := 1
	r.Time, i = varintAt(b, i)
	r.Queue, i = bytesAt(b, i)
	if uint(i) >= uint(len(b)) {
		return false
	}
	switch kind := b[i]; kind {
	case 0:
		r.SID, i = uvarintAt(b, i+1)
	case 1:
		r.ID, i = bytesAt(b, i+1)
		if len(r.ID) == 0 || len(r.ID) > 256 {
			return false
		}
	default:
		return false
	}
	r.Due, i = varintAt(b, i)
	r.Seq, i = uvarintAt(b, i)
	var v uint64
	v, i = uvarintAt(b, i)
	r.Deliveries = uint32(v)
	if uint(i) >= uint(len(b)) {
		return false
	}
	r.Flags = b[i]
	r.Payload, i = bytesAt(b, i+1)
	r.AckTimeout, i = varintAt(b, i)
	r.Retry, i = varintAt(b, i)
	r.DeadLetter, i = bytesAt(b, i)
	r.Deadline, i = varintAt(b, i)
	if i != len(b) {
		return false // a tail (ext), damage, or cut short
	}
	if len(r.DeadLetter) == 0 {
		r.DeadLetter = nil
	}
	return true
}

// end is the error of a whole record: the first one, or bytes left over.
func (d *Decoder) end() error {
	if d.Err == nil && len(d.B) != 0 {
		d.fail(ErrBad)
	}
	return d.Err
}

// ext reads the add record's optional tail, if there is one.
func (d *Decoder) ext(r *Rec) {
	if d.Err != nil || len(d.B) == 0 {
		return
	}
	bits := d.Uvarint()
	if bits&^extKnown != 0 {
		d.Err, d.B = ErrNewer, nil
		return
	}
	if bits&extUnique != 0 {
		r.UniqueTTL = d.Varint()
	}
	if bits&extDebounce != 0 {
		r.DebounceUntil = d.Varint()
	}
	if bits&extGroup != 0 {
		r.Group = d.Bytes()
	}
	if bits&extPriority != 0 {
		r.Priority = d.Byte()
	}
	if bits&extOrigin != 0 {
		o := &jobs.Origin{Queue: d.Bytes(), AckTimeout: d.Varint(), Retry: d.Varint(), DeadLetter: d.Bytes()}
		if len(o.DeadLetter) == 0 {
			o.DeadLetter = nil
		}
		r.Origin = o
	}
	if bits&extReason != 0 {
		r.Reason = d.Bytes()
	}
	// Only the canonical form: appendExt writes a bit only for a field that
	// is set, so a record reads back to the bytes it came from.
	if bits == 0 || (bits&extUnique != 0) != (r.UniqueTTL != 0) || (bits&extDebounce != 0) != (r.DebounceUntil != 0) ||
		(bits&extGroup != 0) != (len(r.Group) > 0) || (bits&extPriority != 0) != (r.Priority != 0) ||
		(bits&extReason != 0) != (len(r.Reason) > 0) {
		d.fail(ErrBad)
	}
}

// moveExt reads the move record's optional tail, if there is one; only the
// canonical form (a bit for a field that is set).
func (d *Decoder) moveExt(r *Rec) {
	if d.Err != nil || len(d.B) == 0 {
		return
	}
	bits := d.Uvarint()
	if bits&^moveExtKnown != 0 {
		d.Err, d.B = ErrNewer, nil
		return
	}
	if bits == 0 {
		d.fail(ErrBad)
		return
	}
	if r.Reason = d.Bytes(); d.Err == nil && len(r.Reason) == 0 {
		d.fail(ErrBad)
	}
}

// sched reads the body of a schedule, unschedule or fire record; the name
// must be a client id.
func (d *Decoder) sched(r *Rec) {
	if r.ID == nil {
		d.fail(ErrBad)
		return
	}
	switch r.Op {
	case Schedule:
		st := &schedule.Rec{}
		st.Expr = d.Bytes()
		st.Zone = d.Bytes()
		st.Every = d.Varint()
		r.Payload = d.Bytes()
		r.AckTimeout = d.Varint()
		r.Retry = d.Varint()
		r.DeadLetter = d.Bytes()
		st.Misfire = d.Byte()
		st.Start = d.Varint()
		st.End = d.Varint()
		st.Since = d.Varint()
		st.Last = d.Varint()
		st.Count = d.Uvarint()
		if len(r.DeadLetter) == 0 {
			r.DeadLetter = nil
		}
		if len(st.Expr) == 0 {
			st.Expr = nil
		}
		if len(st.Zone) == 0 {
			st.Zone = nil
		}
		if d.Err == nil && (st.Misfire > schedule.MisfireAll || (st.Every > 0) == (st.Expr != nil)) {
			d.fail(ErrBad)
		}
		r.Sched = st
	case Fire:
		r.Due = d.Varint()
		r.Seq = d.Uvarint()
	}
}

// AppendUnit appends one part of a transaction unit: part, more (1 on
// every part but the commit) and the part's slice of the body.
func AppendUnit(dst []byte, part uint64, more byte, body []byte) []byte {
	dst = append(dst, Unit)
	dst = binary.AppendUvarint(dst, part)
	dst = append(dst, more)
	return append(dst, body...)
}

// DecodeUnit parses a unit record; body aliases b.
func DecodeUnit(b []byte) (part uint64, more byte, body []byte, err error) {
	d := Decoder{B: b}
	if d.Byte() != Unit {
		return 0, 0, nil, ErrBad
	}
	part, more = d.Uvarint(), d.Byte()
	if d.Err != nil || more > 1 {
		return 0, 0, nil, ErrBad
	}
	return part, more, d.B, nil
}

// AddPayload decodes b if it is an add record with a payload, and returns
// it with the offset of the payload's bytes in b: where a reader of the
// log finds them again (payloads on disk).
func AddPayload(b []byte) (r Rec, at int, ok bool) {
	if len(b) == 0 || b[0] != Add || r.Decode(b) != nil || len(r.Payload) == 0 {
		return r, 0, false
	}
	return r, int(uintptr(unsafe.Pointer(unsafe.SliceData(r.Payload))) - uintptr(unsafe.Pointer(unsafe.SliceData(b)))), true
}

// MovedLater decodes b if it is a move record that leaves the job delayed:
// a job rescheduled (or handed back) to a later time, whose payload a
// reader of the log may keep on disk by restating it (payloads on disk).
func MovedLater(b []byte) (r Rec, ok bool) {
	if len(b) == 0 || b[0] != Move || r.Decode(b) != nil || r.Flags&(FlagHead|FlagReady|FlagReserved) != 0 {
		return r, false
	}
	return r, true
}

// KeptAt returns where the payload of r, an add record decoded from rec,
// which lies at recOff in its segment, is in that segment, if its job may
// keep it there from the start instead of a copy in memory (payloads on
// disk, at replay): a job delayed beyond by, with a payload of a small
// block that aliases rec (a unit gathered from its parts is a copy) at an
// offset a locator can name.
func (r *Rec) KeptAt(rec []byte, recOff, by int64) (int64, bool) {
	n := len(r.Payload)
	if r.Op != Add || r.Due <= by || r.Flags&(FlagHead|FlagReady|FlagReserved) != 0 ||
		n == 0 || n > jobs.MaxSmall || n > len(rec) {
		return 0, false
	}
	at := uintptr(unsafe.Pointer(unsafe.SliceData(r.Payload))) - uintptr(unsafe.Pointer(unsafe.SliceData(rec)))
	if at > uintptr(len(rec)-n) || recOff+int64(at) > jobs.MaxLocOffset {
		return 0, false
	}
	return recOff + int64(at), true
}
