package engine

import (
	"encoding/binary"
	"errors"

	"github.com/delayd/delayd/schedule"
)

// The log holds effects, not requests (as Redis logs EXPIRE as PEXPIREAT):
// an add is logged with its absolute due time and add order, a blocking pop
// as the plain pop that happened, a NACK as where the job went. Every record
// sets a state rather than changing one, so applying a record twice, or on
// top of a newer snapshot of the same job (a rewrite's tail), converges on
// the same state. Firing and expired reservations are not logged; replay
// derives them from the times in the records.
//
// Every record starts with its op and the engine time (unix ms) it was
// applied at; replay advances the wheel to that time before applying it, as
// the live engine advanced before applying the write, so jobs become ready
// and reservations expire in the same order as they did live.
//
//	add:     op time queue idkind id due seq deliveries flags payload acktimeout retry deadletter deadline
//	cancel:  op time queue idkind id                        (also ACK: the job is deleted)
//	pop:     op time queue idkind id                        (a pop that deleted the job)
//	meta:    op time queue(empty) 0 lastSID seq             (first record of a rewritten log)
//	reserve: op time queue idkind id deadline deliveries seq (a pop with an ack timeout, or TOUCH)
//	move:    op time queue idkind id due seq deliveries flags [bits reason] (NACK, or a delivery taken back; reason.go)
//	del:     op time queue                                  (DEL: every job of the queue)
//	unit:    op part more body                              (a transaction: see below)
//	lmove:   op time queue idkind id dst idkind id seq flags (LMOVE and its kin: a ready job to dst)
//	flush:   op time queue(empty)                           (FLUSHDB, FLUSHALL: every job of every queue)
//
// lmove names the job by its id in the source queue, then the destination
// queue and the id the job has there (the same one, unless it was taken in
// dst: then a new server id), its new add order, and flagHead when it goes to
// the head of dst's ready list (else the tail). One record, not a pop plus an
// add, so that a crash between the two cannot lose the job. Op 8 is the
// transaction unit's.
//
// idkind 0 is a server id (uvarint), 1 a client id (length-prefixed bytes).
// Integers are varints; byte strings are uvarint length then bytes.
// flags: head puts the job at the head of its ready list, ready at the tail
// (neither: delayed until due), reserved makes it reserved until deadline.
//
// A transaction (MULTI/EXEC, Engine.Atomic) is logged as a unit: its
// records, each as uvarint length then the record, make the unit's body,
// and the body goes into one unit record (part 0, more 0) under the log's
// one checksum, so a crash leaves all of it or, torn, none. A body larger
// than one log record may be (aof.MaxRecordSize) is cut into parts 0, 1, 2,
// ... with more = 1 on every part but the last, which is the commit. Replay
// applies a unit only when its commit is read; parts not followed by the
// next part or the commit (a crash cut the unit, and a restart went on
// logging after them) are dropped whole. part is a uvarint, more one byte,
// and the body the rest of the record.
const (
	opAdd     byte = 1
	opCancel  byte = 2
	opPop     byte = 3
	opMeta    byte = 4
	opReserve byte = 5
	opMove    byte = 6
	opDel     byte = 7
	opUnit    byte = 8
	opLMove   byte = 9
	opFlush   byte = 10
	opLimit   byte = 15 // layout in limit.go
)

// The add record's optional tail: a uvarint of these bits, then each field
// whose bit is set, in this order. A record with none set has no tail, so
// plain adds cost nothing and older logs read unchanged.
const (
	extUnique   = 1 << 0 // varint uniqueTTL
	extDebounce = 1 << 1 // varint debounceUntil
	extGroup    = 1 << 2 // bytes group
	extPriority = 1 << 3 // byte priority
	extOrigin   = 1 << 4 // bytes queue, varint acktimeout, varint retry, bytes deadletter (requeue.go)
	extReason   = 1 << 5 // bytes: the job's last failure reason (reason.go)
	extKnown    = extUnique | extDebounce | extGroup | extPriority | extOrigin | extReason
)

// Op codes 11 to 20 are taken by schedules, tombstones, limits, pauses and
// requeues (schedule.go, unique.go, limit.go, pause.go, requeue.go); each
// says its layout where defined.

const (
	flagHead     = 1 << 0
	flagReady    = 1 << 1
	flagReserved = 1 << 2
)

var errBadRecord = errors.New("malformed log record")

type rec struct {
	op         byte
	time       int64
	queue      []byte
	sid        uint64
	id         []byte // client id; nil for a server id
	due        int64  // add, move: when ready; reserve: the ack deadline
	seq        uint64
	deliveries uint32
	flags      byte
	payload    []byte
	ackTimeout int64
	retry      int64 // -1: unlimited
	deadLetter []byte
	deadline   int64 // add with flagReserved
	// add's optional tail (see extUnique...): absent in records of jobs
	// that use none of them, and in logs written before they existed.
	uniqueTTL     int64   // UNIQUE: ms the id stays taken after the job ends
	debounceUntil int64   // DEBOUNCE: unix ms the due time may not pass
	group         []byte  // GROUP: the job's group within its queue
	priority      uint8   // PRIORITY: 0..9, higher first
	origin        *origin // a dead-lettered job's origin queue and options (requeue.go)
	reason        []byte  // add, move: the job's last failure reason (reason.go); nil: none, or unchanged
	dst           []byte  // lmove: the destination queue
	dsid          uint64  // lmove: the job's id in dst (did nil: a server id)
	did           []byte

	// limit: the queue's flow limit, all zero for none (limit.go).
	limit LimitSpec
	sched *schedule.Rec // schedule: the schedule's own fields (schedule/table.go)
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// encode appends r to dst.
func (r *rec) encode(dst []byte) []byte {
	switch r.op {
	case opTomb:
		return appendTomb(dst, r)
	case opPause:
		return appendPause(dst, r)
	case opRequeue:
		return appendRequeue(dst, r)
	}
	dst = append(dst, r.op)
	dst = binary.AppendVarint(dst, r.time)
	dst = appendBytes(dst, r.queue)
	if r.op == opLimit {
		return appendLimitSpec(dst, r.limit)
	}
	if r.op == opDel || r.op == opFlush {
		return dst
	}
	if r.id == nil {
		dst = append(dst, 0)
		dst = binary.AppendUvarint(dst, r.sid)
	} else {
		dst = append(dst, 1)
		dst = appendBytes(dst, r.id)
	}
	switch r.op {
	case opMeta:
		dst = binary.AppendUvarint(dst, r.seq)
	case opReserve:
		dst = binary.AppendVarint(dst, r.due)
		dst = binary.AppendUvarint(dst, uint64(r.deliveries))
		dst = binary.AppendUvarint(dst, r.seq)
	case opMove:
		dst = binary.AppendVarint(dst, r.due)
		dst = binary.AppendUvarint(dst, r.seq)
		dst = binary.AppendUvarint(dst, uint64(r.deliveries))
		dst = append(dst, r.flags)
		dst = r.appendMoveExt(dst)
	case opLMove:
		dst = appendBytes(dst, r.dst)
		if r.did == nil {
			dst = append(dst, 0)
			dst = binary.AppendUvarint(dst, r.dsid)
		} else {
			dst = append(dst, 1)
			dst = appendBytes(dst, r.did)
		}
		dst = binary.AppendUvarint(dst, r.seq)
		dst = append(dst, r.flags)
	case opSchedule, opFire:
		dst = r.appendSched(dst)
	case opAdd:
		dst = binary.AppendVarint(dst, r.due)
		dst = binary.AppendUvarint(dst, r.seq)
		dst = binary.AppendUvarint(dst, uint64(r.deliveries))
		dst = append(dst, r.flags)
		dst = appendBytes(dst, r.payload)
		dst = binary.AppendVarint(dst, r.ackTimeout)
		dst = binary.AppendVarint(dst, r.retry)
		dst = appendBytes(dst, r.deadLetter)
		dst = binary.AppendVarint(dst, r.deadline)
		dst = r.appendExt(dst)
	}
	return dst
}

// appendExt appends the add record's optional tail.
func (r *rec) appendExt(dst []byte) []byte {
	var bits uint64
	if r.uniqueTTL != 0 {
		bits |= extUnique
	}
	if r.debounceUntil != 0 {
		bits |= extDebounce
	}
	if len(r.group) > 0 {
		bits |= extGroup
	}
	if r.priority != 0 {
		bits |= extPriority
	}
	if r.origin != nil {
		bits |= extOrigin
	}
	if len(r.reason) > 0 {
		bits |= extReason
	}
	if bits == 0 {
		return dst
	}
	dst = binary.AppendUvarint(dst, bits)
	if bits&extUnique != 0 {
		dst = binary.AppendVarint(dst, r.uniqueTTL)
	}
	if bits&extDebounce != 0 {
		dst = binary.AppendVarint(dst, r.debounceUntil)
	}
	if bits&extGroup != 0 {
		dst = appendBytes(dst, r.group)
	}
	if bits&extPriority != 0 {
		dst = append(dst, r.priority)
	}
	if bits&extOrigin != 0 {
		dst = appendOrigin(dst, r.origin)
	}
	if bits&extReason != 0 {
		dst = appendBytes(dst, r.reason)
	}
	return dst
}

// ext reads the add record's optional tail, if there is one.
func (d *decoder) ext(r *rec) {
	if d.err != nil || len(d.b) == 0 {
		return
	}
	bits := d.uvarint()
	if bits&^extKnown != 0 {
		d.err = errBadRecord
		return
	}
	if bits&extUnique != 0 {
		r.uniqueTTL = d.varint()
	}
	if bits&extDebounce != 0 {
		r.debounceUntil = d.varint()
	}
	if bits&extGroup != 0 {
		r.group = d.bytes()
	}
	if bits&extPriority != 0 {
		r.priority = d.byte()
	}
	if bits&extOrigin != 0 {
		r.origin = d.origin()
	}
	if bits&extReason != 0 {
		r.reason = d.bytes()
	}
	// Only the canonical form: appendExt writes a bit only for a field that
	// is set, so a record reads back to the bytes it came from.
	if bits == 0 || (bits&extUnique != 0) != (r.uniqueTTL != 0) || (bits&extDebounce != 0) != (r.debounceUntil != 0) ||
		(bits&extGroup != 0) != (len(r.group) > 0) || (bits&extPriority != 0) != (r.priority != 0) ||
		(bits&extReason != 0) != (len(r.reason) > 0) {
		d.err = errBadRecord
	}
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) byte() byte {
	if d.err != nil || len(d.b) < 1 {
		d.err = errBadRecord
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errBadRecord
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errBadRecord
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil || uint64(len(d.b)) < n {
		d.err = errBadRecord
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// id reads an idkind and the id it announces: a server id, or a client id
// of 1 to 256 bytes (nil for a server id).
func (d *decoder) id() (uint64, []byte) {
	switch d.byte() {
	case 0:
		return d.uvarint(), nil
	case 1:
		id := d.bytes()
		if d.err == nil && (len(id) == 0 || len(id) > 256) {
			d.err = errBadRecord
		}
		return 0, id
	default:
		d.err = errBadRecord
		return 0, nil
	}
}

// decode parses one record; slices alias b.
func (r *rec) decode(b []byte) error {
	if len(b) > 0 {
		switch b[0] {
		case opTomb:
			return r.decodeTomb(b)
		case opPause:
			return r.decodePause(b)
		case opRequeue:
			return r.decodeRequeue(b)
		}
	}
	d := decoder{b: b}
	*r = rec{op: d.byte(), time: d.varint(), queue: d.bytes()}
	if r.op == opLimit {
		r.limit = d.limitSpec()
	} else if r.op != opDel && r.op != opFlush {
		r.sid, r.id = d.id()
	}
	switch r.op {
	case opMeta:
		r.seq = d.uvarint()
	case opReserve:
		r.due = d.varint()
		r.deliveries = uint32(d.uvarint())
		r.seq = d.uvarint()
	case opMove:
		r.due = d.varint()
		r.seq = d.uvarint()
		r.deliveries = uint32(d.uvarint())
		r.flags = d.byte()
		d.moveExt(r)
	case opAdd:
		r.due = d.varint()
		r.seq = d.uvarint()
		r.deliveries = uint32(d.uvarint())
		r.flags = d.byte()
		r.payload = d.bytes()
		r.ackTimeout = d.varint()
		r.retry = d.varint()
		r.deadLetter = d.bytes()
		r.deadline = d.varint()
		d.ext(r)
		if len(r.deadLetter) == 0 {
			r.deadLetter = nil
		}
	case opLMove:
		r.dst = d.bytes()
		r.dsid, r.did = d.id()
		r.seq = d.uvarint()
		r.flags = d.byte()
	case opSchedule, opUnschedule, opFire:
		d.sched(r)
	case opCancel, opPop, opDel, opFlush, opLimit:
	default:
		d.err = errBadRecord
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = errBadRecord
	}
	return d.err
}
