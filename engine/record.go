package engine

import (
	"encoding/binary"
	"errors"
)

// The log holds effects, not requests (as Redis logs EXPIRE as PEXPIREAT):
// an add is logged with its absolute due time and add order, a blocking pop
// as the plain pop that happened. Firing is not logged; replay derives it
// from due times, so replay never blocks and reproduces the state exactly.
//
// Every record starts with its op and the engine time (unix ms) it was
// applied at; replay advances the wheel to that time before applying it, so
// jobs become ready in the same order as they did live.
//
//	add:    op time queue idkind id due seq deliveries flags payload
//	cancel: op time queue idkind id
//	pop:    op time queue idkind id
//	meta:   op time queue(empty) 0 lastSID seq
//
// idkind 0 is a server id (uvarint), 1 a client id (length-prefixed bytes).
// Integers are varints; byte strings are uvarint length then bytes.
// flags bit 0: put the job at the head of its ready list (a delivery taken
// back from a client that left); bit 1: the job was ready (rewrite snapshot).
const (
	opAdd    byte = 1
	opCancel byte = 2
	opPop    byte = 3
	opMeta   byte = 4 // first record of a rewritten log: last server id and add order
)

const (
	flagHead  = 1 << 0
	flagReady = 1 << 1
)

var errBadRecord = errors.New("malformed log record")

type rec struct {
	op         byte
	time       int64
	queue      []byte
	sid        uint64
	id         []byte // client id; nil for a server id
	due        int64
	seq        uint64
	deliveries uint32
	flags      byte
	payload    []byte
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// encode appends r to dst.
func (r *rec) encode(dst []byte) []byte {
	dst = append(dst, r.op)
	dst = binary.AppendVarint(dst, r.time)
	dst = appendBytes(dst, r.queue)
	if r.id == nil {
		dst = append(dst, 0)
		dst = binary.AppendUvarint(dst, r.sid)
	} else {
		dst = append(dst, 1)
		dst = appendBytes(dst, r.id)
	}
	if r.op == opMeta {
		return binary.AppendUvarint(dst, r.seq)
	}
	if r.op != opAdd {
		return dst
	}
	dst = binary.AppendVarint(dst, r.due)
	dst = binary.AppendUvarint(dst, r.seq)
	dst = binary.AppendUvarint(dst, uint64(r.deliveries))
	dst = append(dst, r.flags)
	return appendBytes(dst, r.payload)
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

// decode parses one record; slices alias b.
func (r *rec) decode(b []byte) error {
	d := decoder{b: b}
	*r = rec{op: d.byte(), time: d.varint(), queue: d.bytes()}
	switch d.byte() {
	case 0:
		r.sid = d.uvarint()
	case 1:
		r.id = d.bytes()
		if d.err == nil && (len(r.id) == 0 || len(r.id) > 256) {
			d.err = errBadRecord
		}
	default:
		d.err = errBadRecord
	}
	switch r.op {
	case opAdd:
		r.due = d.varint()
		r.seq = d.uvarint()
		r.deliveries = uint32(d.uvarint())
		r.flags = d.byte()
		r.payload = d.bytes()
	case opMeta:
		r.seq = d.uvarint()
	case opCancel, opPop:
	default:
		d.err = errBadRecord
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = errBadRecord
	}
	return d.err
}
