package record

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrBad is a record that does not parse, or parses to a form Encode never
// writes.
var ErrBad = errors.New("malformed log record")

// ErrNewer is a record of a kind, or with a tail bit, that this version
// does not know: a newer delayd wrote it, and this one must not guess
// (docs/decisions/versions.md). It is an ErrBad too; unlike damage, no
// --repair is called for: the newer binary reads it.
var ErrNewer = fmt.Errorf("%w: a record kind or field this delayd does not know; a newer delayd wrote it: run that one (or newer)", ErrBad)

// AppendBytes appends b as a uvarint length then the bytes.
func AppendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// AppendID appends an idkind and its id: a server id sid when id is nil,
// else the client id.
func AppendID(dst []byte, sid uint64, id []byte) []byte {
	if id == nil {
		dst = append(dst, 0)
		return binary.AppendUvarint(dst, sid)
	}
	dst = append(dst, 1)
	return AppendBytes(dst, id)
}

// Decoder reads the fields of a record. The first error sticks: every
// later read returns zero, so a caller reads every field and checks Err
// once.
type Decoder struct {
	B   []byte // what is left to read
	Err error
}

func (d *Decoder) Byte() byte {
	if d.Err != nil || len(d.B) < 1 {
		d.Err = ErrBad
		return 0
	}
	c := d.B[0]
	d.B = d.B[1:]
	return c
}

func (d *Decoder) Uvarint() uint64 {
	if d.Err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.B)
	if n <= 0 {
		d.Err = ErrBad
		return 0
	}
	d.B = d.B[n:]
	return v
}

func (d *Decoder) Varint() int64 {
	if d.Err != nil {
		return 0
	}
	v, n := binary.Varint(d.B)
	if n <= 0 {
		d.Err = ErrBad
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Bytes reads a length-prefixed byte string; it aliases the record.
func (d *Decoder) Bytes() []byte {
	n := d.Uvarint()
	if d.Err != nil || uint64(len(d.B)) < n {
		d.Err = ErrBad
		return nil
	}
	v := d.B[:n:n]
	d.B = d.B[n:]
	return v
}

// ID reads an idkind and the id it announces: a server id, or a client id
// of 1 to 256 bytes (nil for a server id).
func (d *Decoder) ID() (uint64, []byte) {
	switch d.Byte() {
	case 0:
		return d.Uvarint(), nil
	case 1:
		id := d.Bytes()
		if d.Err == nil && (len(id) == 0 || len(id) > 256) {
			d.Err = ErrBad
		}
		return 0, id
	default:
		d.Err = ErrBad
		return 0, nil
	}
}
