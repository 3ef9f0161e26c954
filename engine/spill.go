package engine

import (
	"time"
	"unsafe"

	"github.com/delayd/delayd/finetimer"
	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/journal"
	"github.com/delayd/delayd/record"
)

// Payloads on disk (docs/decisions/payloads-on-disk.md). With
// Options.Horizon a goroutine tails the log (journal.Tail) and, for each
// add record of a job still as it was written and due beyond the horizon,
// keeps where the payload lies in the log instead of its bytes
// (jobs.Table.Spill); every quarter of the horizon it reads back the
// payloads of jobs due within half of it (readAhead). A payload still on
// disk is read from the log by whoever reads it (jobs.Table.Payload). The
// adds, pops and acks know nothing of it; nothing is logged, so a crash
// loses nothing: replay has every payload in the log. A job moved beyond
// the horizon after its add was tailed (a reschedule: its record carries
// no payload) is restated, and the tail spills it from the restatement.

// spillEvery is how often the log is tailed.
const spillEvery = 100 * time.Millisecond

// spillYield is the spiller's pause between its steps: rewriteYield's, a
// variable of its own for BenchmarkCompactionStall's variants.
var spillYield = func(ft *finetimer.Timer) { rewriteYield(ft) }

// spiller is the goroutine of payloads on disk; it ends with Stop. Its
// work comes in bursts (a compaction restates a segment's jobs, which it
// tails and spills again), so it pauses on ft between its chunks, locked
// or not, as a compaction does (rewriteYield): with one P a loop that only
// lets the lock go, or only yields, keeps the clients and the poller
// waiting (docs/decisions/rewrite-pauses.md).
func (e *Engine) spiller() {
	defer e.bg.Done()
	t := time.NewTicker(spillEvery)
	defer t.Stop()
	ft := e.pauseTimer()
	if ft != nil {
		defer ft.Close()
	}
	e.restateFar(ft)
	if e.far.set != nil {
		e.outKept(ft)
		e.bg.Add(1)
		go e.loader() // after the restatements: they may put jobs in the buckets
	}
	var ahead time.Time
	for {
		select {
		case <-e.quit:
			return
		case <-t.C:
		}
		e.spill(ft)
		if e.far.set != nil {
			e.sealFar(ft)
		}
		if time.Since(ahead) >= e.loadEvery() {
			ahead = time.Now()
			if e.far.set != nil {
				e.mergeFar(ft)
			}
			e.readAhead(ft)
		}
	}
}

// spill tails the log and spills the payloads of the jobs its add records
// made that are still as written and due beyond the horizon; the jobs its
// move records left there with their payload in memory it restates.
//
// It spills as it tails, compactChunk candidates at a time: after a
// compaction the tail is every job restated (500k with bench/loadgen's
// pending jobs), and gathering them all first made a slice of 24 MB, grown
// by doubling, whose pointers (the queue's name) every collection then
// scanned, on the clients' one CPU, as they waited in assists.
func (e *Engine) spill(ft *finetimer.Timer) {
	jn := e.journal
	// Tail reads Gen when it starts: this one is older or the same, and
	// a change between them only makes spillChunk refuse.
	gen := jn.Gen()
	cs := make([]record.Cand, 0, compactChunk)
	e.mu.Lock()
	beyond := e.nowMs() + e.opts.Horizon // what is due sooner is no candidate: no string, no lookup
	e.mu.Unlock()
	var moved []record.Cand
	var last record.Cand
	stopped := false
	// The tail slices itself (journal.Env.Pause every 200 µs of records:
	// a compaction's restatements are tens of MB to decode).
	_, err := jn.Tail(func(seg uint64, off int64, rec []byte) {
		c, m, ok := record.Tailed(seg, off, rec, &last, beyond)
		if !ok || stopped {
			return
		}
		if m {
			moved = append(moved, c)
			return
		}
		if cs = append(cs, c); len(cs) == compactChunk {
			stopped = !e.spillChunk(cs, gen, ft)
			cs = cs[:0]
		}
	})
	if err != nil {
		e.opts.Logger.Warn().Err(err).Msg("tailing the log for payloads to keep on disk")
	}
	if stopped || len(cs) > 0 && !e.spillChunk(cs, gen, ft) {
		return
	}
	e.restateMoved(moved, gen, ft)
}

// spillChunk spills what of cs, candidates tailed under gen, is still as
// its record made it, under one hold of the lock, then pauses. It reports
// false if the round must stop: the engine is closing, or a rewrite runs
// or installed its file since gen (it drops every segment: none is spilled
// into meanwhile).
func (e *Engine) spillChunk(cs []record.Cand, gen uint64, ft *finetimer.Timer) bool {
	jn := e.journal
	// The segments after the candidates were read: a job restated into a
	// segment rolled since must be seen homed there (spillOne).
	segs := jn.Segments()
	cur := journal.SegSetOf(segs)
	e.mu.Lock()
	if e.closed || jn.Rewriting() || jn.Gen() != gen {
		e.mu.Unlock()
		return false
	}
	horizon := e.nowMs() + e.opts.Horizon
	for i := range cs {
		e.spillOne(&cs[i], horizon, segs, cur)
	}
	e.mu.Unlock()
	spillYield(ft)
	return true
}

// restateMoved restates the jobs of ms, move records, that the move left
// delayed beyond the horizon with their payload in memory: the record
// carries no payload, and where the add record's copy lies is not kept
// (it would cost memory per job), so the job is logged whole again and
// the next round spills it from there.
func (e *Engine) restateMoved(ms []record.Cand, gen uint64, ft *finetimer.Timer) {
	i := 0
	e.restateBeyond(ft, len(ms) == 0, func(horizon int64, out []uint32) ([]uint32, bool) {
		if e.journal.Gen() != gen {
			return out, true // a rewrite's install meanwhile: ms name segments gone
		}
		for _, c := range ms[i:min(i+compactChunk, len(ms))] {
			if s, ok := e.spillable(&c, horizon); ok {
				out = append(out, s)
			}
		}
		i += compactChunk
		return out, i >= len(ms)
	})
}

// restateFar restates, once at start, the jobs delayed beyond the horizon
// whose payload replay left in memory (moved beyond it after their add
// was logged: replay knows no copy of the payload to point at).
func (e *Engine) restateFar(ft *finetimer.Timer) {
	var s uint32
	e.restateBeyond(ft, false, func(horizon int64, out []uint32) ([]uint32, bool) {
		out, s = e.jobs.InMemoryBeyond(s, uint32(compactChunk), horizon, out)
		return out, s >= e.jobs.Len()
	})
}

// restateBeyond restates the jobs pick finds, given the horizon's time, a
// chunk per lock hold until it says it is done (none: nothing to do), and
// waits for the records: the tail spills the jobs from them, and nothing
// else would make them written.
func (e *Engine) restateBeyond(ft *finetimer.Timer, none bool, pick func(horizon int64, out []uint32) ([]uint32, bool)) {
	var ss []uint32
	var last uint64
	for done := none; !done; {
		wr, err := e.begin(0)
		if err != nil {
			break // writes refused (disk full): the jobs keep their payloads in memory
		}
		if e.closed || e.journal.Rewriting() {
			wr.end()
			break
		}
		ss, done = pick(e.nowMs()+e.opts.Horizon, ss[:0])
		for _, s := range ss {
			last = max(last, e.rehome(s, wr.now))
		}
		wr.end()
		spillYield(ft)
	}
	if err := e.WaitDurable(last); err != nil {
		e.opts.Logger.Warn().Err(err).Msg("restating jobs moved beyond the horizon")
	}
}

// spillable returns the slot of c's job if the job is still as c's record
// left it (its add order), delayed beyond horizon, with its payload in
// memory. Called with mu held.
func (e *Engine) spillable(c *record.Cand, horizon int64) (uint32, bool) {
	qi, ok := e.queueFor(unsafe.Slice(unsafe.StringData(c.Queue), len(c.Queue)), false)
	if !ok {
		return 0, false
	}
	var buf [jobs.SIDLen]byte
	id := jobs.RenderSID(&buf, c.SID)
	if c.ID != "" {
		id = unsafe.Slice(unsafe.StringData(c.ID), len(c.ID))
	}
	s, ok := e.jobs.Lookup(&e.queues[qi].run, qi, id)
	if !ok || !c.Fits(e.jobs.At(s), horizon) {
		return 0, false
	}
	return s, true
}

// spillOne spills the payload of c's job if it is still the one c's
// record made (its add order), delayed beyond horizon, and homed in c's
// segment or one before it: a job restated since (a compaction) is homed
// after it, and c's segment may be about to go. Called with mu held.
func (e *Engine) spillOne(c *record.Cand, horizon int64, segs []uint64, cur *journal.SegSet) {
	s, ok := e.spillable(c, horizon)
	if !ok {
		return
	}
	j, h := e.jobs.At(s), e.jobs.Home(s)
	if !journal.HomedBy(h, c.Seg, segs, cur) {
		return // restated since, into a later segment
	}
	if e.far.set != nil && j.Flags&jobs.FlagOnDisk == 0 && e.out(s, c.Seg, c.Off) || !jobs.CanSpill(j, c.Off) {
		return
	}
	size := jobs.DataSize(j)
	e.j.live.Sub(h, size)
	e.j.live.Add(uint16(c.Seg), size)
	e.jobs.SetHome(s, uint16(c.Seg))
	e.jobs.Spill(j, uint16(c.Seg), c.Off)
}

// keepOnDisk gives j, placed by r, a replayed record, the locator of r's
// payload in the segment being replayed instead of a copy if r is an add
// the job may keep on disk from the start (record.Rec.KeptAt), and says
// whether it did: the start's peak memory is then the resident set, not
// every payload. One that moves beyond the horizon later in the log stays
// in memory (the tail starts after replay's end). Called with mu held,
// during the start-up's replay only.
func (e *Engine) keepOnDisk(j *jobs.Job, r *record.Rec) bool {
	off, ok := r.KeptAt(e.j.rec, e.j.recOff, e.j.keepBy)
	if ok {
		e.jobs.Keep(j, r.ID, e.j.home, off, len(r.Payload))
	}
	return ok
}

// readAhead reads back the payloads of the jobs due within half the
// horizon, a slab chunk at a time: found under the lock, read without it,
// put back under it if the job did not change meanwhile.
func (e *Engine) readAhead(ft *finetimer.Timer) {
	var bs []jobs.Back
	for s := uint32(0); ; {
		e.mu.Lock()
		if e.closed {
			e.mu.Unlock()
			return
		}
		bs, s = e.jobs.DueOnDisk(s, compactScan, e.nowMs()+e.opts.Horizon/2, bs[:0])
		done := s >= e.jobs.Len()
		e.mu.Unlock()
		for i := range bs {
			e.jobs.ReadBack(&bs[i])
		}
		e.mu.Lock()
		for i := range bs {
			e.jobs.PutBack(&bs[i])
		}
		e.mu.Unlock()
		if done {
			return
		}
		spillYield(ft)
	}
}
