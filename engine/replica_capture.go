package engine

import (
	"io"
	"time"

	"github.com/delayd/delayd/record"
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
// to w at an instant when it is the committed state: a leader (lead)
// first waits (Quiesce, at most timeout) until every batch it made has
// committed; a follower's caller must keep committed batches from being
// applied during the call. mark runs under the lock at that instant,
// before anything is written: the caller reads there the index the state
// is exact at, or says no (false). ok is false when it gave up (timeout,
// mark, or the engine's role not lead's). w is written by another
// goroutine (chunkWriter), mostly while the lock is held: give it a
// buffered file, not a socket; every write is done when CaptureTo
// returns. O(jobs) under the lock; the generation it returns is
// Generation's at the capture.
func (e *Engine) CaptureTo(lead bool, timeout time.Duration, w io.Writer, mark func() bool) (gen uint64, ok bool, err error) {
	var cw *chunkWriter
	capture := func() {
		if !mark() {
			return
		}
		ok, gen = true, e.repl.gen.Load()
		cw = newChunkWriter(w, captureChunks, captureFlush+64<<10)
		e.writeSnapshot(cw)
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
	if cw != nil {
		err = cw.close() // the last pieces are written with the lock let go
	}
	return gen, ok, err
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

// writeSnapshot hands what appendSnapshot appends, but the end mark, to
// cw in pieces of captureFlush. Called with mu held.
func (e *Engine) writeSnapshot(cw *chunkWriter) {
	now := e.nowMs() // just Reset: no job
	if e.wheel != nil {
		now = e.wheel.Now()
	}
	out := cw.get()
	var buf []byte
	put := func(r *record.Rec) {
		buf = r.Encode(buf[:0])
		out = record.AppendSnap(out, buf)
		if len(out) >= captureFlush {
			cw.put(out)
			out = cw.get()
		}
	}
	e.snapshotRecs(now, put)
	if len(out) > 0 {
		cw.put(out)
	}
}
