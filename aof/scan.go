package aof

import (
	"encoding/binary"
	"fmt"
	"io"
)

// ReadRange reads the whole records of f that start in [from, to) (from a
// record's start, such as HeaderSize), calling fn with each record's
// payload and the payload's offset in the file; the payload aliases a
// buffer reused after fn returns. It returns where the next record starts:
// to, or before it if a record straddles to, or the first record that is
// damaged or torn, where it stops. O(to - from), one read per MiB. For a
// reader beside the writer (the records the writer has flushed are read
// back); replay is Replay's.
//
// buf is the buffer to read into, as the previous call returned it (nil
// the first time): a tail that reads a little every tick so makes its MiB
// once. Made afresh each call, it cost a server that tails its log ten
// times a second a collection every few hundred ms and a page-faulting
// clear of a MiB each time, on the CPU that serves the clients.
func ReadRange(f io.ReaderAt, buf []byte, from, to int64, fn func(off int64, payload []byte)) ([]byte, int64, error) {
	if cap(buf) < rangeBuf {
		buf = make([]byte, 0, rangeBuf)
	}
	buf = buf[:0]
	base := from // file offset of buf[0]
	for from < to {
		// Keep the unread tail, then fill up to a MiB past it.
		buf = append(buf[:0], buf[from-base:]...)
		base = from
		want := int(min(int64(cap(buf)), to-base))
		if want < RecordHeaderSize {
			break
		}
		if want > len(buf) {
			n, err := f.ReadAt(buf[len(buf):want], base+int64(len(buf)))
			buf = buf[:len(buf)+n]
			if err != nil && err != io.EOF {
				return keepBuf(buf), from, err
			}
		}
		progress, grew := false, false
		p := buf[from-base:]
		for len(p) >= RecordHeaderSize {
			n := binary.LittleEndian.Uint32(p)
			if n == 0 || n > MaxRecordSize {
				return keepBuf(buf), from, nil // damage, or zeros past a torn tail
			}
			if int64(RecordHeaderSize)+int64(n) > int64(len(p)) {
				if int64(RecordHeaderSize)+int64(n) > int64(cap(buf)) {
					buf = make([]byte, 0, RecordHeaderSize+int(n)) // a record bigger than the buffer
					base, grew = from, true
				}
				break
			}
			payload := p[RecordHeaderSize : RecordHeaderSize+n]
			if binary.LittleEndian.Uint32(p[4:]) != recordCRC(p[:4], payload) {
				return keepBuf(buf), from, nil
			}
			fn(from+RecordHeaderSize, payload)
			from += RecordHeaderSize + int64(n)
			p = p[RecordHeaderSize+n:]
			progress = true
		}
		if grew {
			continue
		}
		if !progress && int64(len(buf)) >= to-base {
			break // the last record straddles to
		}
		if !progress && len(buf) < want {
			break // short read: the file ends here
		}
	}
	return keepBuf(buf), from, nil
}

// rangeBuf is ReadRange's buffer: one read per MiB.
const rangeBuf = 1 << 20

// keepBuf is the buffer ReadRange hands back: a record's own bigger one is
// not kept for the next call.
func keepBuf(buf []byte) []byte {
	if cap(buf) > rangeBuf {
		return nil
	}
	return buf
}

// ReadRecord reads back one record of f: its frame starts at off and its
// payload is n bytes (where ReplayAt or a Writer put it), and its checksum
// is checked. The payload is a new slice, the caller's to keep. One
// pread of n+RecordHeaderSize bytes. For a reader that indexed a log's
// records and reads them at random (a Raft log's entries); a mismatch
// matches ErrChecksum, a length that differs ErrBadLength.
func ReadRecord(f io.ReaderAt, off int64, n int) ([]byte, error) {
	ps, err := ReadRecords(f, off, off+RecordHeaderSize+int64(n))
	if err != nil {
		return nil, err
	}
	return ps[0], nil
}

// ReadRecords reads back the records of f that lie exactly in [from, to),
// from a record's start, checking each checksum: their payloads, which
// share one new buffer, the caller's to keep. One pread of to-from bytes.
// A record that runs past to, or space left over, matches ErrBadLength.
func ReadRecords(f io.ReaderAt, from, to int64) ([][]byte, error) {
	b := make([]byte, to-from)
	if _, err := f.ReadAt(b, from); err != nil {
		return nil, err
	}
	var ps [][]byte
	for off := from; len(b) > 0; {
		if len(b) < RecordHeaderSize {
			return nil, fmt.Errorf("%w: at offset %d, %d bytes left of %d-%d", ErrBadLength, off, len(b), from, to)
		}
		n := int64(binary.LittleEndian.Uint32(b))
		if n == 0 || RecordHeaderSize+n > int64(len(b)) {
			return nil, fmt.Errorf("%w: at offset %d, a %d-byte record in %d-%d", ErrBadLength, off, n, from, to)
		}
		payload := b[RecordHeaderSize : RecordHeaderSize+n : RecordHeaderSize+n]
		if binary.LittleEndian.Uint32(b[4:]) != recordCRC(b[:4], payload) {
			return nil, fmt.Errorf("%w: at offset %d", ErrChecksum, off)
		}
		ps = append(ps, payload)
		b = b[RecordHeaderSize+n:]
		off += RecordHeaderSize + n
	}
	return ps, nil
}
