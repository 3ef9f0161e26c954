package backup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/record"
)

// Version is the format version this package writes and the newest it
// reads.
const Version = 1

// HeaderSize is the header's length in bytes.
const HeaderSize = 96

// TrailerSize is the trailer's length: the file's checksum.
const TrailerSize = 4

const magic = "DLYDBKUP"

// maxServer is the longest server version string the header holds.
const maxServer = 39

// Mode is what kind of server the backup was taken from.
type Mode uint8

const (
	Single  Mode = 1 // a single node: exact at the moment of the capture
	Cluster Mode = 2 // a cluster's leader: exact at a Raft index
)

func (m Mode) String() string {
	switch m {
	case Single:
		return "single"
	case Cluster:
		return "cluster"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Errors, by what is wrong with a file. Each is wrapped with the detail.
var (
	// ErrNotBackup: the file does not start with the magic.
	ErrNotBackup = errors.New("not a delayd backup file")
	// ErrVersion: a format this delayd does not read (a newer one).
	ErrVersion = errors.New("unsupported backup format version")
	// ErrTruncated: the file ends before its header says it does.
	ErrTruncated = errors.New("backup file truncated")
	// ErrChecksum: the header's or the file's checksum does not match.
	ErrChecksum = errors.New("backup checksum mismatch")
	// ErrDamaged: the bytes are not records as the header describes them
	// (a length past the body, data after the end, a record that does not
	// decode, counts that disagree).
	ErrDamaged = errors.New("backup file damaged")
)

// Header says what a backup is and where it is exact.
type Header struct {
	Version uint16
	Mode    Mode
	Created int64  // unix ms, the server's wall clock at the capture
	Index   uint64 // cluster: the Raft index the state is exact at
	Body    uint64 // the body's length, end mark included
	Records uint64
	Jobs    uint64
	Server  string // the server's version (INFO's delayd_version)
}

// Append appends the header's HeaderSize bytes to dst. A server version
// longer than the header holds is cut.
func (h *Header) Append(dst []byte) []byte {
	var b [HeaderSize]byte
	copy(b[0:8], magic)
	binary.LittleEndian.PutUint16(b[8:], h.Version)
	b[10] = byte(h.Mode)
	binary.LittleEndian.PutUint64(b[12:], uint64(h.Created))
	binary.LittleEndian.PutUint64(b[20:], h.Index)
	binary.LittleEndian.PutUint64(b[28:], h.Body)
	binary.LittleEndian.PutUint64(b[36:], h.Records)
	binary.LittleEndian.PutUint64(b[44:], h.Jobs)
	s := h.Server
	if len(s) > maxServer {
		s = s[:maxServer]
	}
	b[52] = byte(len(s))
	copy(b[53:53+maxServer], s)
	binary.LittleEndian.PutUint32(b[92:], crc32.Checksum(b[:92], castagnoli))
	return append(dst, b[:]...)
}

// ParseHeader reads a header from its HeaderSize bytes: the magic, then the
// version (refused if newer than Version), then its checksum.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < len(magic) || string(b[:len(magic)]) != magic {
		return Header{}, ErrNotBackup
	}
	if len(b) < 10 {
		return Header{}, fmt.Errorf("%w: %d bytes, the header alone is %d", ErrTruncated, len(b), HeaderSize)
	}
	h := Header{Version: binary.LittleEndian.Uint16(b[8:])}
	if h.Version == 0 || h.Version > Version {
		return h, fmt.Errorf("%w %d: this delayd reads version %d and older (restore it with a newer delayd)",
			ErrVersion, h.Version, Version)
	}
	if len(b) < HeaderSize {
		return h, fmt.Errorf("%w: %d bytes, the header alone is %d", ErrTruncated, len(b), HeaderSize)
	}
	if got, want := crc32.Checksum(b[:92], castagnoli), binary.LittleEndian.Uint32(b[92:]); got != want {
		return h, fmt.Errorf("%w: the header's is %08x, its bytes give %08x", ErrChecksum, want, got)
	}
	h.Mode = Mode(b[10])
	h.Created = int64(binary.LittleEndian.Uint64(b[12:]))
	h.Index = binary.LittleEndian.Uint64(b[20:])
	h.Body = binary.LittleEndian.Uint64(b[28:])
	h.Records = binary.LittleEndian.Uint64(b[36:])
	h.Jobs = binary.LittleEndian.Uint64(b[44:])
	n := int(b[52])
	if n > maxServer || (h.Mode != Single && h.Mode != Cluster) || b[11] != 0 {
		return h, fmt.Errorf("%w: header fields out of range", ErrDamaged)
	}
	h.Server = string(b[53 : 53+n])
	return h, nil
}

// Seal makes a backup file of file, whose first HeaderSize bytes are room
// for the header and whose rest is the body (a snapshot ending with its end
// mark, as engine.Snapshot writes): it counts the records and jobs, fills
// in the header from h (Version, Body, Records and Jobs are set here) and
// appends the trailer. The body is not copied. O(records): each record's
// kind and flags are read to count it.
func Seal(file []byte, h Header) ([]byte, Header, error) {
	if len(file) < HeaderSize+1 {
		return nil, h, errors.New("backup: no room for the header, or no end mark")
	}
	body := file[HeaderSize:]
	var c Counts
	if err := eachRecord(body, c.add); err != nil {
		return nil, h, err
	}
	h.Version, h.Body, h.Records, h.Jobs = Version, uint64(len(body)), c.Records, c.Jobs()
	h.Append(file[:0])
	return binary.LittleEndian.AppendUint32(file, crc32.Checksum(file, castagnoli)), h, nil
}

// eachRecord calls fn for every record of a body held in memory, and checks
// that it ends with the end mark and nothing after it.
func eachRecord(body []byte, fn func(rec []byte) error) error {
	for len(body) > 0 {
		n, k := binary.Uvarint(body)
		if k <= 0 || n > uint64(len(body)-k) {
			return fmt.Errorf("%w: a record's length runs past the body", ErrDamaged)
		}
		if n == 0 {
			if len(body) != 1 {
				return fmt.Errorf("%w: %d bytes after the end mark", ErrDamaged, len(body)-1)
			}
			return nil
		}
		if err := fn(body[k : k+int(n)]); err != nil {
			return err
		}
		body = body[k+int(n):]
	}
	return fmt.Errorf("%w: no end mark", ErrDamaged)
}

// Counts is what a backup holds, by kind: what check-backup prints.
type Counts struct {
	Records                  uint64
	Ready, Delayed, Reserved uint64 // jobs, by state
	Schedules, Limits        uint64
	Pauses, Tombstones       uint64
	Queues                   map[string]uint64 // jobs by queue (Check only)
}

// Jobs is the number of jobs.
func (c *Counts) Jobs() uint64 { return c.Ready + c.Delayed + c.Reserved }

// add counts one record; an error if it does not decode.
func (c *Counts) add(b []byte) error {
	var r record.Rec
	if err := r.Decode(b); err != nil {
		return fmt.Errorf("%w: record %d (op %d) does not decode: %w", ErrDamaged, c.Records+1, firstByte(b), err)
	}
	c.Records++
	switch r.Op {
	case record.Add:
		switch {
		case r.Flags&record.FlagReserved != 0:
			c.Reserved++
		case r.Flags&record.FlagReady != 0:
			c.Ready++
		default:
			c.Delayed++
		}
		if c.Queues != nil {
			c.Queues[string(r.Queue)]++
		}
	case record.Schedule:
		c.Schedules++
	case record.Limit:
		c.Limits++
	case record.Pause:
		if r.Flags == 1 {
			c.Pauses++
		}
	case record.Tomb:
		c.Tombstones++
	}
	return nil
}

func firstByte(b []byte) byte {
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

// Reader reads a backup's records in one pass, checking as it goes: the
// header when it is made, the checksum and the end when Next returns the
// end. A record is not known good until then: a restore applies records
// to something it can throw away if the end is an error.
type Reader struct {
	h    Header
	r    io.Reader
	lim  *io.LimitedReader
	crc  uint32
	snap *record.SnapReader
	err  error
}

// NewReader reads r's header and returns a Reader of its records.
func NewReader(r io.Reader) (*Reader, error) {
	var hb [HeaderSize]byte
	n, err := io.ReadFull(r, hb[:])
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, err
	}
	h, err := ParseHeader(hb[:n])
	if err != nil {
		return nil, err
	}
	br := &Reader{h: h, r: r, crc: crc32.Checksum(hb[:], castagnoli)}
	br.lim = &io.LimitedReader{R: r, N: int64(h.Body)}
	br.snap = record.NewSnapReader(crcReader{br.lim, &br.crc})
	return br, nil
}

// Next returns the next record, valid until the next call, or nil at the
// end, once the body's end, the trailer's checksum and the end of the file
// have checked out.
func (r *Reader) Next() ([]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	b, err := r.snap.Next()
	switch {
	case err == io.ErrUnexpectedEOF && r.lim.N > 0:
		err = fmt.Errorf("%w: %d of %d bytes", ErrTruncated, HeaderSize+int64(r.h.Body)-r.lim.N, r.size())
	case err != nil:
		// The body was all there: a length or an end mark is wrong.
		err = fmt.Errorf("%w: %w", ErrDamaged, err)
	case b == nil:
		err = r.end()
		if err == nil {
			err = io.EOF
		}
	}
	if err != nil {
		r.err = err
		if err == io.EOF {
			return nil, nil
		}
		return nil, err
	}
	return b, nil
}

func (r *Reader) size() int64 { return HeaderSize + int64(r.h.Body) + TrailerSize }

// end checks the trailer and that nothing follows it.
func (r *Reader) end() error {
	if r.lim.N > 0 {
		return fmt.Errorf("%w: %d of %d bytes", ErrTruncated, HeaderSize+int64(r.h.Body)-r.lim.N, r.size())
	}
	var t [TrailerSize + 1]byte
	n, err := io.ReadFull(r.r, t[:])
	switch {
	case n < TrailerSize:
		return fmt.Errorf("%w: %d of %d bytes", ErrTruncated, r.size()-int64(TrailerSize-n), r.size())
	case n > TrailerSize:
		return fmt.Errorf("%w: data after the checksum", ErrDamaged)
	case err != io.ErrUnexpectedEOF:
		return err
	}
	if want := binary.LittleEndian.Uint32(t[:]); want != r.crc {
		return fmt.Errorf("%w: the file's is %08x, its bytes give %08x", ErrChecksum, want, r.crc)
	}
	return nil
}

type crcReader struct {
	r   io.Reader
	crc *uint32
}

func (c crcReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	*c.crc = crc32.Update(*c.crc, castagnoli, p[:n])
	return n, err
}

// Check reads a whole backup and decodes every record: the header, the
// checksum, the end, and that the header's counts are the body's. It
// returns what the file holds. O(records); memory O(queues).
func Check(r io.Reader) (Header, Counts, error) {
	br, err := NewReader(r)
	if err != nil {
		return Header{}, Counts{}, err
	}
	c := Counts{Queues: make(map[string]uint64)}
	for {
		b, err := br.Next()
		if err != nil {
			return br.h, c, err
		}
		if b == nil {
			break
		}
		if err := c.add(b); err != nil {
			return br.h, c, err
		}
	}
	if c.Records != br.h.Records || c.Jobs() != br.h.Jobs {
		return br.h, c, fmt.Errorf("%w: the header says %d records and %d jobs, the body holds %d and %d",
			ErrDamaged, br.h.Records, br.h.Jobs, c.Records, c.Jobs())
	}
	return br.h, c, nil
}

// WriteFile writes a backup file atomically: to path.tmp, fsynced, renamed
// over path, and the directory fsynced, so path is always a whole backup
// (the last one, or this one).
func WriteFile(path string, file []byte) error {
	tmp := path + ".tmp"
	err := os.WriteFile(tmp, file, 0o600)
	if err == nil {
		err = aof.Install(aof.OS, tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
