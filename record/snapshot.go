package record

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"

	"github.com/delayd/delayd/aof"
)

// A snapshot (a cluster's, engine.Snapshot) is a stream of records, each a
// uvarint length then the record, ended by a zero length: the end mark, so
// a snapshot cut short is told from a whole one.

// AppendSnap appends the encoded record b to a snapshot being built.
func AppendSnap(out, b []byte) []byte {
	out = binary.AppendUvarint(out, uint64(len(b)))
	return append(out, b...)
}

// EndSnap appends the end mark.
func EndSnap(out []byte) []byte { return append(out, 0) }

// SnapReader reads a snapshot's records back, one buffer reused.
type SnapReader struct {
	br  *bufio.Reader
	buf []byte
}

// NewSnapReader reads the snapshot r.
func NewSnapReader(r io.Reader) *SnapReader {
	return &SnapReader{br: bufio.NewReaderSize(r, 1<<20)}
}

// errAfterEnd is a snapshot with bytes after its end mark.
var errAfterEnd = errors.New("data after its end")

// Next returns the next record, valid until the next call, or nil at the
// end mark. A snapshot with no end mark is io.ErrUnexpectedEOF; one with
// data after it, or a record over aof.MaxRecordSize, is an error too.
func (s *SnapReader) Next() ([]byte, error) {
	n, err := binary.ReadUvarint(s.br)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF // no end mark: cut short
	}
	if err != nil {
		return nil, err
	}
	if n == 0 {
		if _, err := s.br.ReadByte(); err != io.EOF {
			return nil, errAfterEnd
		}
		return nil, nil
	}
	if n > aof.MaxRecordSize {
		return nil, ErrBad
	}
	if uint64(cap(s.buf)) < n {
		s.buf = make([]byte, n)
	}
	s.buf = s.buf[:n]
	if _, err := io.ReadFull(s.br, s.buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return s.buf, nil
}
