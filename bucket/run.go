package bucket

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"slices"
	"strconv"

	"github.com/delayd/delayd/aof"
)

// A run's file, written once and never changed:
//
//	header  8 bytes: runMagic (or runMagicV1)
//	data    per job, in sorted order: hlen, plen (uvarints), head, payload,
//	        CRC-32C u32 of all before it (runMagicV1: in index order)
//	byindex n entries of 12 bytes: where the job's data starts u64, its
//	        place in sorted u32
//	sorted  n entries of 32 bytes, by (due, seq): due i64, seq u64,
//	        sid u64, index u32, queue u32
//	names   the queues' names: count u32, then per name its length u32
//	        and bytes; a job's queue is its number in this list
//	trailer 64 bytes: trailerMagic, id, n, byindex's start, sorted's
//	        start, names' start (u64 each), CRC-32C of byindex, of sorted,
//	        of names, of the trailer's first 60 bytes
//
// Little-endian throughout. The index (a job's place in data and byindex)
// is the order jobs entered the open bucket, so the id index's cells name
// the same entry before and after the seal; sorted is what loading walks,
// and the data lie in its order, so that a load reads the jobs due as one
// span (readSpan), not a job's place and data each: three preads a job at
// 20k jobs a second were most of a loader that fell a second behind after
// a compaction sealed its bucket (docs/decisions/far-future-buckets.md,
// "Runs in due order"). The seal pays instead, a log read a payload out
// of add order. A run of the first format (data in index order) is read
// as before: a pread for a job's place, one for its data.
// A job costs 44 bytes beside its head and payload, and its data's framing
// (about 7): due, add order, id and queue are written once, in sorted.
// Opening checks the trailer and the CRCs of byindex, sorted and names; a
// job's data is checked when it is read.
const (
	headerSize  = 8
	trailerSize = 64
	sortedSize  = 32
	byIndexSize = 12
	// sparseEvery is how many sorted entries share one due in memory
	// (Run.first): a 4 KiB read finds a due time's place.
	sparseEvery = 128
)

var (
	runMagic     = [8]byte{'D', 'L', 'Y', 'B', 'K', 'T', 0, 2}
	runMagicV1   = [8]byte{'D', 'L', 'Y', 'B', 'K', 'T', 0, 1}
	trailerMagic = [8]byte{'D', 'L', 'Y', 'B', 'E', 'N', 'D', 1}
	castagnoli   = crc32.MakeTable(crc32.Castagnoli)
)

// ErrCorrupt is a run or checkpoint file that does not check out: torn,
// truncated, or with a bad CRC. It is refused whole.
var ErrCorrupt = errors.New("bucket: file is damaged")

// RunPath is the file of run id beside the log at path.
func RunPath(path string, id uint64) string {
	return path + ".bucket." + strconv.FormatUint(id, 10)
}

// Sorted is one entry of a run's sorted section.
type Sorted struct {
	Due      int64
	Seq, SID uint64
	Index    uint32 // the job's place in data and byindex
	Queue    uint32 // its queue's number in the run's Names
}

// Run is a sealed bucket's file, open for reading. Its fields never change
// after OpenRun (or writeRun), so it may be read without the owner's lock.
type Run struct {
	ID     uint64
	N      int
	Size   int64    // the file's bytes
	Names  []string // the queues of its jobs
	f      aof.File
	byAt   int64
	sortAt int64
	// inOrder says its data lie in sorted order (runMagic), not in index
	// order (runMagicV1).
	inOrder bool
	// order is, from writeRun until Install, its jobs' indexes in sorted
	// order: 4 bytes a job for a moment.
	order []uint32
	first []int64 // due of sorted entry k*sparseEvery
}

// runJob is one job as writeRun writes it.
type runJob struct {
	Due           int64
	Seq, SID      uint64
	Queue         uint32 // a number in the run's names
	Head, Payload []byte
}

// writeRun writes the n jobs of the queues names as run id at path: to a
// temporary file, fsynced, renamed, the directory fsynced (aof.Install).
// key(i) is job i's sorted entry but its Index (no I/O); it sorts them, 32
// bytes a job in memory, then reads each job once with job(i), in sorted
// order. On error nothing is left under the run's name. yield, if not
// nil, is called before each job and between pieces of the sort and of
// the index's writing: the owner's pauses (WriteFrozen).
func writeRun(fs aof.FS, path string, id uint64, names []string, n int, key func(i int) Sorted, job func(i int) (runJob, error), yield func()) (r *Run, err error) {
	if yield == nil {
		yield = func() {}
	}
	name := RunPath(path, id)
	tmp := name + ".tmp"
	f, err := fs.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	defer func() {
		if f != nil {
			f.Close()
		}
		if err != nil {
			_ = fs.Remove(tmp)
		}
	}()
	w := bufio.NewWriterSize(f, 1<<16)
	w.Write(runMagic[:])
	at := int64(headerSize)
	starts := make([]int64, n)
	srt := make([]Sorted, n)
	for i := range n {
		if i%sortBlock == 0 {
			yield()
		}
		srt[i] = key(i)
		srt[i].Index = uint32(i)
		if int(srt[i].Queue) >= len(names) {
			return nil, fmt.Errorf("bucket: run %d, job %d: queue %d of %d", id, i, srt[i].Queue, len(names))
		}
	}
	sortSorted(srt, yield)
	var hdr []byte
	for _, e := range srt {
		yield()
		j, err := job(int(e.Index))
		if err != nil {
			return nil, fmt.Errorf("bucket: run %d, job %d: %w", id, e.Index, err)
		}
		if j.Due != e.Due || j.Seq != e.Seq || j.SID != e.SID {
			return nil, fmt.Errorf("bucket: run %d, job %d: read as due %d seq %d id %d, keyed due %d seq %d id %d", id, e.Index, j.Due, j.Seq, j.SID, e.Due, e.Seq, e.SID)
		}
		starts[e.Index] = at
		hdr = binary.AppendUvarint(hdr[:0], uint64(len(j.Head)))
		hdr = binary.AppendUvarint(hdr, uint64(len(j.Payload)))
		c := crc32.Update(0, castagnoli, hdr)
		c = crc32.Update(c, castagnoli, j.Head)
		c = crc32.Update(c, castagnoli, j.Payload)
		w.Write(hdr)
		w.Write(j.Head)
		w.Write(j.Payload)
		var cb [4]byte
		binary.LittleEndian.PutUint32(cb[:], c)
		w.Write(cb[:])
		at += int64(len(hdr) + len(j.Head) + len(j.Payload) + 4)
	}
	// byindex: each job's data and its place in sorted.
	bi := make([]byte, byIndexSize*n)
	for k, e := range srt {
		if k%sortBlock == 0 {
			yield()
		}
		binary.LittleEndian.PutUint64(bi[byIndexSize*int(e.Index):], uint64(starts[e.Index]))
		binary.LittleEndian.PutUint32(bi[byIndexSize*int(e.Index)+8:], uint32(k))
	}
	byAt := at
	w.Write(bi)
	sortAt := byAt + int64(len(bi))
	sc := uint32(0)
	var eb [sortedSize]byte
	first := make([]int64, 0, (n+sparseEvery-1)/sparseEvery)
	order := make([]uint32, n)
	for k, s := range srt {
		order[k] = s.Index
		if k%sortBlock == 0 {
			yield()
		}
		putSorted(eb[:], s)
		sc = crc32.Update(sc, castagnoli, eb[:])
		w.Write(eb[:])
		if k%sparseEvery == 0 {
			first = append(first, s.Due)
		}
	}
	namesAt := sortAt + sortedSize*int64(n)
	nb := binary.LittleEndian.AppendUint32(nil, uint32(len(names)))
	for _, q := range names {
		nb = binary.LittleEndian.AppendUint32(nb, uint32(len(q)))
		nb = append(nb, q...)
	}
	w.Write(nb)
	var tr [trailerSize]byte
	copy(tr[0:], trailerMagic[:])
	binary.LittleEndian.PutUint64(tr[8:], id)
	binary.LittleEndian.PutUint64(tr[16:], uint64(n))
	binary.LittleEndian.PutUint64(tr[24:], uint64(byAt))
	binary.LittleEndian.PutUint64(tr[32:], uint64(sortAt))
	binary.LittleEndian.PutUint64(tr[40:], uint64(namesAt))
	binary.LittleEndian.PutUint32(tr[48:], crc32.Checksum(bi, castagnoli))
	binary.LittleEndian.PutUint32(tr[52:], sc)
	binary.LittleEndian.PutUint32(tr[56:], crc32.Checksum(nb, castagnoli))
	binary.LittleEndian.PutUint32(tr[60:], crc32.Checksum(tr[:60], castagnoli))
	w.Write(tr[:])
	if err := w.Flush(); err != nil {
		return nil, err
	}
	err = f.Close()
	f = nil
	if err != nil {
		return nil, err
	}
	if err := aof.Install(fs, tmp, name); err != nil {
		if errors.Is(err, aof.ErrRenameNotDurable) {
			_ = fs.Remove(name) // unnamed by any checkpoint: a crash may bring it back, and Open removes it
		}
		return nil, err
	}
	rf, err := fs.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	return &Run{ID: id, N: n, Size: namesAt + int64(len(nb)) + trailerSize, Names: slices.Clone(names), f: rf, byAt: byAt, sortAt: sortAt, first: first, inOrder: true, order: order}, nil
}

// sortBlock is the entries sortSorted sorts alone, and merges, between
// two calls of its yield: about 100 µs of work.
const sortBlock = 2048

// sortSorted sorts s in (due, add order), in pieces with yield between
// them: blocks of sortBlock sorted alone, then merged pairwise, bottom up
// (a sort of a million entries is 100-200 ms of one CPU, which a single
// slices.SortFunc would keep but for the runtime's preemptions). Its
// order is the single sort's: (due, seq) is unique.
func sortSorted(s []Sorted, yield func()) {
	n := len(s)
	if n <= sortBlock {
		slices.SortFunc(s, cmpSorted)
		return
	}
	for i := 0; i < n; i += sortBlock {
		slices.SortFunc(s[i:min(i+sortBlock, n)], cmpSorted)
		yield()
	}
	src, dst := s, make([]Sorted, n)
	for w := sortBlock; w < n; w *= 2 {
		for lo := 0; lo < n; lo += 2 * w {
			mid, hi := min(lo+w, n), min(lo+2*w, n)
			i, j := lo, mid
			for k := lo; k < hi; k++ {
				if j >= hi || (i < mid && cmpSorted(src[i], src[j]) <= 0) {
					dst[k] = src[i]
					i++
				} else {
					dst[k] = src[j]
					j++
				}
				if k%sortBlock == 0 {
					yield()
				}
			}
		}
		src, dst = dst, src
	}
	if &src[0] != &s[0] {
		copy(s, src)
	}
}

func cmpSorted(a, b Sorted) int {
	if a.Due != b.Due {
		return cmpInt(a.Due, b.Due)
	}
	return cmpInt(a.Seq, b.Seq)
}

func cmpInt[T int64 | uint64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func putSorted(b []byte, s Sorted) {
	binary.LittleEndian.PutUint64(b[0:], uint64(s.Due))
	binary.LittleEndian.PutUint64(b[8:], s.Seq)
	binary.LittleEndian.PutUint64(b[16:], s.SID)
	binary.LittleEndian.PutUint32(b[24:], s.Index)
	binary.LittleEndian.PutUint32(b[28:], s.Queue)
}

func getSorted(b []byte) Sorted {
	return Sorted{
		Due:   int64(binary.LittleEndian.Uint64(b[0:])),
		Seq:   binary.LittleEndian.Uint64(b[8:]),
		SID:   binary.LittleEndian.Uint64(b[16:]),
		Index: binary.LittleEndian.Uint32(b[24:]),
		Queue: binary.LittleEndian.Uint32(b[28:]),
	}
}

// OpenRun opens run id at path and checks its trailer and the CRCs of its
// byindex, sorted and names sections, calling each, if not nil, for every
// sorted entry in order (the start's index rebuild). It reads 44 bytes a
// job.
func OpenRun(fs aof.FS, path string, id uint64, each func(pos int, s Sorted)) (*Run, error) {
	f, err := fs.OpenFile(RunPath(path, id), os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	r, err := openRun(f, id, each)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, RunPath(path, id), err)
	}
	return r, nil
}

func openRun(f aof.File, id uint64, each func(pos int, s Sorted)) (*Run, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	if size < headerSize+trailerSize {
		return nil, errors.New("shorter than a header and a trailer")
	}
	var h [headerSize]byte
	if _, err := f.ReadAt(h[:], 0); err != nil || (h != runMagic && h != runMagicV1) {
		return nil, errors.New("bad header")
	}
	var tr [trailerSize]byte
	if _, err := f.ReadAt(tr[:], size-trailerSize); err != nil {
		return nil, err
	}
	if [8]byte(tr[0:8]) != trailerMagic || binary.LittleEndian.Uint32(tr[60:]) != crc32.Checksum(tr[:60], castagnoli) {
		return nil, errors.New("bad trailer")
	}
	n := binary.LittleEndian.Uint64(tr[16:])
	byAt := int64(binary.LittleEndian.Uint64(tr[24:]))
	sortAt := int64(binary.LittleEndian.Uint64(tr[32:]))
	namesAt := int64(binary.LittleEndian.Uint64(tr[40:]))
	if binary.LittleEndian.Uint64(tr[8:]) != id || n > maxEntries || byAt < headerSize ||
		sortAt != byAt+byIndexSize*int64(n) || namesAt != sortAt+sortedSize*int64(n) || namesAt+4 > size-trailerSize {
		return nil, errors.New("trailer does not match the file")
	}
	if c, err := crcOf(f, byAt, byIndexSize*int64(n), nil); err != nil || c != binary.LittleEndian.Uint32(tr[48:]) {
		return nil, errors.New("byindex's CRC")
	}
	nb := make([]byte, size-trailerSize-namesAt)
	if _, err := f.ReadAt(nb, namesAt); err != nil || crc32.Checksum(nb, castagnoli) != binary.LittleEndian.Uint32(tr[56:]) {
		return nil, errors.New("names' CRC")
	}
	names, err := decodeNames(nb)
	if err != nil {
		return nil, err
	}
	r := &Run{ID: id, N: int(n), Size: size, Names: names, f: f, byAt: byAt, sortAt: sortAt, first: make([]int64, 0, (n+sparseEvery-1)/sparseEvery), inOrder: h == runMagic}
	pos, bad := 0, false
	c, err := crcOf(f, sortAt, sortedSize*int64(n), func(b []byte) {
		for ; len(b) >= sortedSize; b = b[sortedSize:] {
			s := getSorted(b)
			if pos%sparseEvery == 0 {
				r.first = append(r.first, s.Due)
			}
			if s.Index >= uint32(n) || int(s.Queue) >= len(names) {
				bad = true
			} else if each != nil {
				each(pos, s)
			}
			pos++
		}
	})
	if err != nil || c != binary.LittleEndian.Uint32(tr[52:]) {
		return nil, errors.New("sorted entries' CRC")
	}
	if bad {
		return nil, errors.New("a sorted entry names no job or queue")
	}
	return r, nil
}

func decodeNames(b []byte) ([]string, error) {
	bad := errors.New("names")
	if len(b) < 4 {
		return nil, bad
	}
	k := binary.LittleEndian.Uint32(b)
	b = b[4:]
	if uint64(k) > uint64(len(b))/4 {
		return nil, bad
	}
	names := make([]string, 0, k)
	for range k {
		if len(b) < 4 || uint64(binary.LittleEndian.Uint32(b)) > uint64(len(b)-4) {
			return nil, bad
		}
		l := binary.LittleEndian.Uint32(b)
		names = append(names, string(b[4:4+l]))
		b = b[4+l:]
	}
	if len(b) != 0 {
		return nil, bad
	}
	return names, nil
}

// crcOf reads n bytes at off in chunks (a multiple of sortedSize),
// handing each to see, and returns their CRC-32C.
func crcOf(f aof.File, off, n int64, see func([]byte)) (uint32, error) {
	buf := make([]byte, min(n, 2048*sortedSize))
	var c uint32
	for n > 0 {
		b := buf[:min(n, int64(len(buf)))]
		if _, err := f.ReadAt(b, off); err != nil {
			return 0, err
		}
		c = crc32.Update(c, castagnoli, b)
		if see != nil {
			see(b)
		}
		off += int64(len(b))
		n -= int64(len(b))
	}
	return c, nil
}

// Close closes the run's file.
func (r *Run) Close() error { return r.f.Close() }

// Bound returns a sorted position at or before which every entry due by
// until lies: entries at Bound and after are due after until. From the
// sparse dues in memory, no I/O. O(log(N/sparseEvery)).
func (r *Run) Bound(until int64) int {
	c, _ := slices.BinarySearchFunc(r.first, until, func(d, u int64) int {
		if d <= u {
			return -1
		}
		return 1
	})
	return min(c*sparseEvery, r.N)
}

// ReadSorted appends the sorted entries [from, to) to out.
func (r *Run) ReadSorted(from, to int, out []Sorted) ([]Sorted, error) {
	if from < 0 || to > r.N || from > to {
		return out, fmt.Errorf("bucket: run %d: sorted [%d, %d) of %d", r.ID, from, to, r.N)
	}
	b := make([]byte, sortedSize*(to-from))
	if _, err := r.f.ReadAt(b, r.sortAt+sortedSize*int64(from)); err != nil {
		return out, err
	}
	for ; len(b) > 0; b = b[sortedSize:] {
		out = append(out, getSorted(b))
	}
	return out, nil
}

// ReadData reads the job at index i: three preads (its place, its data,
// its sorted entry), the data's CRC checked.
func (r *Run) ReadData(i uint32) (runJob, error) {
	j, _, err := r.read(i)
	return j, err
}

// read is ReadData, and where the payload lies in the file: a locator for
// a job that moves from the run to an open bucket.
func (r *Run) read(i uint32) (j runJob, payloadAt int64, err error) {
	head, payload, payloadAt, pos, err := r.data(i)
	if err != nil {
		return j, 0, err
	}
	var sb [sortedSize]byte
	if _, err := r.f.ReadAt(sb[:], r.sortAt+sortedSize*int64(pos)); err != nil {
		return j, 0, err
	}
	e := getSorted(sb[:])
	if e.Index != i || int(e.Queue) >= len(r.Names) {
		return j, 0, fmt.Errorf("%w: run %d: job %d's sorted entry", ErrCorrupt, r.ID, i)
	}
	return runJob{Due: e.Due, Seq: e.Seq, SID: e.SID, Queue: e.Queue, Head: head, Payload: payload}, payloadAt, nil
}

// data reads job i's head and payload (its place, then its data, the CRC
// checked), where the payload lies in the file, and its sorted place.
func (r *Run) data(i uint32) (head, payload []byte, payloadAt int64, pos uint32, err error) {
	start, end, pos, err := r.place(i)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	var b []byte
	if r.inOrder {
		b, err = r.frameAt(start)
	} else {
		b = make([]byte, end-start)
		_, err = r.f.ReadAt(b, start)
	}
	if err != nil {
		return nil, nil, 0, 0, err
	}
	hl, pl, at := r.frame(b)
	if at < 0 {
		return nil, nil, 0, 0, fmt.Errorf("%w: run %d: job %d's data", ErrCorrupt, r.ID, i)
	}
	h := b[at:]
	return h[:hl:hl], h[hl : hl+pl : hl+pl], start + int64(at+hl), pos, nil
}

// firstRead is what frameAt reads of a job's data before it knows its
// length: most jobs' whole data.
const firstRead = 1 << 10

// frameAt reads the data of the job that starts at start, in a run whose
// data lie in sorted order (where the next job's start, in byindex, is
// not this one's end): its length is in its first bytes.
func (r *Run) frameAt(start int64) ([]byte, error) {
	b := make([]byte, min(firstRead, r.byAt-start))
	if _, err := r.f.ReadAt(b, start); err != nil {
		return nil, err
	}
	n, ok := frameLen(b)
	if !ok || start+int64(n) > r.byAt {
		return nil, fmt.Errorf("%w: run %d: the data at %d", ErrCorrupt, r.ID, start)
	}
	if n <= len(b) {
		return b[:n], nil
	}
	all := make([]byte, n)
	copy(all, b)
	_, err := r.f.ReadAt(all[len(b):], start+int64(len(b)))
	return all, err
}

// frameLen is the length of the job's data b starts with, from its first
// bytes (the lengths); ok is false if b is too short to tell.
func frameLen(b []byte) (int, bool) {
	h, n1 := binary.Uvarint(b)
	if n1 <= 0 {
		return 0, false
	}
	p, n2 := binary.Uvarint(b[n1:])
	if n2 <= 0 || h > maxFrame || p > maxFrame {
		return 0, false
	}
	return n1 + n2 + int(h) + int(p) + 4, true
}

// maxFrame bounds a head's or payload's length as read: a damaged length
// is an error, not an allocation of exabytes.
const maxFrame = 1 << 30

// spanWindow is what a seqReader reads at once.
const spanWindow = 256 << 10

// seqSkip is how many sorted positions a seqReader walks through its
// window to the next it is asked for; past that it finds the next one's
// place (a pread) instead.
const seqSkip = 64

// seqReader reads the jobs of a run whose data lie in sorted order at
// rising sorted positions, a window at a time: a load's span (readSpan)
// and a merge's reads of each run it merges, which skip the dead jobs
// between the live ones. A job it returns lies in its window: valid until
// the next read.
type seqReader struct {
	r      *Run
	next   int   // the sorted position whose data start at at; -1: none yet
	at, lo int64 // at's file offset, and buf[0]'s
	buf    []byte
}

func newSeqReader(r *Run) *seqReader { return &seqReader{r: r, next: -1} }

// read returns the job at sorted position pos, whose sorted entry is e.
func (q *seqReader) read(pos int, e Sorted) (runJob, error) {
	r := q.r
	if q.next < 0 || pos < q.next || pos-q.next > seqSkip {
		start, _, p, err := r.place(e.Index)
		if err != nil {
			return runJob{}, err
		}
		if int(p) != pos {
			return runJob{}, fmt.Errorf("%w: run %d: job %d's place is %d, not %d", ErrCorrupt, r.ID, e.Index, p, pos)
		}
		q.at, q.next = start, pos
	}
	for {
		b, err := q.frame()
		if err != nil {
			return runJob{}, err
		}
		q.at += int64(len(b))
		q.next++
		if q.next-1 < pos {
			continue // a job between: skipped
		}
		hl, pl, at := r.frame(b)
		if at < 0 {
			return runJob{}, fmt.Errorf("%w: run %d: job %d's data", ErrCorrupt, r.ID, e.Index)
		}
		return runJob{Due: e.Due, Seq: e.Seq, SID: e.SID, Queue: e.Queue, Head: b[at : at+hl : at+hl], Payload: b[at+hl : at+hl+pl : at+hl+pl]}, nil
	}
}

// frame returns the data of the job at q.at, from the window or from the
// next one, which starts there (a job longer than a window is read alone).
func (q *seqReader) frame() ([]byte, error) {
	off := q.at - q.lo
	if q.buf != nil && off >= 0 && off <= int64(len(q.buf)) {
		if n, ok := frameLen(q.buf[off:]); ok && off+int64(n) <= int64(len(q.buf)) {
			return q.buf[off : off+int64(n)], nil
		}
	}
	if q.buf == nil {
		q.buf = make([]byte, spanWindow)
	}
	q.buf = q.buf[:min(int64(cap(q.buf)), q.r.byAt-q.at)]
	q.lo = q.at
	if _, err := q.r.f.ReadAt(q.buf, q.at); err != nil {
		return nil, err
	}
	n, ok := frameLen(q.buf)
	if !ok || q.at+int64(n) > q.r.byAt {
		return nil, fmt.Errorf("%w: run %d: the data at %d", ErrCorrupt, q.r.ID, q.at)
	}
	if n <= len(q.buf) {
		return q.buf[:n], nil
	}
	big := make([]byte, n)
	_, err := q.r.f.ReadAt(big, q.at)
	return big, err
}

// readSpan reads, in a run whose data lie in sorted order, the jobs of the
// sorted entries ss, which are consecutive from sorted position from: one
// pread for the first one's place, then their data, which follow one
// another, a window at a time (seqReader). It calls fn for each in order
// (its head and payload its own), and yield before each.
func (r *Run) readSpan(from int, ss []Sorted, yield func(), fn func(k int, j runJob)) error {
	q := newSeqReader(r)
	for k, e := range ss {
		yield()
		j, err := q.read(from+k, e)
		if err != nil {
			return err
		}
		c := slices.Concat(j.Head, j.Payload)
		j.Head, j.Payload = c[:len(j.Head):len(j.Head)], c[len(j.Head):]
		fn(k, j)
	}
	return nil
}

// readJobs reads the jobs of ss, the sorted entries from position from
// on: as one span (readSpan), or in a run of the first format a job at a
// time (its place, its data). fn and yield as readSpan's.
func (r *Run) readJobs(from int, ss []Sorted, yield func(), fn func(k int, j runJob)) error {
	if r.inOrder {
		return r.readSpan(from, ss, yield, fn)
	}
	for k, e := range ss {
		yield()
		head, payload, _, _, err := r.data(e.Index)
		if err != nil {
			return err
		}
		fn(k, runJob{Due: e.Due, Seq: e.Seq, SID: e.SID, Queue: e.Queue, Head: head, Payload: payload})
	}
	return nil
}

// place reads where job i's data starts, its sorted place, and (in a run of
// the first format, whose data lie in index order) where its data ends.
func (r *Run) place(i uint32) (start, end int64, pos uint32, err error) {
	if int(i) >= r.N {
		return 0, 0, 0, fmt.Errorf("bucket: run %d: no job %d", r.ID, i)
	}
	var ob [2 * byIndexSize]byte
	ends := ob[:]
	if int(i) == r.N-1 || r.inOrder {
		ends = ob[:byIndexSize]
	}
	if _, err := r.f.ReadAt(ends, r.byAt+byIndexSize*int64(i)); err != nil {
		return 0, 0, 0, err
	}
	start, end = int64(binary.LittleEndian.Uint64(ob[0:])), r.byAt
	pos = binary.LittleEndian.Uint32(ob[8:])
	if len(ends) > byIndexSize {
		end = int64(binary.LittleEndian.Uint64(ob[byIndexSize:]))
	}
	if start < headerSize || end > r.byAt || end-start < 6 || int(pos) >= r.N {
		return 0, 0, 0, fmt.Errorf("%w: run %d: job %d's place", ErrCorrupt, r.ID, i)
	}
	return start, end, pos, nil
}

// frame checks b, one job's data, and returns its head's and payload's
// lengths and where the head starts; at < 0 if b does not check out.
func (r *Run) frame(b []byte) (hl, pl, at int) {
	if binary.LittleEndian.Uint32(b[len(b)-4:]) != crc32.Checksum(b[:len(b)-4], castagnoli) {
		return 0, 0, -1
	}
	h, n1 := binary.Uvarint(b)
	if n1 <= 0 {
		return 0, 0, -1
	}
	p, n2 := binary.Uvarint(b[n1:])
	if n2 <= 0 || uint64(n1+n2)+h+p+4 != uint64(len(b)) {
		return 0, 0, -1
	}
	return int(h), int(p), n1 + n2
}

// ReadPayload reads n bytes at off of the run's file: a payload an open
// bucket's entry names by its locator in this run.
func (r *Run) ReadPayload(off int64, n int) ([]byte, error) {
	b := make([]byte, n)
	_, err := r.f.ReadAt(b, off)
	return b, err
}
