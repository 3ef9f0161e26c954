package engine

import (
	"errors"
	"io"
	"sync/atomic"
	"time"

	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/queue"
	"github.com/delayd/delayd/record"
	"github.com/delayd/delayd/wheel"
)

// A cluster's snapshot streamed (docs/decisions/raft-snapshots.md): the
// state is encoded under one hold of the lock at an instant the caller can
// name a Raft index for, straight into a writer in pieces of a MiB (no
// copy of the whole state in memory), and the lock is let go at once. The
// records the group commits after that index, read after it, make it the
// state at any later index: the caller labels the snapshot with the last
// of them, so Raft need not catch the engine at a settled instant.

// captureFlush is how much encoded state a capture keeps before handing
// it to its writer.
var captureFlush = 1 << 20 // a variable for its tests

// CaptureTo writes the state (Snapshot's records, without the end mark)
// to w as it is at an instant when it is the committed state: a leader
// (lead) first waits (Quiesce, at most timeout) until every batch it made
// has committed; a follower's caller must keep committed batches from
// being applied until captured is called (nil: until the call returns).
// mark runs under the lock at that instant,
// before anything is written: the caller reads there the index the state
// is exact at, or says no (false). ok is false when it gave up (timeout,
// mark, or the engine's role not lead's). w is written by another
// goroutine (chunkWriter): give it a buffered file, not a socket; every
// write is done when CaptureTo returns. The lock is held for the state
// records and a freeze of the jobs (freeze: O(pages) for their records,
// copied page by page after it, copy-on-write; a memcpy of 16 bytes a job
// when one is reserved); the jobs are encoded from the copy after it is
// let go.
// The generation it returns is Generation's at the capture; a Reset while
// the copy is encoded fails the capture (errCaptureReset). captured, if
// not nil, is called once the state is held (the lock let go, before the
// encoding of the copy), or when the capture gave up.
func (e *Engine) CaptureTo(lead bool, timeout time.Duration, w io.Writer, mark func() bool, captured func()) (gen uint64, ok bool, err error) {
	bufs := e.captureBufs()
	defer bufs.release()
	cw := newChunkWriter(w, captureChunks, captureFlush+64<<10) // its 4 MiB allocated before the lock
	var fz *frozen
	capture := func() {
		if !mark() {
			return
		}
		ok, gen = true, e.repl.gen.Load()
		fz = e.freeze(cw, bufs)
	}
	if lead {
		e.quiesce(timeout, capture)
	} else {
		e.mu.Lock()
		if e.repl.following.Load() {
			capture()
		}
		e.mu.Unlock()
	}
	if captured != nil {
		captured() // a follower's applies go on: what is encoded now is the frozen copy
	}
	if fz != nil {
		err = e.encodeFrozen(fz)
	}
	if cerr := cw.close(); err == nil { // the last pieces are written with the lock let go
		err = cerr
	}
	return gen, ok, err
}

// errCaptureReset fails a capture whose state was replaced (a Reset, a
// FLUSHALL, Close) while its jobs were encoded from their copy.
var errCaptureReset = errors.New("engine: the state was reset during the capture")

// captureRun is a capture reading its frozen copy after the lock: a Reset
// must not unmap the arena under it (stopCapture).
type captureRun struct {
	cancel  atomic.Bool   // set by stopCapture: the copy is about to go
	reading chan struct{} // closed once the capture reads nothing more
}

// stopCapture makes a capture that reads its copy stop, and waits until
// it reads nothing more: what it shares with the state (the arena's pages)
// is about to be unmapped. Its capture fails (errCaptureReset). Called
// with mu held; the capture takes no lock until it is done reading.
func (e *Engine) stopCapture() {
	if c := e.repl.capture; c != nil {
		c.cancel.Store(true)
		<-c.reading
		e.repl.capture = nil
	}
}

// captureBuffers are the pages a capture copies records into, mapped
// before the lock is taken for the capture: neither the lock nor a write
// that copies a page pays for fresh memory's faults.
type captureBuffers struct {
	jobs   *jobs.FreezeBuf
	dues   *wheel.Dues
	mapped int64 // their bytes, in captureMapped
}

// captureMapped is the memory the captures under way mapped for their
// copies, which MappedBytes leaves out.
var captureMapped atomic.Int64

// captureBuffers maps room for the copy of the state as large as it is
// now (a page or two more by the capture's instant are mapped then).
func (e *Engine) captureBufs() captureBuffers {
	e.mu.Lock()
	slab, nodes := e.jobs.SlabPages(), 0
	if e.wheel != nil {
		nodes = e.wheel.Pages()
	}
	e.mu.Unlock()
	b := captureBuffers{jobs: jobs.NewFreezeBuf(slab), dues: wheel.NewDues(nodes)}
	b.mapped = b.jobs.Bytes() + b.dues.Bytes()
	captureMapped.Add(b.mapped)
	return b
}

func (b captureBuffers) release() {
	b.jobs.Release()
	b.dues.Release()
	captureMapped.Add(-b.mapped)
}

// frozen is the state of the jobs at a capture's instant, read after the
// lock is let go: every record (copied as read or before a change), each
// queue's ready order and name, the reservations' deadlines, and where
// the records go.
type frozen struct {
	t       *jobs.Table // frozen (jobs.Table.Freeze): records copied, arena shared
	dues    *wheel.Dues // nil: no job was reserved
	queues  []frozenQueue
	now     int64
	lastSID uint64
	seq     uint64
	enc     snapEncoder
	run     *captureRun
}

type frozenQueue struct {
	q    queue.Queue // its Order only: Whole reads lanes from it
	name []byte
	live bool
}

// freeze writes the snapshot's first records (the meta record and the
// state) to cw and freezes what the jobs' records are made of, for
// encodeFrozen to encode after the lock: the slab (jobs.Table.Freeze:
// O(pages), its pages copied into bufs later, each before its first
// change), each queue's ready order and name (O(queues and lanes)), the
// side tables (O(the jobs in them)), and when a job is reserved the
// wheel's deadlines (a memcpy, 16 bytes a job). With payloads on
// disk, whose log segments may be compacted away once the lock is gone,
// it encodes every job as before instead and returns nil; so it does
// while another capture reads its copy (the slab copies its pages for one
// at a time). Called with mu held.
func (e *Engine) freeze(cw *chunkWriter, bufs captureBuffers) *frozen {
	if e.wheel == nil || e.jobs.DiskInfo().Jobs > 0 || e.repl.capture != nil {
		e.writeSnapshot(cw)
		return nil
	}
	f := &frozen{now: e.wheel.Now(), lastSID: e.lastSID, seq: e.seq, enc: snapEncoder{cw: cw, out: cw.get()}}
	e.snapshotHead(f.now, f.enc.put)
	f.t = e.jobs.Freeze(bufs.jobs)
	f.queues = make([]frozenQueue, len(e.queues))
	reserved := false
	for qi := range e.queues {
		q := &e.queues[qi]
		if !q.live {
			continue // being freed (lazyfree.go): not in a snapshot
		}
		f.queues[qi] = frozenQueue{q: queue.Queue{Order: q.Order.Frozen()}, name: []byte(q.name), live: true}
		reserved = reserved || q.Reserved > 0
	}
	if reserved {
		e.wheel.CopyDues(bufs.dues)
		f.dues = bufs.dues
	}
	f.run = &captureRun{reading: make(chan struct{})}
	e.repl.capture = f.run
	return f
}

// captureStep, when set (tests), runs every captureStepJobs jobs of an
// encoding from a frozen copy, without the lock: writes made there must
// not reach the capture.
var captureStep func()

var captureStepJobs = 1024 // a variable for its tests

// encodeFrozen writes the jobs' records from f, as snapshotRecs writes
// them from the live state, and the jobs' end mark; then lets the arena's
// frees go back to their lists. Called without mu.
func (e *Engine) encodeFrozen(f *frozen) error {
	defer e.thaw(f)
	var r record.Rec // one for every job: see snapshotRecs
	n := 0
	stopped := false
	emit := func(s uint32, ready bool) bool {
		if n++; n%captureStepJobs == 0 {
			if f.run.cancel.Load() {
				stopped = true
				return false
			}
			if captureStep != nil {
				captureStep()
			}
		}
		r = f.wholeRec(s, ready)
		f.enc.put(&r)
		return true
	}
	for qi := range f.queues {
		if q := &f.queues[qi]; q.live {
			q.q.Order.Each(&f.t.Slab, func(s uint32) bool { return emit(s, true) })
			if stopped {
				return errCaptureReset
			}
		}
	}
	for s := range f.t.Len() {
		if j := f.t.At(s); f.queues[j.Queue].live && (j.State == jobs.StateDelayed || j.State == jobs.StateReserved) {
			if !emit(s, false) {
				return errCaptureReset
			}
		}
	}
	f.enc.put(&record.Rec{Op: record.Meta, Time: f.now, SID: f.lastSID, Seq: f.seq, Queue: record.JobsEndMark})
	f.enc.flush()
	return nil
}

// wholeRec is Engine.wholeRec of the copy.
func (f *frozen) wholeRec(s uint32, ready bool) record.Rec {
	var flags byte
	var deadline int64
	j := f.t.At(s)
	switch st := j.State; {
	case st == jobs.StateReserved:
		flags = record.FlagReserved
		deadline, _ = f.dues.Due(s)
	case ready && st == jobs.StateReady:
		flags = record.FlagReady
	}
	q := &f.queues[j.Queue]
	r := record.Whole(f.t, &q.q, s, q.name, f.now, flags)
	r.Deadline = deadline
	return r
}

// thaw ends a capture's reading: the slab's writes copy no page more and
// the arena's frees held for it go back to their lists, unless a Reset
// dropped the slab and the arena (and the capture) first.
func (e *Engine) thaw(f *frozen) {
	close(f.run.reading)
	e.mu.Lock()
	if e.repl.capture == f.run {
		e.jobs.Thaw()
		e.repl.capture = nil
	}
	e.mu.Unlock()
}

// captureChunks is how many pieces of a capture may wait for its writer.
const captureChunks = 4

// chunkWriter writes the pieces a capture hands it on a goroutine of its
// own: the writes into the page cache were a third of a capture's time
// under the lock (kernel time, at millions of jobs), and this way they run
// beside the encoding and the last ones after the lock is let go. At most
// captureChunks pieces wait; the encoder waits for a free one when the
// writer is behind, as it waited for the write before.
type chunkWriter struct {
	w          io.Writer
	full, free chan []byte
	done       chan struct{}
	err        error // the first write's error; read after done
}

func newChunkWriter(w io.Writer, n, size int) *chunkWriter {
	c := &chunkWriter{w: w, full: make(chan []byte, n), free: make(chan []byte, n), done: make(chan struct{})}
	for range n {
		c.free <- make([]byte, 0, size)
	}
	go c.run()
	return c
}

func (c *chunkWriter) run() {
	defer close(c.done)
	for b := range c.full {
		if c.err == nil {
			_, c.err = c.w.Write(b)
		}
		c.free <- b[:0]
	}
}

// get returns an empty piece to fill; put hands a filled one to the writer.
func (c *chunkWriter) get() []byte  { return <-c.free }
func (c *chunkWriter) put(b []byte) { c.full <- b }

// close waits until every piece put is written and returns the first
// error.
func (c *chunkWriter) close() error {
	close(c.full)
	<-c.done
	return c.err
}

// Generation counts the times the state was replaced (Reset, before a
// Restore or a rebuild): the records committed after a capture follow it
// only while it has not changed.
func (e *Engine) Generation() uint64 { return e.repl.gen.Load() }

// snapEncoder frames records into pieces of captureFlush for a
// chunkWriter.
type snapEncoder struct {
	cw       *chunkWriter
	out, buf []byte
}

func (c *snapEncoder) put(r *record.Rec) {
	c.buf = r.Encode(c.buf[:0])
	c.out = record.AppendSnap(c.out, c.buf)
	if len(c.out) >= captureFlush {
		c.cw.put(c.out)
		c.out = c.cw.get()
	}
}

// flush hands the last piece to the writer.
func (c *snapEncoder) flush() {
	if len(c.out) > 0 {
		c.cw.put(c.out)
	}
	c.out = nil
}

// writeSnapshot hands what appendSnapshot appends, but the end mark, to
// cw in pieces of captureFlush. Called with mu held.
func (e *Engine) writeSnapshot(cw *chunkWriter) {
	now := e.nowMs() // just Reset: no job
	if e.wheel != nil {
		now = e.wheel.Now()
	}
	enc := snapEncoder{cw: cw, out: cw.get()}
	e.snapshotRecs(now, enc.put)
	enc.flush()
}
