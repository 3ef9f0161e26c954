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
