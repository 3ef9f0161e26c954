package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// An entry's record is its fields in order, integers as uvarints:
//
//	version (1 byte, 1) | index | term | type (1 byte) |
//	len(data) | data | len(extensions) | extensions | appended-at (varint, Unix ns; 0: none)
//
// About 20 bytes around the data, against msgpack's field names (about
// 60) and no reflection. The index is stored although the position implies
// it: open checks that entries follow each other, so a record that is not
// where it should be is found there, not by the state machine.
const entryVersion = 1

// An entry longer than maxPart (a batch of large payloads can pass the
// AOF's record limit) is split over records that follow each other: a
// head, entryHead then the uvarint length of the whole encoding then its
// first maxPart bytes, and parts, entryPart then the next bytes. A head
// whose parts are not all there is a torn tail.
const (
	entryHead = 2
	entryPart = 3
)

// maxPart bounds a record's share of an entry: well under
// aof.MaxRecordSize. A variable for the tests, which split small entries.
var maxPart = 16 << 20

// splitEntry calls fn with each record of the encoded entry e.
func splitEntry(e []byte, fn func(rec []byte)) {
	if len(e) <= maxPart {
		fn(e)
		return
	}
	head := binary.AppendUvarint([]byte{entryHead}, uint64(len(e)))
	fn(append(head, e[:maxPart]...))
	for e = e[maxPart:]; len(e) > 0; {
		n := min(len(e), maxPart)
		fn(append([]byte{entryPart}, e[:n]...))
		e = e[n:]
	}
}

// joinEntry is the encoding split over recs (one record: itself).
func joinEntry(recs [][]byte) ([]byte, error) {
	if len(recs) == 1 {
		return recs[0], nil
	}
	head := recs[0]
	if len(head) == 0 || head[0] != entryHead {
		return nil, fmt.Errorf("%w: %d records, not a split entry", errEntry, len(recs))
	}
	total, n := binary.Uvarint(head[1:])
	if n <= 0 {
		return nil, fmt.Errorf("%w: a split entry's length", errEntry)
	}
	e := make([]byte, 0, total)
	e = append(e, head[1+n:]...)
	for _, r := range recs[1:] {
		if len(r) == 0 || r[0] != entryPart {
			return nil, fmt.Errorf("%w: a split entry's part", errEntry)
		}
		e = append(e, r[1:]...)
	}
	if uint64(len(e)) != total {
		return nil, fmt.Errorf("%w: a split entry of %d bytes holds %d", errEntry, total, len(e))
	}
	return e, nil
}

// splitHead reads a head record: the whole encoding's length and its
// first bytes.
func splitHead(rec []byte) (total int, first []byte, err error) {
	t, n := binary.Uvarint(rec[1:])
	if n <= 0 || t > 1<<40 {
		return 0, nil, fmt.Errorf("%w: a split entry's length", errEntry)
	}
	return int(t), rec[1+n:], nil
}

// errEntry is a record that checks out (its CRC) but does not decode: a
// newer format, or a bug.
var errEntry = errors.New("raftlog: an entry does not decode")

// appendEntry appends l's record to dst.
func appendEntry(dst []byte, l *raft.Log) []byte {
	dst = append(dst, entryVersion)
	dst = binary.AppendUvarint(dst, l.Index)
	dst = binary.AppendUvarint(dst, l.Term)
	dst = append(dst, byte(l.Type))
	dst = binary.AppendUvarint(dst, uint64(len(l.Data)))
	dst = append(dst, l.Data...)
	dst = binary.AppendUvarint(dst, uint64(len(l.Extensions)))
	dst = append(dst, l.Extensions...)
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	return binary.AppendVarint(dst, at)
}

// entryIndex is the index a record names, read without decoding the rest.
func entryIndex(p []byte) (uint64, error) {
	if len(p) < 2 || p[0] != entryVersion {
		return 0, fmt.Errorf("%w: version", errEntry)
	}
	i, n := binary.Uvarint(p[1:])
	if n <= 0 {
		return 0, fmt.Errorf("%w: index", errEntry)
	}
	return i, nil
}

// decodeEntry fills l from a record; l.Data and l.Extensions alias p.
func decodeEntry(p []byte, l *raft.Log) error {
	if len(p) == 0 || p[0] != entryVersion {
		return fmt.Errorf("%w: version", errEntry)
	}
	p = p[1:]
	bad := false
	uv := func() uint64 {
		v, n := binary.Uvarint(p)
		if n <= 0 {
			bad = true
			return 0
		}
		p = p[n:]
		return v
	}
	bytesOf := func() []byte {
		n := uv()
		if bad || n > uint64(len(p)) {
			bad = true
			return nil
		}
		b := p[:n:n]
		p = p[n:]
		if n == 0 {
			return nil
		}
		return b
	}
	l.Index = uv()
	l.Term = uv()
	if bad || len(p) == 0 {
		return fmt.Errorf("%w: header", errEntry)
	}
	l.Type = raft.LogType(p[0])
	p = p[1:]
	l.Data = bytesOf()
	l.Extensions = bytesOf()
	at, n := binary.Varint(p)
	if bad || n <= 0 || n != len(p) {
		return fmt.Errorf("%w: entry %d", errEntry, l.Index)
	}
	l.AppendedAt = time.Time{}
	if at != 0 {
		l.AppendedAt = time.Unix(0, at)
	}
	return nil
}
