package engine

import (
	"errors"
	"time"

	"github.com/delayd/delayd/bucket"
	"github.com/delayd/delayd/finetimer"
	"github.com/delayd/delayd/record"
)

// The far-future buckets' file work (far.go has what they are and how a job
// goes out and comes back): the loader's rounds, merges of mostly dead
// runs, the seal of a full open bucket, checkpoints, and the pacing that
// lets clients in between, each under far.work and off the engine's lock
// but for the short holds that decide.

// loadChunk bounds the sorted entries a load round plans per run.
const loadChunk = 16 << 10

// loader is the goroutine of far jobs' loads: a round every quarter of
// the horizon brings back the jobs due within half of it, and rounds follow
// at once while one is cut by its chunk. It is not the spiller's: behind
// spills and seals a round came late, and a loop of rounds until one took
// none never ended at a steady rate, holding far.work from a compaction
// (docs/decisions/far-future-buckets.md, "Loads"). A long seal or merge
// runs rounds in its own pauses (farPacer).
func (e *Engine) loader() {
	defer e.bg.Done()
	t := time.NewTicker(e.loadEvery())
	defer t.Stop()
	ft := e.pauseTimer()
	if ft != nil {
		defer ft.Close()
	}
	for {
		select {
		case <-e.quit:
			return
		case <-t.C:
		}
		e.loadFar(ft)
	}
}

// loadFar runs load rounds, each with far.work, while one is cut.
func (e *Engine) loadFar(ft *finetimer.Timer) {
	for {
		e.far.work.Lock()
		more := e.loadRound(ft)
		e.far.work.Unlock()
		if !more {
			return
		}
	}
}

// loadRound brings back the far jobs due within half the horizon,
// restated: planned under the lock (no I/O, O(jobs due)), read without it,
// taken and placed under it, a chunk at a time. It says whether the plan
// was cut (more may be due now). Called with far.work held.
func (e *Engine) loadRound(ft *finetimer.Timer) bool {
	f := &e.far
	f.loaded.Store(time.Now().UnixNano())
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return false
	}
	p := f.set.Due(e.nowMs()+e.opts.Horizon/2, loadChunk)
	e.mu.Unlock()
	js, err := f.set.ReadDue(p, e.farPacer(ft, false))
	if err != nil {
		e.opts.Logger.Error().Err(err).Msg("loading far-future jobs")
		return false
	}
	took := 0
	for i := 0; ; i += compactChunk {
		wr, err := e.begin(0)
		if err != nil {
			return false
		}
		for k := i; k < min(i+compactChunk, len(js)); k++ {
			qi, ok := e.queueFor([]byte(js[k].Queue), false)
			if ok && f.set.Take(&js[k]) {
				e.queues[qi].far--
				e.queues[qi].Delayed--
				e.njobs--
				if e.back(&js[k]) {
					e.serve(qi)
				}
				took++
			}
		}
		last := i+compactChunk >= len(js)
		if last {
			f.set.Settle(p)
		}
		wr.end()
		spillYield(ft)
		if last {
			return p.Cut() && took > 0 // a cut round that took nothing would plan the same again
		}
	}
}

// mergeFar merges runs loads and cancels left mostly dead (which, and when,
// is Set.PlanMerge's): the new run written without the lock, its jobs
// re-pointed a chunk a hold, then a checkpoint that names it and drops the
// old ones. A crash before that checkpoint finds the old runs named and
// the new one not, which a start removes: a merge changes no job and logs
// nothing. Under far.work, so a load's Due..Take never straddles a Step.
func (e *Engine) mergeFar(ft *finetimer.Timer) {
	if !e.far.mergeOnce(e, ft) {
		return
	}
	if err := e.checkpoint(0, e.farPacer(ft, true)); err != nil && !errors.Is(err, ErrClosed) {
		e.opts.Logger.Warn().Err(err).Msg("checkpointing a merge of far-future runs")
	}
}

// mergeOnce runs one merge, if one is planned, and says whether it did.
func (f *farState) mergeOnce(e *Engine, ft *finetimer.Timer) bool {
	f.work.Lock()
	defer f.work.Unlock()
	e.mu.Lock()
	set := f.set
	var m *bucket.Merge
	if !e.closed && !f.before {
		m = set.PlanMerge()
	}
	e.mu.Unlock()
	if m == nil {
		return false
	}
	r, err := set.WriteMerge(m, e.farPacer(ft, true)) // runs do not change, and none closes under far.work
	e.mu.Lock()
	switch {
	case f.set != set: // a reload reopened the buckets: its start removes the file
		e.mu.Unlock()
		if r != nil {
			r.Close()
		}
		return false
	case err != nil:
		set.AbortMerge(m)
		e.mu.Unlock()
		e.opts.Logger.Warn().Err(err).Msg("merging far-future runs")
		return false
	}
	err = set.BeginMerge(m, r)
	e.mu.Unlock()
	if err != nil {
		bucket.RemoveRuns(e.j.fs, e.j.path, []uint64{r.ID})
		return false
	}
	for done := false; !done; {
		e.mu.Lock()
		if f.set != set || e.closed {
			e.mu.Unlock()
			return false
		}
		done = set.Step(m, compactChunk)
		e.mu.Unlock()
		if mergeStepped != nil {
			mergeStepped()
		}
		spillYield(ft)
	}
	return true
}

// mergeStepped, when set (tests), is called after each Step of a merge.
var mergeStepped func()

// farSlice is how long file work under far.work (a run's write, a load's
// reads) goes on before it pauses: a rewrite chunk's length.
const farSlice = 100 * time.Microsecond

// farPause is farPacer's pause (a variable for tests).
var farPause = finetimer.Pause

// farPacer returns the yield a bucket's long file work calls before each
// job: every farSlice it pauses on ft (nil: a Gosched), so that on one CPU
// the clients' requests run in between. Without it a checkpoint's write of
// a 500k-job bucket, a pread a payload, kept the only P for its whole
// length (a syscall that short keeps it) but for a preemption every 10 ms,
// and each request waited for one: bench/loadgen's p99.9 went from 7 ms
// to 305-416 ms with the buckets on (docs/decisions/compaction-stalls.md, "With the
// far-future buckets").
//
// With loads (the write of a run: a seal, a compaction's checkpoint, a
// merge) it also runs a load round there when one is due (loadEvery): a
// seal of a million jobs takes seconds, and the jobs due meanwhile must
// come back on time. A load may run in the middle of such a write: it
// takes jobs (kills bits the write does not read, which Install carries
// over), reads entries and runs that stay until the write is installed,
// after it on this goroutine, and logs after the checkpoint's mark, as a
// client's cancel does. Called with far.work held.
func (e *Engine) farPacer(ft *finetimer.Timer, loads bool) func() {
	var since time.Time // from the first call: a pacer is made before far.work is taken
	return func() {
		if since.IsZero() {
			since = farNow()
			return
		}
		if farNow().Sub(since) < farSlice { // a vDSO read: tens of ns against a job's µs
			return
		}
		farPause(ft)
		if loads && time.Since(time.Unix(0, e.far.loaded.Load())) >= e.loadEvery() {
			e.loadRound(ft) // one: the loader's cut rounds follow once the write is done
		}
		since = farNow()
	}
}

// loadEvery is how often the far jobs' load rounds run: a quarter of the
// horizon, so that each brings back what is due within half of it well
// ahead.
func (e *Engine) loadEvery() time.Duration {
	return time.Duration(e.opts.Horizon/4) * time.Millisecond
}

// farNow is farPacer's clock: a variable for tests, whose fake time does
// not pass while a goroutine works.
var farNow = time.Now

// checkpoint writes a checkpoint of the buckets before a compaction drops
// segment victim: captured under the lock with its mark logged, then its
// frozen buckets written as runs, the log made durable up to the mark, and
// the file written (finishCheckpoint). What its runs hold no longer needs
// the log before the mark.
func (e *Engine) checkpoint(victim uint64, pace func()) error {
	e.far.work.Lock()
	defer e.far.work.Unlock()
	wr, err := e.begin(0)
	if err != nil {
		return err
	}
	e.far.victim = max(e.far.victim, victim)
	cp, t := e.captureFar(wr.now)
	wr.end()
	return e.finishCheckpoint(cp, t, pace)
}

// captureFar captures a checkpoint and logs its mark, at now; it returns
// the checkpoint and the mark's ticket. Called with mu and far.work held.
func (e *Engine) captureFar(now int64) (*bucket.Checkpoint, uint64) {
	e.far.mark++
	cp := e.far.set.Checkpoint(bucket.Pos{Seg: e.far.mark})
	return cp, e.logRec(e.farMark(now))
}

// farMark is the mark of the last checkpoint captured: a meta record.
func (e *Engine) farMark(now int64) *record.Rec {
	return &record.Rec{Op: record.Meta, Time: now, SID: e.lastSID, Seq: e.seq, Queue: record.FarMark(e.far.mark)}
}

// appendFar appends to a snapshot (its end mark moved after them) the far
// jobs as of cp, captured with it at ticket t, as add records at now: a
// backup holds every job. The checkpoint is written first (its runs are
// what is read, each through once). Called with far.work held, without
// mu.
func (e *Engine) appendFar(out []byte, cp *bucket.Checkpoint, t uint64, now int64, ft *finetimer.Timer) ([]byte, error) {
	pace := e.farPacer(ft, false)
	if err := e.finishCheckpoint(cp, t, pace); err != nil {
		return nil, err
	}
	out = out[:len(out)-1]
	var r record.Rec
	var buf []byte
	err := cp.Each(func(j *bucket.Job) error {
		pace()
		if err := farRec(&r, j, now); err != nil {
			return err
		}
		buf = r.Encode(buf[:0])
		out = record.AppendSnap(out, buf)
		return nil
	})
	return record.EndSnap(out), err
}

// finishCheckpoint writes cp, captured with its mark at ticket t. Called
// with far.work held, without mu.
func (e *Engine) finishCheckpoint(cp *bucket.Checkpoint, t uint64, pace func()) error {
	f := &e.far
	set := f.set
	for _, fz := range cp.Frozen() {
		r, err := set.WriteFrozen(fz, pace)
		if err != nil {
			return err
		}
		e.mu.Lock()
		if f.set != set {
			e.mu.Unlock()
			r.Close()
			return errReopened
		}
		f.set.Install(fz, r)
		e.mu.Unlock()
	}
	if err := e.WaitDurable(t); err != nil {
		return err
	}
	if err := e.journal.Sync(); err != nil {
		return err
	}
	if err := bucket.WriteCheckpoint(e.j.fs, e.j.path, cp); err != nil {
		return err
	}
	e.mu.Lock()
	if f.set != set {
		e.mu.Unlock()
		return errReopened
	}
	gone := f.set.Installed(cp)
	e.mu.Unlock()
	bucket.RemoveRuns(e.j.fs, e.j.path, gone)
	return nil
}

// errReopened is a checkpoint given up because a reload reopened the
// buckets meanwhile.
var errReopened = errors.New("the far-future buckets were reopened by a reload")

// reopenFar opens the buckets again from their checkpoint for a reload
// (logFailed): its replay of the whole log is a start's, and so is what it
// needs of them. The Set before is left to the garbage collector, not
// closed (a checkpoint or a load may be reading it without the lock; they
// see the new one when they take it, and give up). Called with mu held.
func (e *Engine) reopenFar() error {
	e.far.set, e.far.opened = nil, nil
	return e.openFar()
}

// sealFar writes the frozen buckets (an open bucket full at 1M jobs) as a
// checkpoint's runs, so that memory holds at most one open bucket.
func (e *Engine) sealFar(ft *finetimer.Timer) {
	e.mu.Lock()
	n := len(e.far.set.Frozen())
	e.mu.Unlock()
	if n > 0 {
		if err := e.checkpoint(0, e.farPacer(ft, true)); err != nil && !errors.Is(err, ErrClosed) {
			e.opts.Logger.Warn().Err(err).Msg("sealing the far-future buckets")
		}
	}
}
