package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
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
// once. An error also empties B, so that the reads' fast paths need not
// look at Err: an empty B sends them to the slow path, which does.
//
// A cluster follower and a restart's replay decode every record the
// leader or the log holds, so the varints, most of an add record's
// bytes, are read eight bytes at a time (BenchmarkDecodeAdd).
type Decoder struct {
	B   []byte // what is left to read
	Err error
}

// fail records err unless an error came first, and stops every later read.
func (d *Decoder) fail(err error) {
	if d.Err == nil {
		d.Err = err
	}
	d.B = nil
}

func (d *Decoder) Byte() byte {
	if len(d.B) < 1 {
		d.fail(ErrBad)
		return 0
	}
	c := d.B[0]
	d.B = d.B[1:]
	return c
}

// Uvarint reads what binary.Uvarint reads.
func (d *Decoder) Uvarint() uint64 {
	v, i := uvarintAt(d.B, 0)
	if i < 0 {
		d.fail(ErrBad)
		return 0
	}
	d.B = d.B[i:]
	return v
}

// uvarintAt reads the uvarint at b[i:] and returns it and the index after
// it, or -1 when there is none; an i of -1 gives -1 again, so a run of
// reads checks once at its end. What binary.Uvarint reads, overlong forms
// included (logs may hold them).
func uvarintAt(b []byte, i int) (uint64, int) {
	if uint(i) < uint(len(b)) && b[i] < 0x80 {
		return uint64(b[i]), i + 1
	}
	return uvarintLong(b, i)
}

// uvarintLong reads a varint of two or more bytes from one 8-byte load:
// the first byte whose top bit is clear ends it, found by counting
// trailing zeros, and the 7-bit groups are gathered without a loop. A
// server id, whose top bits are a unix millisecond, takes nine bytes: one
// more. The last few bytes of a record take binary.Uvarint's loop.
func uvarintLong(b []byte, i int) (uint64, int) {
	if i < 0 || i > len(b) {
		return 0, -1
	}
	if len(b)-i >= 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		m := ^x & 0x8080808080808080
		if m != 0 {
			n := bits.TrailingZeros64(m) + 1 // the bits read: 8 a byte
			x &= ^uint64(0) >> (64 - n)
			return gather(x), i + n>>3
		}
		if j := i + 9; j <= len(b) && b[j-1] < 0x80 {
			return gather(x) | uint64(b[j-1])<<56, j
		}
	}
	v, n := binary.Uvarint(b[i:])
	if n <= 0 {
		return 0, -1
	}
	return v, i + n
}

// gather packs the low 7 bits of each of x's bytes, the first byte lowest.
func gather(x uint64) uint64 {
	return x&0x7f | x>>1&(0x7f<<7) | x>>2&(0x7f<<14) | x>>3&(0x7f<<21) |
		x>>4&(0x7f<<28) | x>>5&(0x7f<<35) | x>>6&(0x7f<<42) | x>>7&(0x7f<<49)
}

// varintAt is uvarintAt for a zigzag varint, as binary.Varint.
func varintAt(b []byte, i int) (int64, int) {
	ux, i := uvarintAt(b, i)
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x, i
}

// bytesAt is uvarintAt for a length-prefixed byte string, which aliases b.
func bytesAt(b []byte, i int) ([]byte, int) {
	n, i := uvarintAt(b, i)
	if i < 0 || uint64(len(b)-i) < n {
		return nil, -1
	}
	j := i + int(n)
	return b[i:j:j], j
}

// Varint reads a zigzag varint, as binary.Varint.
func (d *Decoder) Varint() int64 {
	v, i := varintAt(d.B, 0)
	if i < 0 {
		d.fail(ErrBad)
		return 0
	}
	d.B = d.B[i:]
	return v
}

// Bytes reads a length-prefixed byte string; it aliases the record.
func (d *Decoder) Bytes() []byte {
	v, i := bytesAt(d.B, 0)
	if i < 0 {
		d.fail(ErrBad)
		return nil
	}
	d.B = d.B[i:]
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
			d.fail(ErrBad)
		}
		return 0, id
	default:
		d.fail(ErrBad)
		return 0, nil
	}
}
