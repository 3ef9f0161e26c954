package journal

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delayd/delayd/aof"
)

// Payloads on disk (docs/decisions/payloads-on-disk.md), the log's side:
// reading a payload back from the segment that holds it (ReadPayload, the
// owner's jobs.DiskReader), and tailing the log (Tail), which hands the
// owner every record written since the last call with the segment and
// offset it lies at, so that the owner can keep, for a job due far ahead,
// where its payload is instead of its bytes. Both read what the writer has
// written (write(2), not yet fsynced is enough: a crash that loses it
// loses the job's record too). A segment a payload lies in is dropped only
// once the owner restated what it held (compaction) or rewrote everything
// (a rewrite's install, after which Gen changes).

// payloads is the journal's open segments for reading, and the tail.
type payloads struct {
	mu    sync.Mutex
	files map[uint16]segFile // by id modulo 65,536, as a job's home names it
	// tailSeg and tailOff are where Tail goes on: the next record to read.
	// Only Tail's caller uses them.
	tailSeg uint64
	tailOff int64
	tailBuf []byte      // Tail's read buffer, kept from one call to the next
	retail  atomic.Bool // the next Tail starts again from the first segment
	reads   atomic.Uint64
	gen     atomic.Uint64 // changed when a rewrite's install dropped every segment
}

type segFile struct {
	id uint64
	f  aof.File
}

// file returns segment id open for reading. Called with mu held.
func (j *Journal) file(id uint64) (aof.File, error) {
	p := &j.pay
	if sf, ok := p.files[uint16(id)]; ok && sf.id == id {
		return sf.f, nil
	} else if ok {
		sf.f.Close() // a dropped segment whose id the new one shares modulo 65,536
	}
	f, err := j.opts.FS.OpenFile(aof.SegPath(j.opts.Path, id), 0, 0) // os.O_RDONLY
	if err != nil {
		return nil, err
	}
	if p.files == nil {
		p.files = make(map[uint16]segFile)
	}
	p.files[uint16(id)] = segFile{id, f}
	return f, nil
}

// ReadPayload reads the n bytes at off of the segment seg names (modulo
// 65,536) into a fresh slice: a job's payload on disk. It takes no lock but
// its own, and no fsync waits on it. A segment is opened once Tail has read
// it, or here, the first time a payload that replay kept on disk is read.
func (j *Journal) ReadPayload(seg uint16, off int64, n int) ([]byte, error) {
	return j.pay.read(j.opts.FS, j.opts.Path, j.Segments, seg, off, n)
}

// ReadSpan reads into dst the bytes at off of the segment seg names, as
// many as it holds up to len(dst) (fewer at its end), and says how many:
// a window of the log that many payloads are read from (a far-future
// bucket's seal). io.EOF only when none are there.
func (j *Journal) ReadSpan(seg uint16, off int64, dst []byte) (int, error) {
	sf, err := j.pay.file(j.opts.FS, j.opts.Path, j.Segments, seg)
	if err != nil {
		return 0, err
	}
	n, err := sf.f.ReadAt(dst, off)
	if err == io.EOF && n > 0 {
		err = nil
	}
	if err == nil {
		j.pay.reads.Add(1)
	}
	return n, err
}

// read is ReadPayload of the segments segs() names.
func (p *payloads) read(fs aof.FS, path string, segs func() []uint64, seg uint16, off int64, n int) ([]byte, error) {
	sf, err := p.file(fs, path, segs, seg)
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	if _, err := sf.f.ReadAt(b, off); err != nil {
		return nil, err
	}
	p.reads.Add(1)
	return b, nil
}

// file returns the open segment seg names.
func (p *payloads) file(fs aof.FS, path string, segs func() []uint64, seg uint16) (segFile, error) {
	p.mu.Lock()
	sf, ok := p.files[seg]
	p.mu.Unlock()
	if !ok {
		ids := segs() // not under mu: the segments' lock comes first (forget)
		p.mu.Lock()
		if sf, ok = p.files[seg]; !ok {
			sf, ok = p.open(fs, path, ids, seg)
		}
		p.mu.Unlock()
	}
	if !ok {
		return segFile{}, fmt.Errorf("payload in segment %d, which is not in the log", seg)
	}
	return sf, nil
}

// open opens the last of segs that seg names. Called with mu held.
func (p *payloads) open(fs aof.FS, path string, segs []uint64, seg uint16) (segFile, bool) {
	for i := len(segs) - 1; i >= 0; i-- {
		if uint16(segs[i]) != seg {
			continue
		}
		f, err := fs.OpenFile(aof.SegPath(path, segs[i]), 0, 0) // os.O_RDONLY
		if err != nil {
			return segFile{}, false
		}
		if p.files == nil {
			p.files = make(map[uint16]segFile)
		}
		sf := segFile{segs[i], f}
		p.files[seg] = sf
		return sf, true
	}
	return segFile{}, false
}

// SegReader reads payloads from the segments of a log before a Journal
// has it open: replay's, for the payloads it keeps on disk, should a
// replayed record read one (a dead-lettering, a move to another id).
type SegReader struct {
	l   Log
	pay payloads
}

// NewSegReader returns a reader of l's segments; Close closes it.
func NewSegReader(l Log) *SegReader { return &SegReader{l: l} }

// ReadPayload is Journal.ReadPayload.
func (r *SegReader) ReadPayload(seg uint16, off int64, n int) ([]byte, error) {
	return r.pay.read(r.l.FS, r.l.Path, func() []uint64 { return r.l.Segs }, seg, off, n)
}

// Close closes the segments open for reading.
func (r *SegReader) Close() { r.pay.close() }

// TailFromEnd makes the next Tail start at the log's end: the owner has
// just replayed every record (at start-up), and decided then what to keep
// on disk.
func (j *Journal) TailFromEnd() {
	p := &j.pay
	p.tailSeg, p.tailOff = j.Active(), j.seg.activeSize.Load()
}

// forget closes segment id's file once the segment left the manifest.
func (j *Journal) forget(id uint64) {
	p := &j.pay
	p.mu.Lock()
	defer p.mu.Unlock()
	if sf, ok := p.files[uint16(id)]; ok && sf.id == id {
		sf.f.Close()
		delete(p.files, uint16(id))
	}
}

// Gen changes when a rewrite's install drops every segment: a record Tail
// read before it names a segment that is gone. One atomic load.
func (j *Journal) Gen() uint64 { return j.pay.gen.Load() }

// Tail calls fn with every record written since the last call, oldest
// first, with its segment and the offset of the record's payload (its
// bytes after the frame) in the segment's file; rec aliases a buffer
// reused after fn returns. It stops at the active segment's end, or at a
// record it cannot read yet (a batch being written), and goes on from
// there next time; a segment dropped meanwhile is skipped. It returns the
// Gen the records were read under. O(bytes written since the last call).
// One caller at a time, off the owner's lock: after each tailSlice of
// work it pauses (Env.Pause).
func (j *Journal) Tail(fn func(seg uint64, off int64, rec []byte)) (gen uint64, err error) {
	gen = j.Gen()
	segs := j.Segments()
	if len(segs) == 0 {
		return gen, nil
	}
	p := &j.pay
	if p.retail.Swap(false) {
		p.tailSeg, p.tailOff = 0, 0
	}
	pause := j.env.Pause
	if pause == nil {
		pause = runtime.Gosched
	}
	now := j.env.Now
	if now == nil {
		now = time.Now
	}
	slice, n := now(), 0
	for _, id := range segs {
		if id < p.tailSeg {
			continue
		}
		if id > p.tailSeg {
			p.tailSeg, p.tailOff = id, aof.HeaderSize // the one before was read whole, or dropped
		}
		active := id == j.Active()
		to := int64(math.MaxInt64)
		if active {
			to = j.seg.activeSize.Load()
		}
		p.mu.Lock()
		f, err := j.file(id)
		p.mu.Unlock()
		if err != nil {
			return gen, err
		}
		if !active {
			st, err := f.Stat()
			if err != nil {
				return gen, err
			}
			to = st.Size()
		}
		var next int64
		p.tailBuf, next, err = aof.ReadRange(f, p.tailBuf, p.tailOff, to, func(off int64, rec []byte) {
			fn(id, off, rec)
			if n++; n%16 == 0 && now().Sub(slice) >= tailSlice {
				pause()
				slice = now()
			}
		})
		p.tailOff = next
		if err != nil || active || next < to {
			return gen, err // the active one's end, or a record not readable yet
		}
	}
	return gen, nil
}

// tailSlice is how long Tail works between pauses. The tail of a busy
// tenth of a second is thousands of records, milliseconds of work done
// without blocking; on a server of one CPU (GOMAXPROCS 1) that held the
// only P, and the replies, the timer's wake-up and every client waited
// behind it: jobs due meanwhile were served milliseconds late
// (docs/decisions/background-slices.md; finetimer.Pause says why a yield
// is not enough).
const tailSlice = 200 * time.Microsecond

// RetailFrom makes the next Tail read the log again from its first
// segment: the owner's state was rebuilt from the log (a reload), so what
// was read before is to be read again.
func (j *Journal) RetailFrom() { j.pay.retail.Store(true) }

// closePayloads closes the segments open for reading.
func (j *Journal) closePayloads() { j.pay.close() }

func (p *payloads) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, sf := range p.files {
		sf.f.Close()
		delete(p.files, k)
	}
}

// PayloadReads counts the payloads read back from disk since start.
func (j *Journal) PayloadReads() uint64 { return j.pay.reads.Load() }

// Warm reads segment id through once, without keeping it, so that the
// payloads its compaction reads back come from the page cache: one
// sequential read instead of a random one per job. It reads warmRead at a
// time and calls pause between reads (nil: runtime.Gosched): the caller
// runs on the server's goroutines, and a read through 64 MiB without a
// break held the only P for milliseconds at a time (a blocking read keeps
// it until the runtime's sysmon takes it back, up to 10 ms).
func (j *Journal) Warm(id uint64, pause func()) {
	f, err := j.opts.FS.OpenFile(aof.SegPath(j.opts.Path, id), 0, 0) // os.O_RDONLY
	if err != nil {
		return
	}
	defer f.Close()
	if pause == nil {
		pause = runtime.Gosched
	}
	buf := make([]byte, warmRead)
	for off := int64(0); ; off += int64(len(buf)) {
		if n, err := f.ReadAt(buf, off); err != nil || n < len(buf) {
			return
		}
		pause()
	}
}

// warmRead is how much Warm reads between pauses: about 50 µs of copying
// from the page cache.
const warmRead = 256 << 10
