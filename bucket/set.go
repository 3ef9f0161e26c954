package bucket

import (
	"errors"
	"fmt"
	"slices"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/offheap"
)

// Loc is where the payload of a job in an open (or frozen) bucket lies
// until the seal copies it into the run: a log segment (the locator the
// job had on disk) or a run it moved from.
type Loc struct {
	File uint64 // the segment's id, or with Run the run's
	Off  int64
	N    uint32
	Run  bool
}

// LogReader reads a payload from the log's segment seg (its id modulo
// 65,536, as a job's home names it): the journal's ReadPayload.
type LogReader interface {
	ReadPayload(seg uint16, off int64, n int) ([]byte, error)
}

// SpanReader is a LogReader that also reads a span of a segment into dst,
// as much as it holds up to len(dst) (the journal's ReadSpan): a seal reads
// its bucket's payloads, which lie in the log in about add order, through
// a window of it, not a read and a fresh slice each.
type SpanReader interface {
	ReadSpan(seg uint16, off int64, dst []byte) (int, error)
}

// windowSize is the span of the log a seal reads at once.
const windowSize = 1 << 20

// logWindow is a span of one segment of the log, read through a
// SpanReader. A seal reads its bucket's payloads in due order: in the
// log's order when jobs came with one delay (a window serves hundreds),
// scattered when delays differ (a window would serve one, and a 1 MiB
// copy for each payload cost a seal of a million seconds). So a payload
// starts a window only where reads go forward through the log: the last
// few each just past the one before (near), or the window before served a
// few; any other is read alone.
type logWindow struct {
	r      SpanReader
	seg    uint16
	off    int64
	b, buf []byte
	hits   int // reads the window served
	// The last read's end, and how many reads in a row began near the
	// end of the one before.
	lastSeg uint16
	lastEnd int64
	near    int
}

// read returns the n bytes at off of segment seg: valid until the next
// read.
func (w *logWindow) read(log LogReader, seg uint16, off int64, n int) ([]byte, error) {
	if seg == w.lastSeg && off >= w.lastEnd && off-w.lastEnd < windowSize/16 {
		w.near++
	} else {
		w.near = 0
	}
	w.lastSeg, w.lastEnd = seg, off+int64(n)
	if w.r == nil || n > windowSize/8 {
		return log.ReadPayload(seg, off, n)
	}
	if w.b != nil && seg == w.seg && off >= w.off && off+int64(n) <= w.off+int64(len(w.b)) {
		w.hits++
		return w.b[off-w.off : off-w.off+int64(n)], nil
	}
	if w.hits < 4 && w.near < 4 {
		w.b = nil
		return log.ReadPayload(seg, off, n)
	}
	if w.buf == nil {
		w.buf = make([]byte, windowSize)
	}
	k, err := w.r.ReadSpan(seg, off, w.buf)
	if err != nil || k < n {
		w.b = nil
		return log.ReadPayload(seg, off, n)
	}
	w.seg, w.off, w.b, w.hits = seg, off, w.buf[:k], 1
	return w.b[:n], nil
}

// Options configure a Set.
type Options struct {
	FS   aof.FS
	Path string // the log's: runs are Path.bucket.<id>, the checkpoint Path.buckets
	Log  LogReader
	// MaxOpen is the jobs an open bucket takes before it is frozen (at
	// most, and by default, 1<<20); HeadSpace the bytes of their heads
	// (default 64 MiB).
	MaxOpen   int
	HeadSpace int
	// Grain is the span in ms of a slot of a bucket in memory's calendar
	// of dues (default 1,000): about an eighth of how far ahead the owner
	// loads, so that a round rereads little of a slot it does not empty.
	Grain int64
}

// Job is a job in a bucket, as Get and ReadDue return it.
type Job struct {
	Due           int64
	Seq, SID      uint64
	Queue         string
	Head, Payload []byte
	// Where it was: Take checks it is still there.
	slot  int
	id    uint64
	index uint32
}

// Errors.
var (
	ErrExists  = errors.New("bucket: the id is in a bucket already")
	ErrNoSlots = errors.New("bucket: every bucket slot is taken")
	ErrZeroID  = errors.New("bucket: a server id of 0")
)

// openEntry is an open or frozen bucket's job: 64 bytes, mapped.
type openEntry struct {
	Due              int64
	Seq, SID         uint64
	HeadOff, HeadLen uint32
	Queue            uint32 // a number in the bucket's names
	Loc              Loc
}

// bucket is an open or frozen bucket (ents set) or a run (run set).
type bucket struct {
	id uint64
	// In memory, entries and heads live in mapped pages taken as they
	// fill: what is mapped is what is used (offheap.Mapped, which
	// --maxmemory reads, counts every mapped byte), and a bucket grows
	// without copying under the owner's lock.
	ents   [][]openEntry // pages of entPage entries; nil for a run
	heads  [][]byte      // pages of headPage bytes; a head never straddles two
	n, hn  int           // entries, head bytes (hn: an offset in the pages)
	frozen bool
	cal    calendar // in memory: its entries by due, for loads

	run    *Run
	cursor int // runs: sorted positions before it are dead

	dead []uint64 // a bit per index: removed, moved or taken
	live int
	// back says a job of it went back to memory (Take, Fault): dropping
	// it may lose a scan's track of that job (Dropped).
	back bool
	refs int            // entries of buckets in memory whose payload lies in this run
	uses map[uint64]int // in memory: runs its entries' payloads lie in, and how many
	// minSeg is, in memory, the oldest log segment an entry's payload lies
	// in (0: none): compaction must not drop it before the bucket is a run.
	minSeg uint64

	names  []string          // its jobs' queues (a run's are run.Names)
	nameNo map[string]uint32 // in memory: names' numbers
}

// queueNo returns q's number in b's names, or false if no job of b has it.
func (b *bucket) queueNo(q string) (uint32, bool) {
	if b.run == nil {
		n, ok := b.nameNo[q]
		return n, ok
	}
	i := slices.Index(b.run.Names, q)
	return uint32(i), i >= 0
}

const (
	entPage  = 1 << 14 // entries a page: 1 MiB
	headPage = 1 << 20 // bytes of heads a page
)

func (b *bucket) ent(i int) *openEntry { return &b.ents[i/entPage][i%entPage] }

func (b *bucket) head(e *openEntry) []byte {
	if e.HeadLen == 0 {
		return nil
	}
	o := int(e.HeadOff)
	return b.heads[o/headPage][o%headPage : o%headPage+int(e.HeadLen)]
}

func (b *bucket) freePages() {
	for _, p := range b.ents {
		offheap.Free(p)
	}
	for _, p := range b.heads {
		offheap.Free(p)
	}
	b.ents, b.heads = nil, nil
}

func (b *bucket) isDead(i uint32) bool { return b.dead[i>>6]&(1<<(i&63)) != 0 }
func (b *bucket) kill(i uint32)        { b.dead[i>>6] |= 1 << (i & 63); b.live-- }

// Set is the far-future jobs: the runs on disk, the open bucket, the
// frozen ones being written, and the index over all of them. Every method
// but WriteFrozen, ReadDue, ReadQueue, WriteMerge and the file functions
// is for the owner's lock.
type Set struct {
	o      Options
	x      index
	b      [maxSlots]*bucket
	byID   map[uint64]int // bucket id -> slot
	open   int            // the open bucket's slot; -1: none
	nextID uint64
	jobs   int64
	named  map[uint64]bool // runs the last checkpoint named
	pos    Pos             // the log position the last checkpoint covers
	// merging is the runs being written by a merge not yet begun: a
	// checkpoint meanwhile lists them to drop, should a crash leave one.
	merging map[uint64]bool
	opened  map[string]int // Open's live jobs by queue (Opened)
	dropped uint64         // Dropped
}

// New returns an empty Set whose first bucket will be id 1.
func New(o Options) *Set {
	if o.MaxOpen <= 0 || o.MaxOpen > maxEntries {
		o.MaxOpen = maxEntries
	}
	if o.HeadSpace <= 0 {
		o.HeadSpace = 64 << 20
	}
	if o.Grain <= 0 {
		o.Grain = 1000
	}
	return &Set{o: o, byID: map[uint64]int{}, open: -1, nextID: 1, named: map[uint64]bool{}, merging: map[uint64]bool{}}
}

// Len is the jobs in the Set.
func (s *Set) Len() int64 { return s.jobs }

// Has says whether sid's job is in a bucket. O(1).
func (s *Set) Has(sid uint64) bool {
	_, ok := s.x.get(sid)
	return ok
}

// InRun says whether sid's job is in a run (not in a bucket in memory):
// during the start's replay of the log before the checkpoint's position,
// the jobs whose records replay skips (the run has them as of it).
func (s *Set) InRun(sid uint64) bool {
	l, ok := s.x.get(sid)
	if !ok {
		return false
	}
	slot, _ := unpackLoc(l)
	return s.b[slot].run != nil
}

func (s *Set) newBucket() (int, error) {
	for i := range s.b {
		if s.b[i] == nil {
			b := &bucket{
				id:     s.nextID,
				dead:   make([]uint64, (s.o.MaxOpen+63)/64),
				cal:    calendar{grain: s.o.Grain},
				uses:   map[uint64]int{},
				nameNo: map[string]uint32{},
			}
			s.nextID++
			s.b[i] = b
			s.byID[b.id] = i
			return i, nil
		}
	}
	return 0, ErrNoSlots
}

// Add puts a job in the open bucket: its due and add order, its server id
// (not 0), its queue, its head (copied) and where its payload lies. A full
// open bucket is frozen first (Frozen lists it for WriteFrozen).
// O(len(head)).
func (s *Set) Add(due int64, seq, sid uint64, queue string, head []byte, loc Loc) error {
	if sid == 0 {
		return ErrZeroID
	}
	if _, ok := s.x.get(sid); ok {
		return ErrExists
	}
	if err := s.room(len(head)); err != nil {
		return err
	}
	b := s.b[s.open]
	if loc.Run {
		r, ok := s.byID[loc.File]
		if !ok || s.b[r].run == nil {
			return fmt.Errorf("bucket: a payload in run %d, which is not open", loc.File)
		}
		s.b[r].refs++
		b.uses[loc.File]++
	} else if b.minSeg == 0 || loc.File < b.minSeg {
		b.minSeg = loc.File
	}
	qn, ok := b.nameNo[queue]
	if !ok {
		qn = uint32(len(b.names))
		b.names = append(b.names, queue)
		b.nameNo[queue] = qn
	}
	i := b.n
	if i%entPage == 0 {
		b.ents = append(b.ents, offheap.Make[openEntry](entPage))
	}
	if len(head) > 0 && b.hn+len(head) > len(b.heads)*headPage { // the next page, whole
		b.hn = len(b.heads) * headPage
		b.heads = append(b.heads, offheap.Make[byte](headPage))
	}
	*b.ent(i) = openEntry{Due: due, Seq: seq, SID: sid, HeadOff: uint32(b.hn), HeadLen: uint32(len(head)), Queue: qn, Loc: loc}
	if len(head) > 0 {
		copy(b.heads[b.hn/headPage][b.hn%headPage:], head)
		b.hn += len(head)
	}
	b.n++
	b.live++
	b.cal.add(uint32(i), due)
	s.x.put(sid, packLoc(s.open, uint32(i)))
	s.jobs++
	return nil
}

// room makes sure the open bucket can take a job with a head of n bytes,
// freezing a full one and opening the next.
func (s *Set) room(n int) error {
	if n > s.o.HeadSpace || n > headPage {
		return fmt.Errorf("bucket: a head of %d bytes", n)
	}
	if s.open >= 0 {
		if b := s.b[s.open]; b.n == s.o.MaxOpen || b.hn+n > s.o.HeadSpace {
			b.frozen = true
			s.open = -1
		}
	}
	if s.open < 0 {
		slot, err := s.newBucket()
		if err != nil {
			return err
		}
		s.open = slot
	}
	return nil
}

// LogInUse returns the oldest log segment a payload in a bucket in memory
// lies in, if any: a compaction that would drop it checkpoints first (the
// checkpoint seals those buckets into runs, which copy the payloads).
// O(buckets).
func (s *Set) LogInUse() (seg uint64, ok bool) {
	for _, b := range s.b {
		if b != nil && b.run == nil && b.minSeg != 0 && (!ok || b.minSeg < seg) {
			seg, ok = b.minSeg, true
		}
	}
	return seg, ok
}

// Get reads sid's job: from memory and its payload's locator, or from its
// run (three preads). ok is false if no bucket holds sid.
func (s *Set) Get(sid uint64) (j Job, ok bool, err error) {
	l, ok := s.x.get(sid)
	if !ok {
		return j, false, nil
	}
	slot, i := unpackLoc(l)
	b := s.b[slot]
	if b.run != nil {
		rj, err := b.run.ReadData(i)
		if err == nil && rj.SID != sid {
			err = fmt.Errorf("%w: run %d: job %d is not id %d", ErrCorrupt, b.id, i, sid)
		}
		if err != nil {
			return Job{}, true, err
		}
		return Job{Due: rj.Due, Seq: rj.Seq, SID: sid, Queue: b.run.Names[rj.Queue], Head: rj.Head, Payload: rj.Payload, slot: slot, id: b.id, index: i}, true, nil
	}
	e := b.ent(int(i))
	j = Job{Due: e.Due, Seq: e.Seq, SID: sid, Queue: b.names[e.Queue], Head: slices.Clone(b.head(e)), slot: slot, id: b.id, index: i}
	j.Payload, err = s.readLoc(e.Loc, s.runOf)
	return j, true, err
}

// runOf returns the open run id, or nil.
func (s *Set) runOf(id uint64) *Run {
	if slot, ok := s.byID[id]; ok {
		return s.b[slot].run
	}
	return nil
}

// readLoc reads the payload loc names; runs finds a run by id.
func (s *Set) readLoc(loc Loc, runs func(uint64) *Run) ([]byte, error) {
	if loc.N == 0 {
		return []byte{}, nil
	}
	if loc.Run {
		r := runs(loc.File)
		if r == nil {
			return nil, fmt.Errorf("bucket: payload in run %d, which is gone", loc.File)
		}
		return r.ReadPayload(loc.Off, int(loc.N))
	}
	if s.o.Log == nil {
		return nil, errors.New("bucket: payload in the log and no reader of it")
	}
	return s.o.Log.ReadPayload(uint16(loc.File), loc.Off, int(loc.N))
}

// Remove takes sid's job out of its bucket (a cancel, an ack, a replace, a
// DEL of its queue) and says whether a bucket held it. O(1), no I/O.
func (s *Set) Remove(sid uint64) bool {
	l, ok := s.x.get(sid)
	if !ok {
		return false
	}
	slot, i := unpackLoc(l)
	s.x.del(sid)
	s.b[slot].kill(i)
	s.jobs--
	return true
}

// Fault is Remove for a job that goes back to memory (an operation by id
// on it), not away: a scan must be able to follow it (Scan).
func (s *Set) Fault(sid uint64) bool {
	l, ok := s.x.get(sid)
	if ok {
		slot, _ := unpackLoc(l)
		s.b[slot].back = true
	}
	return s.Remove(sid)
}

// Move gives sid's job a new due and add order and head (a reschedule
// beyond the horizon): it leaves its bucket for the open one, in the same
// queue, its payload staying where it is (in memory's locator, or in its
// run: three preads).
func (s *Set) Move(sid uint64, due int64, seq uint64, head []byte) error {
	l, ok := s.x.get(sid)
	if !ok {
		return fmt.Errorf("bucket: no job %d", sid)
	}
	slot, i := unpackLoc(l)
	b := s.b[slot]
	var loc Loc
	var queue string
	if b.run != nil {
		rj, off, err := b.run.read(i)
		if err != nil {
			return err
		}
		loc, queue = Loc{File: b.id, Off: off, N: uint32(len(rj.Payload)), Run: true}, b.run.Names[rj.Queue]
	} else {
		loc, queue = b.ent(int(i)).Loc, b.names[b.ent(int(i)).Queue]
	}
	if err := s.room(len(head)); err != nil {
		return err // the job stays where it was
	}
	s.Remove(sid)
	return s.Add(due, seq, sid, queue, head, loc)
}

// Frozen is a bucket that takes no more jobs, to be written as a run.
type Frozen struct {
	slot int
	id   uint64
	b    *bucket
	runs map[uint64]*Run // the runs its payloads lie in
	run  *Run            // once installed
}

// ID is the run id the frozen bucket will be written as.
func (f *Frozen) ID() uint64 { return f.id }

// Freeze closes the open bucket to new jobs (a checkpoint's first step) and
// returns every frozen bucket not yet written, oldest first.
func (s *Set) Freeze() []*Frozen {
	if s.open >= 0 && s.b[s.open].n > 0 {
		s.b[s.open].frozen = true
		s.open = -1
	}
	return s.Frozen()
}

// Frozen returns the frozen buckets not yet written, oldest first.
func (s *Set) Frozen() []*Frozen {
	var fs []*Frozen
	for slot, b := range s.b {
		if b != nil && b.frozen {
			f := &Frozen{slot: slot, id: b.id, b: b, runs: map[uint64]*Run{}}
			for id := range b.uses {
				f.runs[id] = s.runOf(id)
			}
			fs = append(fs, f)
		}
	}
	slices.SortFunc(fs, func(a, b *Frozen) int { return cmpInt(a.id, b.id) })
	return fs
}

// WriteFrozen writes f as a run: without the owner's lock (a frozen
// bucket's entries and heads do not change; which are dead is not read:
// the run holds them all and Install carries the dead bits over). It reads
// each payload once through its locator (those in the log through a
// window of it, when the reader can: logWindow), and calls yield (if not nil)
// before each job: a bucket is up to a million reads, and the owner gives
// its CPU up there now and then (one CPU: its clients wait otherwise).
func (s *Set) WriteFrozen(f *Frozen, yield func()) (*Run, error) {
	b := f.b
	w := &logWindow{}
	w.r, _ = s.o.Log.(SpanReader)
	key := func(i int) Sorted {
		e := b.ent(i)
		return Sorted{Due: e.Due, Seq: e.Seq, SID: e.SID, Queue: e.Queue}
	}
	return writeRun(s.o.FS, s.o.Path, f.id, b.names, b.n, key, func(i int) (runJob, error) {
		e := b.ent(i)
		var p []byte
		var err error
		if e.Loc.Run || e.Loc.N == 0 || s.o.Log == nil {
			p, err = s.readLoc(e.Loc, func(id uint64) *Run { return f.runs[id] })
		} else {
			p, err = w.read(s.o.Log, uint16(e.Loc.File), e.Loc.Off, int(e.Loc.N))
		}
		if err != nil {
			return runJob{}, err
		}
		return runJob{Due: e.Due, Seq: e.Seq, SID: e.SID, Queue: e.Queue, Head: b.head(e), Payload: p}, nil
	}, yield)
}

// Install makes f's bucket the run WriteFrozen wrote: its memory is freed
// and the runs its payloads lay in are no longer needed by it. The index
// does not change: a job keeps its slot and index. O(1) but the unmap.
func (s *Set) Install(f *Frozen, r *Run) {
	b := s.b[f.slot]
	if b != f.b || !b.frozen || r.ID != b.id {
		panic(fmt.Sprintf("bucket: Install of run %d, not the frozen bucket in slot %d", r.ID, f.slot))
	}
	for id, n := range b.uses {
		if slot, ok := s.byID[id]; ok {
			s.b[slot].refs -= n
		}
	}
	b.freePages()
	b.uses, b.frozen, b.hn, b.run, b.cal = nil, false, 0, r, calendar{}
	f.run = r
	b.names, b.nameNo = nil, nil
	b.dead = b.dead[:(b.n+63)/64]
	// The jobs loads took during the write are the head of its sorted
	// order: the cursor goes past them, else the next rounds read them all
	// again (a seal of seconds at 20k jobs a second: 80k dead jobs' data).
	for b.cursor < len(r.order) && b.isDead(r.order[b.cursor]) {
		b.cursor++
	}
	r.order = nil
}

// Reset drops every job (FLUSHALL). The open bucket is freed; the runs,
// and the frozen buckets (a WriteFrozen may be reading one: it is written
// and installed as usual), stay, all dead, until the next checkpoint,
// which names none of them, removes them.
func (s *Set) Reset() {
	s.x.reset()
	if s.open >= 0 {
		s.free(s.open)
		s.open = -1
	}
	for _, b := range s.b {
		if b == nil {
			continue
		}
		for i := range b.dead {
			b.dead[i] = ^uint64(0)
		}
		b.live = 0
		if b.run != nil {
			b.cursor = b.run.N
		}
	}
	s.jobs = 0
}

// free forgets the bucket in memory at slot, releasing the runs it read
// payloads from.
func (s *Set) free(slot int) {
	b := s.b[slot]
	for id, n := range b.uses {
		if r, ok := s.byID[id]; ok {
			s.b[r].refs -= n
		}
	}
	b.freePages()
	delete(s.byID, b.id)
	s.b[slot] = nil
}

// Info is what INFO shows of the Set.
type Info struct {
	Jobs       int64
	Runs, Mem  int   // buckets on disk, in memory (open and frozen)
	IndexBytes int64 // the index's mapped memory
	MemBytes   int64 // what the in-memory buckets' entries and heads have touched
	DiskBytes  int64 // the runs' files
}

// Info returns the Set's figures. O(buckets).
func (s *Set) Info() Info {
	in := Info{Jobs: s.jobs, IndexBytes: s.x.bytes()}
	for _, b := range s.b {
		switch {
		case b == nil:
		case b.run != nil:
			in.Runs++
			in.DiskBytes += b.run.Size
		default:
			in.Mem++
			in.MemBytes += int64(len(b.ents))*entPage*64 + int64(len(b.heads))*headPage
		}
	}
	return in
}
