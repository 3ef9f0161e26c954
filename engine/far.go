package engine

import (
	"bytes"
	"cmp"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/delayd/delayd/bucket"
	"github.com/delayd/delayd/finetimer"
	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/record"
)

// Far-future jobs in buckets on disk (docs/decisions/far-future-buckets.md;
// what to read, keep and drop is package bucket's). With
// Options.FarBuckets the spiller moves a job whose payload it would keep
// on disk out of memory into the open bucket (out); an operation that
// names it by id brings it back first, restated (fault); ahead of its time
// the loader brings it back, restated (loadFar); a compaction and a
// rewrite checkpoint the buckets before a segment goes (checkpoint). A far
// job stays its queue's delayed job and one of njobs; its bytes leave
// its queue's (they count memory).
//
// The log says everything: a checkpoint is derived from it up to its mark
// (a meta record, record.FarMark), and replay skips, before the mark of
// the checkpoint it opened, every record of a job that checkpoint's runs
// hold (farSkips); nothing about going out is logged, and each way back
// is an add record, which replay meets before any record of the job's.

// farState is the engine's side of the buckets; set is nil when they are
// off.
type farState struct {
	set *bucket.Set
	// work makes the bucket's file work (a checkpoint's seals, a load's
	// reads) one at a time: a seal's reads must not meet a checkpoint's
	// closing of a run. Taken before mu, never under it.
	work sync.Mutex
	mark uint64 // the last mark logged, or the opened checkpoint's
	// victim is the last segment a compaction checkpointed for: no job
	// goes out with its payload there (the tail lags), since the drop
	// follows with no checkpoint between.
	victim uint64
	// pre is, during a DEL, the far jobs in runs of the queues it names,
	// read before it took the lock (readDoomed), by name.
	pre map[string][]bucket.Job
	// before says the start-up's replay has not yet met the opened
	// checkpoint's mark; opened is what its runs hold by queue, counted
	// in the queues when it does.
	before bool
	opened map[string]int
	// loaded is when the last load round began (UnixNano), for a long
	// write that runs them in its pauses (farPacer).
	loaded atomic.Int64
}

// farKey is jobs.FarKey, a variable for tests that make keys meet.
var farKey = jobs.FarKey

// farLog reads a bucket's payloads from the log.
type farLog struct{ e *Engine }

func (l farLog) ReadPayload(seg uint16, off int64, n int) ([]byte, error) {
	return l.e.journal.ReadPayload(seg, off, n)
}

func (l farLog) ReadSpan(seg uint16, off int64, dst []byte) (int, error) {
	return l.e.journal.ReadSpan(seg, off, dst)
}

// openFar opens the buckets the checkpoint beside the log names, before
// the log is replayed.
func (e *Engine) openFar() error {
	s, err := bucket.Open(bucket.Options{FS: e.j.fs, Path: e.j.path, Log: farLog{e}, Grain: max(1, e.opts.Horizon/8)})
	if err != nil {
		return err
	}
	f := &e.far
	f.set, f.mark, f.opened = s, s.Pos().Seg, s.Opened()
	f.before = f.mark != 0
	return nil
}

// farSkips says whether replay skips r: a record of a job the opened
// checkpoint holds, before its mark (the run has the job as of the mark).
// At the mark the runs' jobs join their queues' counts.
func (e *Engine) farSkips(r *record.Rec) bool {
	f := &e.far
	if n, ok := record.MarkOf(r); ok {
		if f.before && n == f.mark {
			e.countOpened()
		}
		f.mark = max(f.mark, n) // a mark logged by a checkpoint a crash left unwritten
		return false
	}
	switch r.Op {
	case record.Add, record.Cancel, record.Pop, record.Reserve, record.Move, record.Requeue:
	default:
		return false
	}
	if !f.before || r.ID != nil || !f.set.InRun(r.SID) { // a client id's: apply's farSkipsID
		return false
	}
	e.lastSID, e.seq = max(e.lastSID, r.SID), max(e.seq, r.Seq)
	return true
}

// farSkipsID says whether replay, before the opened checkpoint's mark and
// after time moved to r's (which may end an earlier job of its id, say by
// an ack deadline into a dead-letter queue), skips r, an add record of a
// client id: the one a run's job was taken out of memory from (the
// spiller tails add records only, and takes the job only if its add order
// is still the record's). Its id's key alone cannot say it: a job of the
// id may have come and gone before, or the job itself been added earlier
// and moved since. So the run's copy is read (a pread or three, a far job
// of a client id whose record is still in the log) and its add order
// compared; the job's earlier state replay made, if any, goes, as the
// record would have replaced it (docs/decisions/far-future-ids.md).
func (e *Engine) farSkipsID(r *record.Rec) bool {
	f := &e.far
	key := farKey(unsafe.String(unsafe.SliceData(r.Queue), len(r.Queue)), r.ID)
	if !f.set.InRun(key) {
		return false
	}
	// An add order is one job's (and a key's other jobs stay in memory).
	if fj, ok := e.farGet(key); !ok || fj.Seq != r.Seq || fj.Queue != string(r.Queue) {
		return false
	}
	if qi, ok := e.queueFor(r.Queue, false); ok {
		if s, ok := e.replaced(qi, r.ID); ok {
			e.jobs.DropIdent(s)
			e.remove(s)
		}
	}
	e.seq = max(e.seq, r.Seq)
	return true
}

// countOpened counts the opened runs' jobs in their queues. Called with mu
// held, at the opened checkpoint's mark (or at replay's end, which has
// none if the log lost it).
func (e *Engine) countOpened() {
	f := &e.far
	for name, n := range f.opened {
		qi, _ := e.queueFor([]byte(name), true)
		e.queues[qi].Delayed += n
		e.queues[qi].far += n
		e.njobs += n
	}
	f.before, f.opened = false, nil
}

// out moves the job in slot s, delayed beyond the horizon with its payload
// at offset off of segment seg, into the open bucket: its head (its add
// record without what the bucket keeps) and where its payload lies. It
// leaves memory as a removal would, but stays its queue's delayed job. It
// reports whether it went. Called with mu held.
func (e *Engine) out(s uint32, seg uint64, off int64) bool {
	if seg <= e.far.victim {
		return false
	}
	j := e.jobs.At(s)
	q := &e.queues[j.Queue]
	r := e.addRec(s, 0)
	key, id := j.SID, r.ID
	if id != nil {
		if key = farKey(q.name, id); e.far.set.Has(key) {
			return false // another (queue, id) of its key is far: it stays (far-future-ids.md)
		}
	}
	loc := bucket.Loc{File: seg, Off: off, N: uint32(len(r.Payload))}
	r.Queue, r.Payload, r.SID, r.Seq, r.Due = nil, nil, 0, 0, 0
	e.j.scratch = r.Encode(e.j.scratch[:0])
	if e.far.set.Add(j.Due, j.Seq, key, q.name, e.j.scratch, loc) != nil {
		return false // no bucket slot left: it keeps its payload on disk alone
	}
	e.wheel.Remove(s)
	q.far++
	q.Order.Leave(&e.jobs.Slab, s)
	size := jobs.DataSize(j)
	q.Bytes -= size
	e.j.live.Sub(e.jobs.Home(s), size) // the checkpoint before its segment's drop covers it
	e.jobs.Delete(&q.run, s, id)       // id aliases the arena: before Free
	e.jobs.Free(s)
	return true
}

// outKept moves out, once at start, the jobs replay kept on disk (its
// locators: the tail starts after them), a chunk of slots per lock hold.
func (e *Engine) outKept(ft *finetimer.Timer) {
	for s := uint32(0); ; {
		e.mu.Lock()
		if e.closed || e.journal.Rewriting() {
			e.mu.Unlock()
			return
		}
		segs, horizon := e.journal.Segments(), e.nowMs()+e.opts.Horizon
		for end := min(s+compactScan, e.jobs.Len()); s < end; s++ {
			j := e.jobs.At(s)
			if j.Flags&jobs.FlagOnDisk == 0 || j.State != jobs.StateDelayed || j.Due <= horizon {
				continue
			}
			seg, off, _ := jobs.LocOf(j)
			if i := slices.IndexFunc(segs, func(id uint64) bool { return uint16(id) == seg }); i >= 0 {
				e.out(s, segs[i], off)
			}
		}
		done := s >= e.jobs.Len()
		e.mu.Unlock()
		if done {
			return
		}
		spillYield(ft)
	}
}

// lookup is e.jobs.Lookup for an operation that changes the job it finds:
// a far job of the id is brought back first (fault). Replay never faults:
// the live fault's restatement is in the log before the operation.
func (e *Engine) lookup(qi uint32, id []byte) (uint32, bool) {
	s, ok := e.jobs.Lookup(&e.queues[qi].run, qi, id)
	if ok || e.far.set == nil || e.j.replaying {
		return s, ok
	}
	fj, ok := e.farJob(qi, id)
	if !ok {
		return 0, false
	}
	e.unfar(qi, fj.SID)
	e.back(&fj)
	return e.jobs.Lookup(&e.queues[qi].run, qi, id)
}

// farInfo is DELAY.GET's view of a far job of queue qi: rendered from its
// head, not brought back (a read logs nothing). Called with mu held.
func (e *Engine) farInfo(qi uint32, id []byte) (JobInfo, bool) {
	if e.far.set == nil {
		return JobInfo{}, false
	}
	fj, ok := e.farJob(qi, id)
	if !ok {
		return JobInfo{}, false
	}
	sj, ok := farScanJob(&fj)
	sj.ID = slices.Clone(id)
	return sj.JobInfo, ok
}

// farScanJob is DELAY.SCAN's view of a far job: its head is its add record
// but for what the bucket keeps.
func farScanJob(fj *bucket.Job) (ScanJob, bool) {
	var r record.Rec
	if farRec(&r, fj, 0) != nil {
		return ScanJob{}, false
	}
	sj := ScanJob{JobInfo: JobInfo{ID: farID(&r), Queue: []byte(fj.Queue), Payload: fj.Payload,
		State: jobs.StateNames[jobs.StateDelayed], Due: fj.Due, Deliveries: r.Deliveries, Group: slices.Clone(r.Group), Priority: r.Priority,
		Reason: string(r.Reason)},
		Seq: fj.Seq, AckTimeout: r.AckTimeout, Retry: r.Retry, DeadLetter: slices.Clone(r.DeadLetter)}
	if o := r.Origin; o != nil {
		sj.Origin = slices.Clone(o.Queue)
		sj.OriginOpts = jobs.Origin{AckTimeout: o.AckTimeout, Retry: o.Retry, DeadLetter: slices.Clone(o.DeadLetter)}
	}
	return sj, true
}

// farRec decodes into r the add record that restates fj, a far job, at
// now: its head with what the bucket keeps put back. A client id's job
// keeps its id (fj.SID is its key, jobs.FarKey).
func farRec(r *record.Rec, fj *bucket.Job, now int64) error {
	if err := r.Decode(fj.Head); err != nil {
		return err
	}
	if r.Op != record.Add {
		return record.ErrBad
	}
	r.Time, r.Queue, r.Seq, r.Due, r.Payload = now, []byte(fj.Queue), fj.Seq, fj.Due, fj.Payload
	if r.ID == nil {
		r.SID = fj.SID
	}
	return nil
}

// farID is the id of r, a far job's restatement (farRec), as a client
// sees it: a copy.
func farID(r *record.Rec) []byte {
	if r.ID != nil {
		return slices.Clone(r.ID)
	}
	var buf [jobs.SIDLen]byte
	return slices.Clone(jobs.RenderSID(&buf, r.SID))
}

// farJob reads the far job of queue qi with the id id: a server id's by
// its number, a client id's by its key (jobs.FarKey), confirmed against
// its head, as two ids may share a key. A pread or three under the lock,
// as a payload on disk. Called with mu held.
func (e *Engine) farJob(qi uint32, id []byte) (bucket.Job, bool) {
	name := e.queues[qi].name
	if sid, ok := jobs.ParseSID(id); ok && sid&jobs.FarKeyBit == 0 && e.far.set.Has(sid) {
		if fj, ok := e.farGet(sid); ok && fj.Queue == name {
			return fj, true
		}
	}
	key := farKey(name, id)
	if !e.far.set.Has(key) {
		return bucket.Job{}, false
	}
	fj, ok := e.farGet(key)
	var r record.Rec
	if !ok || fj.Queue != name || r.Decode(fj.Head) != nil || !bytes.Equal(r.ID, id) {
		return bucket.Job{}, false
	}
	return fj, true
}

// farGet is Set.Get, its error logged.
func (e *Engine) farGet(key uint64) (bucket.Job, bool) {
	fj, ok, err := e.far.set.Get(key)
	if err != nil {
		e.opts.Logger.Error().Err(err).Uint64("sid", key).Msg("reading a far-future job")
		return bucket.Job{}, false
	}
	return fj, ok
}

// scanFar is a DELAY.SCAN page of queue qi with the buckets on: the walk
// of the buckets, then the slab's (jobs.Table.Scan), then the buckets'
// again from where a job entering them stood when the slab's began, which
// also looks up in memory the jobs of dead entries it passes (bucket.Scan
// says why each job there for the whole scan is met). Each walk visits
// what one page of the slab's would. Called with mu held.
func (e *Engine) scanFar(qi uint32, name []byte, cursor uint64, count int, out []ScanJob) (uint64, []ScanJob, error) {
	c := e.far.set.Resume(bucket.ParseCursor(cursor))
	visit := max(count*jobs.ScanVisit, jobs.ScanMinVisit)
	var buf [jobs.SIDLen]byte
	for len(out) < count {
		if c.Phase == bucket.ScanSlab {
			next := e.jobs.Scan(qi, c.Slot, count-len(out), func(s uint32) { out = append(out, e.scanJob(s, name)) })
			if next != 0 {
				c.Slot = next
				break
			}
			c = bucket.ScanCursor{Phase: bucket.ScanTail, At: c.Tail}
			continue
		}
		var gone []bucket.Job
		g := &gone
		if c.Phase == bucket.ScanBuckets {
			g = nil
		}
		js, at, done, err := e.far.set.Scan(e.queues[qi].name, c.At, count-len(out), visit, g)
		if err != nil {
			return 0, nil, err
		}
		for i := range js {
			if sj, ok := farScanJob(&js[i]); ok {
				out = append(out, sj)
			}
		}
		for i := range gone {
			id := jobs.RenderSID(&buf, gone[i].SID)
			var r record.Rec
			if gone[i].SID&jobs.FarKeyBit != 0 && r.Decode(gone[i].Head) == nil {
				id = r.ID
			}
			if s, ok := e.jobs.Lookup(&e.queues[qi].run, qi, id); ok {
				out = append(out, e.scanJob(s, name))
			}
		}
		c.At = at
		switch {
		case !done:
			return c.Encode(), out, nil
		case c.Phase == bucket.ScanTail:
			return 0, out, nil
		}
		c = bucket.ScanCursor{Phase: bucket.ScanSlab, Tail: e.far.set.Tail()}
	}
	return c.Encode(), out, nil
}

// farUpcoming merges into mem, a page of DELAY.UPCOMING from memory, the
// far jobs of the named queue after the cursor (Set.Earliest: their runs'
// sorted entries, read under the lock, an admin's listing), and returns the
// first count. The cursor is after its job's (due, add order) if that job
// is still delayed at its time, else at its time, as jobs.Listing.After.
// Called with mu held.
func (e *Engine) farUpcoming(name []byte, count int, after *Cursor, mem []Upcoming) []Upcoming {
	due, seq := int64(math.MinInt64), uint64(0)
	if qi, ok := e.queueFor(name, false); ok && after != nil {
		due, seq = after.Time-1, math.MaxUint64
		if s, ok := e.jobs.Lookup(&e.queues[qi].run, qi, after.ID); ok && e.jobs.At(s).Due == after.Time {
			due, seq = after.Time, e.jobs.At(s).Seq
		} else if fj, ok := e.farJob(qi, after.ID); ok && fj.Due == after.Time {
			due, seq = after.Time, fj.Seq
		}
	}
	fs, err := e.far.set.Earliest(string(name), due, seq, count)
	if err != nil {
		e.opts.Logger.Error().Err(err).Msg("listing far-future jobs")
	}
	var r record.Rec
	for i := range fs {
		if f := &fs[i]; farRec(&r, f, 0) == nil {
			mem = append(mem, Upcoming{ID: farID(&r), Due: f.Due, Payload: f.Payload, seq: f.Seq})
		}
	}
	slices.SortFunc(mem, func(a, b Upcoming) int { return cmp.Or(cmp.Compare(a.Due, b.Due), cmp.Compare(a.seq, b.seq)) })
	return mem[:min(len(mem), count)]
}

// unfar takes sid's job out of the buckets, if they hold it, with its
// count: it is being placed in queue qi (a restatement replayed, a fault, a
// load) or dropped with it (DEL). Called with mu held.
func (e *Engine) unfar(qi uint32, sid uint64) {
	if e.far.set != nil && e.far.set.Fault(sid) {
		e.queues[qi].far--
		e.queues[qi].Delayed--
		e.njobs--
	}
}

// unfarID is unfar for a client id's job: the far job of (qi, id), if
// there is one, restated. Before the opened checkpoint's mark the runs are
// as of the mark: a job of theirs met in replay then is an earlier state
// of it or an earlier job of its id (farSkipsID). Called with mu held.
func (e *Engine) unfarID(qi uint32, id []byte) {
	f := &e.far
	if f.set == nil || f.before || !f.set.Has(farKey(e.queues[qi].name, id)) {
		return
	}
	if fj, ok := e.farJob(qi, id); ok {
		e.unfar(qi, fj.SID)
	}
}

// back places fj, a job taken out of the buckets, and restates it: an add
// record of it whole, which replay meets before any record of the job's
// own. It reports whether the job was due already (the caller serves its
// queue's waiters). Called with mu held, writes allowed.
func (e *Engine) back(fj *bucket.Job) bool {
	var r record.Rec
	if err := farRec(&r, fj, e.recNow()); err != nil {
		e.opts.Logger.Error().Err(err).Uint64("sid", fj.SID).Msg("a far-future job's head does not decode")
		return false
	}
	e.logRec(&r)
	_, ready := e.place(&r, false, false)
	return ready
}

// readDoomed reads, for a DEL of names, their far jobs in runs without
// the lock (32 bytes read a far job of any queue in the runs that hold one
// of theirs), into far.pre, and takes far.work, which the caller gives
// back (unlockDoomed) once the DEL has dropped them: meanwhile no run is
// written, merged or dropped, so dropFar finds each job it has to drop in
// what was read or in the buckets in memory. Inside MULTI (the lock held
// already), or for queues with no far job, it reads nothing: dropFar reads
// under the lock what there is. It reports whether it took far.work.
func (e *Engine) readDoomed(names [][]byte) bool {
	f := &e.far
	if f.set == nil || e.mu.held {
		return false
	}
	e.mu.Lock()
	any := false
	for _, name := range names {
		if qi, ok := e.queueFor(name, false); ok && e.queues[qi].far > 0 {
			any = true
		}
	}
	e.mu.Unlock()
	if !any {
		return false
	}
	f.work.Lock()
	e.mu.Lock()
	set, plans := f.set, make([]*bucket.Plan, len(names))
	for i, name := range names {
		if qi, ok := e.queueFor(name, false); ok && e.queues[qi].far > 0 {
			plans[i], _ = set.OfQueue(e.queues[qi].name).Split()
		}
	}
	e.mu.Unlock()
	pre := map[string][]bucket.Job{}
	for i, p := range plans {
		if p == nil {
			continue
		}
		js, err := set.ReadQueue(p)
		if err != nil {
			continue // dropFar reads them under the lock
		}
		pre[string(names[i])] = js
	}
	if doomedRead != nil {
		doomedRead(pre)
	}
	e.mu.Lock()
	if f.set == set {
		f.pre = pre
	}
	e.mu.Unlock()
	return true
}

// doomedRead, when set (tests), sees what readDoomed read, without the lock.
var doomedRead func(map[string][]bucket.Job)

// unlockDoomed ends what readDoomed began.
func (e *Engine) unlockDoomed() {
	e.mu.Lock()
	e.far.pre = nil
	e.mu.Unlock()
	e.far.work.Unlock()
}

// dropFar drops the far jobs of queue qi, which DEL detaches (doom): those
// in runs as read before the lock (readDoomed), or else read now, and
// those in the buckets in memory. Replay before the opened checkpoint's
// mark leaves the runs as they are: they are as of the mark. Called with mu
// held.
func (e *Engine) dropFar(qi uint32) {
	f := &e.far
	if f.set == nil || f.before {
		return
	}
	p := f.set.OfQueue(e.queues[qi].name)
	js, read := f.pre[e.queues[qi].name]
	if read {
		_, p = p.Split()
	}
	more, err := f.set.ReadQueue(p)
	if err != nil {
		e.opts.Logger.Error().Err(err).Str("queue", e.queues[qi].name).Msg("reading a deleted queue's far-future jobs")
	}
	js = append(js, more...)
	for i := range js {
		if f.set.Take(&js[i]) {
			e.queues[qi].far--
			e.queues[qi].Delayed--
			e.njobs--
		}
	}
}

// flushFar drops every far job (FLUSHALL), but before the opened
// checkpoint's mark.
func (e *Engine) flushFar() {
	if e.far.set != nil && !e.far.before {
		e.far.set.Reset()
	}
}
