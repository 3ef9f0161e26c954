package aof

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// BrokenSuffix names the file Repair keeps the cut bytes in.
const BrokenSuffix = ".broken"

const (
	// readChunk is the size of Replay's reads: large enough that syscalls do
	// not show in the profile, small enough to stay in L2/L3.
	readChunk = 1 << 20

	// searchBudget bounds the bytes checksummed while looking for a good
	// record after damage (see recordAfter). Past it, the damage is called
	// corruption: refusing to start is safe, cutting good records is not.
	searchBudget = 1 << 30
)

// Result describes a replayed log.
type Result struct {
	Records   int   // good records passed to fn
	Size      int64 // good bytes: the header and those records; the file's size after a torn tail is cut
	TornBytes int64 // bytes of torn tail cut off the end of the file, 0 if none
}

// Replay reads the log at path from the start and calls fn for each good
// record in order. The payload is valid only during the call. O(file size),
// one sequential pass in 1 MiB reads.
//
// A missing or empty file is an empty log: Result{} and nil. A torn tail (see
// the package doc) is cut off: Replay truncates the file to Result.Size,
// fsyncs it, and returns nil with Result.TornBytes > 0, for the caller to log.
// Damage before the tail returns a *CorruptError (matching ErrCorrupt) naming
// the file and offset, after fn has seen the records before it; nothing is
// truncated; the Result then describes the good prefix. If fn returns an
// error, Replay stops and returns it as is. fn may be nil to only check the
// log.
//
// Pass Result.Size to OpenAppend to go on writing.
func Replay(fs FS, path string, fn func(payload []byte) error) (Result, error) {
	return ReplayProgress(fs, path, fn, nil)
}

// Progress is told how far a replay got: offset is where the next record
// starts (every record before it was passed to fn), size the file's size. A
// non-nil error stops the replay, which returns it as is.
type Progress func(offset, size int64) error

// ReplayProgress is Replay that also calls progress (if not nil) before the
// first record and then about once per 1 MiB of records, so a caller can show
// how far a long replay got, or give it up, without a clock or a goroutine
// here. It is not called for an empty or missing log, nor after the last
// record: Result says where the replay ended.
func ReplayProgress(fs FS, path string, fn func(payload []byte) error, progress Progress) (Result, error) {
	var at func(int64, []byte) error
	if fn != nil {
		at = func(_ int64, payload []byte) error { return fn(payload) }
	}
	return ReplayAt(fs, path, at, progress)
}

// ReplayAt is ReplayProgress that also tells fn where each record's
// payload lies in the file: a reader may keep that instead of the bytes
// and read them back later (ReadRange's offsets).
func ReplayAt(fs FS, path string, fn func(off int64, payload []byte) error, progress Progress) (Result, error) {
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, iofs.ErrNotExist) {
		return Result{}, nil
	}
	if err != nil {
		return Result{}, fmt.Errorf("aof: open %s: %w", path, err)
	}
	defer f.Close()
	s, err := newScanner(f, path)
	if err != nil {
		return Result{}, err
	}
	s.progress = progress
	a, err := s.analyze(fn)
	res := Result{Records: a.records, Size: a.good}
	switch {
	case err != nil:
		return res, err
	case !a.damaged:
		return res, nil
	case !a.torn:
		return res, &CorruptError{Path: path, Offset: a.good, Reason: a.reason}
	}
	if err := Truncate(fs, path, a.good); err != nil {
		return res, err
	}
	res.TornBytes = s.size - a.good
	return res, nil
}

// Repair cuts the log at path at its first damage, torn tail or corruption:
// the bytes from there to the end are kept in path+".broken" (or ".broken.1",
// ".broken.2", ... if that exists), which is fsynced with its directory before
// the log is truncated and fsynced. It returns the offset of the cut, which is
// the file's new size. On a healthy log it does nothing and returns its size;
// on a missing one, 0. O(file size).
//
// A log whose header is damaged is cut at 0: all of it goes to .broken, and
// OpenAppend(fs, path, 0) starts a new log.
func Repair(fs FS, path string) (cutAt int64, err error) {
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, iofs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("aof: open %s: %w", path, err)
	}
	defer f.Close()
	s, err := newScanner(f, path)
	if err != nil {
		return 0, err
	}
	a, err := s.analyze(nil)
	if err != nil {
		return 0, err
	}
	if !a.damaged {
		return s.size, nil
	}
	if err := keepBroken(fs, path, io.NewSectionReader(f, a.good, s.size-a.good)); err != nil {
		return 0, err
	}
	if err := Truncate(fs, path, a.good); err != nil {
		return 0, err
	}
	return a.good, nil
}

// keepBroken copies r into a new path.broken[.N] and makes it durable.
func keepBroken(fs FS, path string, r io.Reader) error {
	var bf File
	var name string
	for i := 0; ; i++ {
		name = path + BrokenSuffix
		if i > 0 {
			name += "." + strconv.Itoa(i)
		}
		var err error
		bf, err = fs.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			break
		}
		if !errors.Is(err, iofs.ErrExist) || i >= 1000 {
			return fmt.Errorf("aof: repair: create %s: %w", name, err)
		}
	}
	_, err := io.Copy(bf, r)
	if err == nil {
		err = bf.Sync()
	}
	if cerr := bf.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fs.SyncDir(filepath.Dir(name))
	}
	if err != nil {
		return fmt.Errorf("aof: repair: keep cut bytes in %s: %w", name, err)
	}
	return nil
}

// Truncate cuts path to size and fsyncs it (a torn tail, a Raft log's
// conflicting suffix).
func Truncate(fs FS, path string, size int64) error {
	f, err := fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("aof: open %s to cut it: %w", path, err)
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("aof: cut %s at %d: %w", path, size, err)
	}
	return nil
}

// damage is what stopped the walk through the records.
type damage uint8

const (
	intact   damage = iota
	short           // fewer than RecordHeaderSize bytes left
	zeroLen         // a length of 0: zero-filled space
	badLen          // a length past the end of the file or over MaxRecordSize
	checksum        // the CRC does not match
)

// analysis is what a scan found.
type analysis struct {
	records int
	good    int64 // offset of the first damage, or the file size
	damaged bool
	torn    bool  // the damage is a torn tail (only if damaged)
	reason  error // for corruption
}

// scanner reads a log through a window of the file.
type scanner struct {
	f    File
	path string
	size int64
	buf  []byte
	at   int64 // file offset of buf[0]
	n    int   // valid bytes in buf

	progress Progress // for walk; nil: none
}

func newScanner(f File, path string) (*scanner, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("aof: stat %s: %w", path, err)
	}
	return &scanner{f: f, path: path, size: fi.Size()}, nil
}

// read returns the n bytes at off, which must lie within the file; the slice
// is valid until the next call. Sequential reads cost one ReadAt per
// readChunk.
func (s *scanner) read(off int64, n int) ([]byte, error) {
	if off >= s.at && off+int64(n) <= s.at+int64(s.n) {
		i := off - s.at
		return s.buf[i : i+int64(n) : i+int64(n)], nil
	}
	want := int(min(int64(max(n, readChunk)), s.size-off))
	if want > len(s.buf) {
		s.buf = make([]byte, want)
	}
	m, err := s.f.ReadAt(s.buf[:want], off)
	if m < want {
		s.n = 0
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF // the file shrank under us
		}
		return nil, fmt.Errorf("aof: read %s at %d: %w", s.path, off, err)
	}
	s.at, s.n = off, want
	return s.buf[:n:n], nil
}

// analyze checks the header, walks the records calling fn (if not nil) for
// each good one, and classifies the first damage.
func (s *scanner) analyze(fn func(int64, []byte) error) (analysis, error) {
	var a analysis
	if s.size == 0 {
		return a, nil
	}
	a.damaged = true
	hdr, err := s.read(0, int(min(s.size, HeaderSize)))
	if err != nil {
		return a, err
	}
	if s.size < HeaderSize || !bytes.Equal(hdr[:4], magic[:]) {
		// Torn at creation: part of our header, or space that never got its data.
		if s.size < HeaderSize && bytes.HasPrefix(fileHeader(), hdr) {
			a.torn = true
			return a, nil
		}
		a.torn, err = s.allZero(0)
		a.reason = ErrBadMagic
		return a, err
	}
	if v := binary.LittleEndian.Uint32(hdr[4:]); v != Version {
		a.reason = ErrBadVersion
		return a, nil
	}

	d, end, err := s.walk(&a, fn)
	if err != nil || d == intact {
		a.damaged = false
		return a, err
	}
	switch d {
	case short:
		a.torn = true // nothing can begin in under 8 bytes
	case zeroLen:
		a.reason = ErrZeroFill
		a.torn, err = s.allZero(a.good)
	case badLen:
		a.reason = ErrBadLength
		var found bool
		found, err = s.recordAfter(a.good)
		a.torn = !found
	case checksum:
		a.reason = ErrChecksum
		var zero, found bool
		if zero, err = s.allZero(end); zero && err == nil {
			found, err = s.recordAfter(a.good)
			a.torn = !found
		}
	}
	return a, err
}

// walk reads records from the header on, counting them in a.records and
// advancing a.good past each. It stops at the end of the file (intact) or at
// the first damage, returning for a checksum mismatch the end the record
// claims. An error from fn or s.progress is returned as is.
func (s *scanner) walk(a *analysis, fn func(int64, []byte) error) (d damage, end int64, err error) {
	off := int64(HeaderSize)
	defer func() { a.good = off }()
	report := off // next offset to report progress at
	for {
		rem := s.size - off
		if rem == 0 {
			return intact, 0, nil
		}
		if s.progress != nil && off >= report {
			if err := s.progress(off, s.size); err != nil {
				return intact, 0, err
			}
			report = off + readChunk
		}
		if rem < RecordHeaderSize {
			return short, 0, nil
		}
		h, err := s.read(off, RecordHeaderSize)
		if err != nil {
			return intact, 0, err
		}
		n := binary.LittleEndian.Uint32(h)
		if n == 0 {
			return zeroLen, 0, nil
		}
		if n > MaxRecordSize || int64(n) > rem-RecordHeaderSize {
			return badLen, 0, nil
		}
		rec, err := s.read(off, RecordHeaderSize+int(n))
		if err != nil {
			return intact, 0, err
		}
		if binary.LittleEndian.Uint32(rec[4:]) != recordCRC(rec[:4], rec[RecordHeaderSize:]) {
			return checksum, off + RecordHeaderSize + int64(n), nil
		}
		if fn != nil {
			if err := fn(off+RecordHeaderSize, rec[RecordHeaderSize:]); err != nil {
				return intact, 0, err
			}
		}
		a.records++
		off += RecordHeaderSize + int64(n)
	}
}

// allZero reports whether every byte from off to the end of the file is zero.
func (s *scanner) allZero(off int64) (bool, error) {
	for off < s.size {
		n := int(min(s.size-off, readChunk))
		b, err := s.read(off, n)
		if err != nil {
			return false, err
		}
		for _, c := range b {
			if c != 0 {
				return false, nil
			}
		}
		off += int64(n)
	}
	return true, nil
}

// recordAfter reports whether a record that checks out begins at any offset
// after off. This is what tells a torn tail from a damaged length in the
// middle of the log: a length that "runs past the end of the file" is torn
// only if nothing good follows it. O(bytes after off) plus the checksums of
// the candidates whose length fits, bounded by searchBudget.
func (s *scanner) recordAfter(off int64) (bool, error) {
	budget := int64(searchBudget)
	for p := off + 1; p+RecordHeaderSize <= s.size; p++ {
		h, err := s.read(p, RecordHeaderSize)
		if err != nil {
			return false, err
		}
		n := binary.LittleEndian.Uint32(h)
		if n == 0 || n > MaxRecordSize || int64(n) > s.size-p-RecordHeaderSize {
			continue
		}
		if budget -= int64(n); budget < 0 {
			return true, nil // assume the worst: corruption, cut nothing
		}
		rec, err := s.read(p, RecordHeaderSize+int(n))
		if err != nil {
			return false, err
		}
		if binary.LittleEndian.Uint32(rec[4:]) == recordCRC(rec[:4], rec[RecordHeaderSize:]) {
			return true, nil
		}
	}
	return false, nil
}
