package raftlog

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/delayd/delayd/aof"
)

// DefaultSegmentSize is the size past which a segment is sealed and the
// next begins: the AOF's. A Raft log holds TrailingLogs entries plus those
// since the last snapshot, so most of the time one or two segments.
const DefaultSegmentSize = 64 << 20

// Options configure a Store.
type Options struct {
	// FS is where the files are (aof.OS if nil; tests pass an aof.MemFS).
	FS aof.FS
	// SegmentSize: a segment this large is sealed before the next batch
	// (DefaultSegmentSize if 0).
	SegmentSize int64
	// NoSync leaves appends unsynced until Sync (appendfsync everysec or
	// no). Structural changes (a new segment, a deletion) are always
	// fsynced: they are rare, and a log whose cut suffix came back under
	// entries appended after it would be a wrong log, not a shorter one.
	NoSync bool
}

// ErrGap is a batch that does not follow the last entry: the store is
// monotonic (raft.MonotonicLogStore), Raft never asks for one.
var ErrGap = errors.New("raftlog: entries must follow the last one")

// ErrHole is a deletion in the middle of the log: Raft deletes a prefix or
// a suffix, never between.
var ErrHole = errors.New("raftlog: a deletion must take the first or the last entry")

// segment is one file of the log and the offsets of its entries.
type segment struct {
	id    uint64
	first uint64  // index of offs[0]; unset while the segment is empty
	offs  []int64 // where each entry's record starts, in order
	size  int64   // the file's bytes: header and records
	r     aof.File
}

// end is where entry i's record ends.
func (s *segment) end(i int) int64 {
	if i+1 < len(s.offs) {
		return s.offs[i+1]
	}
	return s.size
}

// Store is a Raft log (raft.LogStore and raft.MonotonicLogStore).
type Store struct {
	fs   aof.FS
	path string
	opts Options

	// wmu orders the writers: StoreLogs, DeleteRange, Close.
	wmu     sync.Mutex
	scratch []byte // one entry's encoding; guarded by wmu
	err     error  // sticky: a change of the set of segments failed half way; guarded by wmu

	// smu guards w against Sync: a seal or a cut closes the writer that a
	// Sync on another goroutine may be using.
	smu sync.Mutex
	w   *aof.Writer // the last segment's

	// mu guards what readers see. Appends take it only to publish the
	// entries they wrote; deletions hold it throughout.
	mu          sync.RWMutex
	segs        []*segment
	first, last uint64 // 0, 0: empty
}

// Open opens the log whose manifest is path, or makes a new one, cutting
// a torn tail. A log damaged before its tail, or whose entries do not
// follow each other, is refused.
func Open(path string, opts Options) (*Store, error) {
	if opts.FS == nil {
		opts.FS = aof.OS
	}
	if opts.SegmentSize <= 0 {
		opts.SegmentSize = DefaultSegmentSize
	}
	s := &Store{fs: opts.FS, path: path, opts: opts}
	ids, err := aof.OpenSegments(s.fs, path)
	if err != nil {
		return nil, fmt.Errorf("raftlog: %w", err)
	}
	var size int64
	for k, id := range ids {
		seg, n, err := s.load(id, k == len(ids)-1)
		if err != nil {
			s.closeFiles()
			return nil, err
		}
		s.segs = append(s.segs, seg)
		size = n
	}
	last := s.segs[len(s.segs)-1]
	s.w, err = aof.OpenAppend(s.fs, aof.SegPath(path, last.id), size)
	if err != nil {
		s.closeFiles()
		return nil, fmt.Errorf("raftlog: %w", err)
	}
	last.size = s.w.Size()
	return s, nil
}

// load indexes segment id, checking that its entries follow the log's so
// far. Only the last segment may be empty (a new one, its first batch not
// written) or end in a split entry whose parts are not all there (a torn
// tail), which is cut. It returns the segment and its size.
func (s *Store) load(id uint64, isLast bool) (*segment, int64, error) {
	p := aof.SegPath(s.path, id)
	seg := &segment{id: id}
	want := 0 // bytes of a split entry still to come
	res, err := aof.ReplayAt(s.fs, p, func(off int64, rec []byte) error {
		if rec[0] == entryPart {
			if want < len(rec)-1 {
				return fmt.Errorf("%s at %d: %w: a part of no split entry", p, off, errEntry)
			}
			want -= len(rec) - 1
			return nil
		}
		if want != 0 {
			return fmt.Errorf("%s at %d: %w: a split entry cut short", p, off, errEntry)
		}
		e := rec
		if rec[0] == entryHead {
			total, first, err := splitHead(rec)
			if err != nil {
				return fmt.Errorf("%s at %d: %w", p, off, err)
			}
			e, want = first, total-len(first)
		}
		i, err := entryIndex(e)
		if err != nil {
			return fmt.Errorf("%s at %d: %w", p, off, err)
		}
		if s.last != 0 && i != s.last+1 {
			return fmt.Errorf("%s: entry %d follows entry %d", p, i, s.last)
		}
		if len(seg.offs) == 0 {
			seg.first = i
		}
		if s.first == 0 {
			s.first = i
		}
		seg.offs = append(seg.offs, off-aof.RecordHeaderSize)
		s.last = i
		return nil
	}, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("raftlog: %w", err)
	}
	size := res.Size
	if want != 0 {
		if !isLast {
			return nil, 0, fmt.Errorf("raftlog: %s: a sealed segment ends in a split entry cut short", p)
		}
		// Its batch was never answered: StoreLogs returns once all of
		// it is written.
		size = seg.offs[len(seg.offs)-1]
		seg.offs = seg.offs[:len(seg.offs)-1]
		if s.last--; len(seg.offs) == 0 && s.first == s.last+1 {
			s.first, s.last = 0, 0
		}
		if err := aof.Truncate(s.fs, p, size); err != nil {
			return nil, 0, err
		}
	}
	if len(seg.offs) == 0 && !isLast {
		return nil, 0, fmt.Errorf("raftlog: %s: a sealed segment with no entries", p)
	}
	seg.size = size
	if seg.r, err = s.fs.OpenFile(p, os.O_RDONLY, 0); err != nil {
		return nil, 0, fmt.Errorf("raftlog: %w", err)
	}
	return seg, size, nil
}

func (s *Store) closeFiles() {
	for _, seg := range s.segs {
		if seg.r != nil {
			seg.r.Close()
		}
	}
}

// FirstIndex is the first entry's index, 0 if the log is empty.
func (s *Store) FirstIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.first, nil
}

// LastIndex is the last entry's index, 0 if the log is empty.
func (s *Store) LastIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.last, nil
}

// BytesAfter is the size on disk of the entries after index: the log a
// snapshot taken at index would let go. O(segments).
func (s *Store) BytesAfter(index uint64) int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.first > 0 {
		index = max(index, s.first-1) // a deleted prefix's rest in a segment is not the log
	}
	var n int64
	for _, seg := range s.segs {
		if len(seg.offs) == 0 || seg.first+uint64(len(seg.offs))-1 <= index {
			continue
		}
		i := 0
		if index >= seg.first {
			i = int(index-seg.first) + 1
		}
		n += seg.size - seg.offs[i]
	}
	return n
}

// IsMonotonic tells Raft to drop the whole log when it installs a snapshot
// rather than leave a gap before the entries that follow it.
func (s *Store) IsMonotonic() bool { return true }

// GetLog reads entry index into l: one pread. l's Data and Extensions are
// its own.
func (s *Store) GetLog(index uint64, l *raft.Log) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.first == 0 || index < s.first || index > s.last {
		return raft.ErrLogNotFound
	}
	k := len(s.segs) - 1
	for len(s.segs[k].offs) == 0 || s.segs[k].first > index {
		k-- // the newest entries are the ones asked for most
	}
	seg := s.segs[k]
	i := int(index - seg.first)
	recs, err := aof.ReadRecords(seg.r, seg.offs[i], seg.end(i))
	if err == nil {
		var e []byte
		if e, err = joinEntry(recs); err == nil {
			err = decodeEntry(e, l)
		}
	}
	if err != nil {
		return fmt.Errorf("raftlog: entry %d in %s: %w", index, aof.SegPath(s.path, seg.id), err)
	}
	if l.Index != index {
		return fmt.Errorf("%w: entry %d holds %d", errEntry, index, l.Index)
	}
	return nil
}

// StoreLog appends one entry.
func (s *Store) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs appends entries, which must follow each other and the last
// entry (or, in an empty log, start anywhere). A batch that starts at or
// before the last entry replaces the entries from there, as a B-tree's
// put would: Raft deletes the conflicting suffix itself first, so this is
// for other callers. One write(2), and without NoSync one fsync.
func (s *Store) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.err != nil {
		return s.err
	}
	at := logs[0].Index
	for k, l := range logs {
		if l.Index != at+uint64(k) {
			return fmt.Errorf("%w: entry %d after %d in one batch", ErrGap, l.Index, at+uint64(k)-1)
		}
	}
	if s.last != 0 && at != s.last+1 {
		var err error
		switch {
		case at > s.last+1:
			return fmt.Errorf("%w: entry %d after %d", ErrGap, at, s.last)
		case at <= s.first:
			err = s.reset()
		default:
			err = s.cutSuffix(at)
		}
		if err != nil {
			return err
		}
	}
	seg := s.segs[len(s.segs)-1]
	if len(seg.offs) > 0 && s.w.Size() >= s.opts.SegmentSize {
		var err error
		if seg, err = s.seal(); err != nil {
			return err
		}
	}
	offs := make([]int64, len(logs))
	for k, l := range logs {
		offs[k] = s.w.Size() + int64(s.w.Buffered())
		s.scratch = appendEntry(s.scratch[:0], l)
		splitEntry(s.scratch, s.w.Append)
	}
	if cap(s.scratch) > 1<<20 {
		s.scratch = nil
	}
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("raftlog: %w", err)
	}
	if !s.opts.NoSync {
		if err := s.w.Sync(); err != nil {
			return fmt.Errorf("raftlog: %w", err)
		}
	}
	s.mu.Lock()
	if len(seg.offs) == 0 {
		seg.first = at
	}
	seg.offs = append(seg.offs, offs...)
	seg.size = s.w.Size()
	if s.first == 0 {
		s.first = at
	}
	s.last = logs[len(logs)-1].Index
	s.mu.Unlock()
	return nil
}

// seal fsyncs and closes the last segment and begins the next, which it
// returns. The sealed segment is on disk before the manifest names the
// next: only the last segment can ever be torn.
func (s *Store) seal() (*segment, error) {
	old := s.segs[len(s.segs)-1]
	seg, w, err := s.create(old.id + 1)
	if err != nil {
		return nil, err
	}
	s.smu.Lock()
	err = s.w.Close()
	s.w = w
	s.smu.Unlock()
	if err == nil {
		err = aof.WriteManifest(s.fs, s.path, append(s.ids(), seg.id))
	}
	if err != nil {
		// The writer is the new segment's, which the manifest may not
		// name: nothing more may be appended.
		s.err = fmt.Errorf("raftlog: sealing %s failed: %w", aof.SegPath(s.path, old.id), err)
		seg.r.Close()
		return nil, s.err
	}
	s.mu.Lock()
	s.segs = append(s.segs, seg)
	s.mu.Unlock()
	return seg, nil
}

// create makes segment id, empty, its header and name on disk (a leftover
// of that id, from a crash after a deletion, is removed first).
func (s *Store) create(id uint64) (*segment, *aof.Writer, error) {
	p := aof.SegPath(s.path, id)
	_ = s.fs.Remove(p)
	w, err := aof.OpenAppend(s.fs, p, 0) // header, fsync, directory fsync
	if err != nil {
		return nil, nil, fmt.Errorf("raftlog: %w", err)
	}
	r, err := s.fs.OpenFile(p, os.O_RDONLY, 0)
	if err != nil {
		w.Close()
		return nil, nil, fmt.Errorf("raftlog: %w", err)
	}
	return &segment{id: id, size: w.Size(), r: r}, w, nil
}

// ids are the segments' ids, in order.
func (s *Store) ids() []uint64 {
	ids := make([]uint64, len(s.segs))
	for k, seg := range s.segs {
		ids[k] = seg.id
	}
	return ids
}

// DeleteRange deletes entries lo to hi, inclusive: a prefix, a suffix or
// all of them.
func (s *Store) DeleteRange(lo, hi uint64) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.err != nil {
		return s.err
	}
	switch {
	case s.first == 0 || hi < s.first || lo > s.last || lo > hi:
		return nil
	case lo <= s.first && hi >= s.last:
		return s.reset()
	case lo <= s.first:
		return s.cutPrefix(hi)
	case hi >= s.last:
		return s.cutSuffix(lo)
	}
	return fmt.Errorf("%w: %d-%d of %d-%d", ErrHole, lo, hi, s.first, s.last)
}

// reset empties the log: a new empty segment becomes the manifest's only
// one, then the old files go (oldest first: a crash leaves the newest of
// them, which the next open removes as leftovers, aof.OpenSegments).
func (s *Store) reset() error {
	last := s.segs[len(s.segs)-1]
	seg, w, err := s.create(last.id + 1)
	if err != nil {
		return err
	}
	s.smu.Lock()
	s.w.Close() // its error does not matter: the entries are going
	s.w = w
	s.smu.Unlock()
	if err := aof.WriteManifest(s.fs, s.path, []uint64{seg.id}); err != nil {
		s.err = fmt.Errorf("raftlog: emptying the log failed: %w", err)
		return s.err
	}
	s.mu.Lock()
	old := s.segs
	s.segs, s.first, s.last = []*segment{seg}, 0, 0
	s.mu.Unlock()
	s.drop(old)
	return nil
}

// cutPrefix deletes the entries up to hi, which is before the last:
// whole segments go, the rest of the prefix is only forgotten.
func (s *Store) cutPrefix(hi uint64) error {
	k := 0
	for k+1 < len(s.segs) && len(s.segs[k+1].offs) > 0 && s.segs[k+1].first <= hi+1 {
		k++ // segs[k] ends at or before hi
	}
	if k > 0 {
		if err := aof.WriteManifest(s.fs, s.path, s.ids()[k:]); err != nil {
			return fmt.Errorf("raftlog: %w", err) // the old manifest stands: nothing changed
		}
	}
	s.mu.Lock()
	old := s.segs[:k:k]
	s.segs = s.segs[k:]
	s.first = hi + 1
	s.mu.Unlock()
	s.drop(old)
	return nil
}

// cutSuffix deletes the entries from `from` on, which is after the first:
// the segments that start at or after it leave the manifest, then the
// segment that holds it is cut there and fsynced, and the writer continues it.
// Readers wait throughout.
func (s *Store) cutSuffix(from uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := len(s.segs) - 1
	for len(s.segs[k].offs) == 0 || s.segs[k].first > from-1 {
		k-- // segs[k] holds from-1, which stays
	}
	seg := s.segs[k]
	s.smu.Lock()
	err := s.w.Close()
	s.w = nil
	s.smu.Unlock()
	if err != nil {
		s.err = fmt.Errorf("raftlog: %w", err)
		return s.err
	}
	fail := func(err error) error {
		s.err = fmt.Errorf("raftlog: deleting entries from %d failed: %w", from, err)
		return s.err
	}
	if k < len(s.segs)-1 {
		if err := aof.WriteManifest(s.fs, s.path, s.ids()[:k+1]); err != nil {
			return fail(err)
		}
	}
	i := int(from - seg.first)
	size := seg.size
	if i < len(seg.offs) {
		size = seg.offs[i]
	}
	p := aof.SegPath(s.path, seg.id)
	if err := aof.Truncate(s.fs, p, size); err != nil {
		return fail(err)
	}
	w, err := aof.OpenAppend(s.fs, p, size)
	if err != nil {
		return fail(err)
	}
	s.smu.Lock()
	s.w = w
	s.smu.Unlock()
	gone := slices.Clone(s.segs[k+1:])
	slices.Reverse(gone) // newest first: a crash leaves the oldest, which open removes
	s.segs = s.segs[:k+1]
	seg.offs = seg.offs[:min(i, len(seg.offs))]
	seg.size = size
	s.last = from - 1
	s.drop(gone)
	return nil
}

// drop closes and removes segments no manifest names any more, in order.
// Their removal need not be durable: a crash brings them back, and open
// removes them again.
func (s *Store) drop(segs []*segment) {
	for _, seg := range segs {
		seg.r.Close()
		_ = s.fs.Remove(aof.SegPath(s.path, seg.id))
	}
}

// Sync fsyncs what was appended (appendfsync everysec's second). It may
// run on another goroutine than Raft's appends, and beside them.
func (s *Store) Sync() error {
	s.smu.Lock()
	defer s.smu.Unlock()
	if s.w == nil {
		return nil
	}
	if err := s.w.Sync(); err != nil {
		return fmt.Errorf("raftlog: %w", err)
	}
	return nil
}

// Close fsyncs and closes the files.
func (s *Store) Close() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.smu.Lock()
	var err error
	if s.w != nil {
		err = s.w.Close()
		s.w = nil
	}
	s.smu.Unlock()
	s.mu.Lock()
	s.closeFiles()
	s.segs = nil
	s.mu.Unlock()
	if s.err == nil {
		s.err = errors.New("raftlog: closed")
	}
	return err
}
