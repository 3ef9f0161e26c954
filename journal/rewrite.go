package journal

import (
	"errors"
	"time"

	"github.com/delayd/delayd/aof"
)

// A rewrite writes the owner's live state to a new log while writes go on,
// then switches to it. The owner walks its state (the journal knows no
// record but as bytes): under its lock it calls BeginRewrite, after which
// every record appended also goes to the rewrite's tail; it writes its
// snapshot to the Rewrite in chunks, checking Aborted under its lock; and
// Install appends the tail and switches. Since every record sets a state
// outright, the tail applied on top of the snapshot converges on the live
// state.

// WriteRewrite writes the rewrite begun at started (BeginRewrite), on the
// caller's goroutine, and installs it: head's records first, then the
// snapshot in chunks, chunk(i, add) adding the i-th's records under the
// owner's lock (false: Aborted, stop), pause letting writes go between
// chunks. It records how the rewrite ended (Finish).
func (j *Journal) WriteRewrite(started time.Time, head [][]byte, chunks int, chunk func(i int, add func([]byte)) bool, pause func()) error {
	err := func() error {
		rw, err := j.Create(started)
		if err != nil {
			return err
		}
		for _, b := range head {
			rw.Append(b)
		}
		for i := range chunks {
			if !chunk(i, rw.Append) {
				break
			}
			pause()
			if err := rw.Spill(); err != nil {
				return err
			}
		}
		return rw.Install()
	}()
	j.Finish(started, err)
	return err
}

// Rewrite is a new log being written.
type Rewrite struct {
	j       *Journal
	w       *aof.Writer
	tmp     string
	started time.Time
}

// Rewriting reports whether a rewrite is in progress.
func (j *Journal) Rewriting() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.rewriting
}

// BeginRewrite starts a rewrite: records appended from now on also go to
// its tail. The owner calls it under its lock, with its snapshot's plan
// taken, so the snapshot and the tail meet exactly. The new file is created
// by Create, outside the lock.
func (j *Journal) BeginRewrite() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.rewriting {
		return ErrRewriteRunning
	}
	j.rewriting, j.rwTail, j.aborted = true, nil, false
	return nil
}

// Create creates the rewrite's temporary file. On an error the caller
// ends the rewrite with Finish.
func (j *Journal) Create(started time.Time) (*Rewrite, error) {
	w, tmp, err := aof.CreateTemp(j.opts.FS, j.opts.Path)
	if err != nil {
		return nil, err
	}
	return &Rewrite{j: j, w: w, tmp: tmp, started: started}, nil
}

// Aborted reports whether a log write failed since BeginRewrite: the
// owner's state was reloaded, and the rewrite must stop.
func (j *Journal) Aborted() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.aborted
}

// Append adds one record of the snapshot.
func (r *Rewrite) Append(b []byte) { r.w.Append(b) }

// Spill writes what is buffered once it passes 1 MiB.
func (r *Rewrite) Spill() error {
	if r.w.Buffered() > 1<<20 {
		return r.fail(r.w.Flush())
	}
	return nil
}

func (r *Rewrite) fail(err error) error {
	if err != nil {
		r.w.Close()
		r.j.opts.FS.Remove(r.tmp)
	}
	return err
}

// Install writes and fsyncs the snapshot, appends the tail and switches
// the log to the new file. On an error the new file is removed.
func (r *Rewrite) Install() error {
	j, w := r.j, r.w
	if err := w.Flush(); err != nil {
		return r.fail(err)
	}
	if err := w.Sync(); err != nil {
		return r.fail(err)
	}
	// Switch: the flusher is idle (wmu) and nothing is appended (mu).
	// Everything logged since the plan is in rwTail, including what is
	// still pending for the old log, so the new log covers it.
	j.wmu.Lock()
	j.mu.Lock()
	if j.aborted {
		j.rwTail, j.rewriting = nil, false
		j.mu.Unlock()
		j.wmu.Unlock()
		return r.fail(errRewriteAborted)
	}
	eachRecord(j.rwTail, w.Append)
	err := w.Flush()
	var dropped []uint64
	if err == nil && j.seg.active.Load() != 0 {
		dropped, err = j.installSegment(r.tmp)
	} else if err == nil {
		err = aof.Install(j.opts.FS, r.tmp, j.opts.Path)
	}
	if err != nil && !errors.Is(err, aof.ErrRenameNotDurable) {
		j.rwTail, j.rewriting = nil, false
		j.mu.Unlock()
		j.wmu.Unlock()
		return r.fail(err)
	}
	old := j.log
	j.log = w
	last, size := j.ticket, w.Size()
	j.seg.activeSize.Store(size)
	j.pend, j.rwTail, j.rewriting = j.pend[:0], nil, false
	j.mu.Unlock()
	j.wmu.Unlock()
	j.dmu.Lock()
	j.durable = max(j.durable, last)
	j.info.BaseSize, j.info.Size = size, size
	j.dmu.Unlock()
	j.dcond.Broadcast() // before the close: the writes the new log took wait for no fsync
	j.smu.Lock()        // not while an fsync uses it (Sync)
	old.Close()
	j.wmu.Lock()
	j.closeRetired()
	j.wmu.Unlock()
	j.smu.Unlock()
	j.removeSegments(dropped)
	return err
}

// Finish records how the rewrite begun at started ended (r may be nil if
// Create failed), and ends it if it failed.
func (j *Journal) Finish(started time.Time, err error) {
	j.dmu.Lock()
	j.info.LastRewrite, j.info.RewriteTook, j.info.RewriteErr = time.Now(), time.Since(started), err
	if err == nil {
		j.info.Rewrites++
	}
	j.dmu.Unlock()
	if err != nil {
		j.mu.Lock()
		j.rewriting, j.rwTail = false, nil
		j.mu.Unlock()
	}
}

// Sizes returns the log's size now and after the last rewrite.
func (j *Journal) Sizes() (size, base int64) {
	j.wmu.Lock()
	size = j.seg.sealed.Load() + j.log.Size()
	j.wmu.Unlock()
	j.dmu.Lock()
	defer j.dmu.Unlock()
	return size, j.info.BaseSize
}
