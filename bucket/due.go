package bucket

import "slices"

// Loading ahead: the owner takes the jobs due by a time out of the buckets
// and places them in its wheel before their time. Three steps, so that
// the reads happen without the owner's lock: Due decides under it what to
// read (from memory, no I/O), ReadDue reads it without it, Take under it
// takes each job that is still where it was (a cancel may have come
// between), and Settle moves the runs' cursors past what is gone.

// Plan is what one round of loading reads.
type Plan struct {
	until int64
	mem   []Job           // jobs of buckets in memory, payloads to read
	locs  []Loc           // mem's payloads
	refs  map[uint64]*Run // runs mem's payloads lie in
	runs  []runPart       // ranges of runs' sorted entries
	// ReadDue's reads of runs' sorted entries, for Settle.
	read [][]Sorted
	cut  bool // Cut
}

// Cut says whether the plan stopped at its max (of jobs from memory, or
// of entries of a run) with more perhaps due: the owner plans again at
// once, where a plan that was not cut waits for the next round.
func (p *Plan) Cut() bool { return p.cut }

type runPart struct {
	slot     int
	id       uint64
	r        *Run
	from, to int    // sorted positions
	queue    uint32 // OfQueue's: the queue's number in the run
}

// Due plans the reading of the live jobs due by until: at most max of
// them from buckets in memory, and from each run at most max sorted
// entries from its cursor (some of which may be dead or due later: ReadDue
// filters them). No I/O; O(jobs planned + buckets in memory scanned).
func (s *Set) Due(until int64, max int) *Plan {
	p := &Plan{until: until}
	for slot, b := range s.b {
		switch {
		case b == nil || b.live == 0:
		case b.run != nil:
			bound := b.run.Bound(until)
			to := min(bound, b.cursor+max)
			p.cut = p.cut || to < bound
			if to > b.cursor {
				p.runs = append(p.runs, runPart{slot: slot, id: b.id, r: b.run, from: b.cursor, to: to})
			}
		default:
			s.dueInMemory(p, slot, b, until, max)
		}
	}
	return p
}

// dueInMemory plans the live jobs of b, a bucket in memory, due by until,
// from its calendar: O(jobs due, and those of the slot until is in).
func (s *Set) dueInMemory(p *Plan, slot int, b *bucket, until int64, max int) {
	b.cal.due(b, until, func() bool {
		p.cut = p.cut || len(p.mem) >= max
		return p.cut
	}, func(i uint32) {
		e := b.ent(int(i))
		if e.Due > until {
			return
		}
		p.mem = append(p.mem, Job{Due: e.Due, Seq: e.Seq, SID: e.SID, Queue: b.names[e.Queue],
			Head: slices.Clone(b.head(e)),
			slot: slot, id: b.id, index: i})
		p.locs = append(p.locs, e.Loc)
		if e.Loc.Run {
			if p.refs == nil {
				p.refs = map[uint64]*Run{}
			}
			p.refs[e.Loc.File] = s.runOf(e.Loc.File)
		}
	})
}

// ReadDue reads what p planned, without the owner's lock (a run's file
// and a frozen bucket's entries do not change; the owner must not install
// a checkpoint, which may close runs, meanwhile). It returns the jobs due
// by p's time in (due, add order), dead ones included: Take tells. yield,
// if not nil, is called before each job read (as WriteFrozen's).
func (s *Set) ReadDue(p *Plan, yield func()) ([]Job, error) {
	if yield == nil {
		yield = func() {}
	}
	js := p.mem
	runs := map[uint64]*Run{}
	for _, rp := range p.runs {
		runs[rp.id] = rp.r
	}
	for id, r := range p.refs {
		runs[id] = r
	}
	for i := range p.mem {
		yield()
		pl, err := s.readLoc(p.locs[i], func(id uint64) *Run { return runs[id] })
		if err != nil {
			return nil, err
		}
		js[i].Payload = pl
	}
	p.read = make([][]Sorted, len(p.runs))
	for k, rp := range p.runs {
		ss, err := rp.r.ReadSorted(rp.from, rp.to, nil)
		if err != nil {
			return nil, err
		}
		p.read[k] = ss
		due, _ := slices.BinarySearchFunc(ss, p.until, func(e Sorted, until int64) int {
			if e.Due <= until {
				return -1
			}
			return 1
		})
		err = rp.r.readJobs(rp.from, ss[:due], yield, func(i int, rj runJob) {
			e := ss[i]
			js = append(js, Job{Due: e.Due, Seq: e.Seq, SID: e.SID, Queue: rp.r.Names[e.Queue], Head: rj.Head, Payload: rj.Payload,
				slot: rp.slot, id: rp.id, index: e.Index})
		})
		if err != nil {
			return nil, err
		}
	}
	slices.SortFunc(js, func(a, b Job) int {
		if a.Due != b.Due {
			return cmpInt(a.Due, b.Due)
		}
		return cmpInt(a.Seq, b.Seq)
	})
	return js, nil
}

// Take takes j, read by ReadDue, out of its bucket if it is still there,
// and says whether it did: the owner then places it (and restates it in
// the log). O(1).
func (s *Set) Take(j *Job) bool {
	b := s.b[j.slot]
	if b == nil || b.id != j.id || b.isDead(j.index) {
		return false
	}
	if l, ok := s.x.get(j.SID); !ok || l != packLoc(j.slot, j.index) {
		return false
	}
	s.x.del(j.SID)
	b.kill(j.index)
	b.back = true
	s.jobs--
	return true
}

// Settle moves each run's cursor past the dead entries at its start, of
// those ReadDue read. O(entries read).
func (s *Set) Settle(p *Plan) {
	for k, rp := range p.runs {
		b := s.b[rp.slot]
		if b == nil || b.id != rp.id || k >= len(p.read) {
			continue
		}
		for _, e := range p.read[k] {
			if b.cursor != rp.from || !b.isDead(e.Index) {
				break
			}
			b.cursor++
			rp.from++
		}
	}
}

// OfQueue plans the reading of every live job of queue, for a DEL of it:
// the owner reads them (ReadQueue), takes each (Take) and drops it, as
// replay will. No I/O; O(jobs of buckets in memory that hold the queue).
func (s *Set) OfQueue(queue string) *Plan {
	p := &Plan{until: 1<<63 - 1}
	for slot, b := range s.b {
		if b == nil || b.live == 0 {
			continue
		}
		qn, ok := b.queueNo(queue)
		switch {
		case !ok:
		case b.run != nil:
			p.runs = append(p.runs, runPart{slot: slot, id: b.id, r: b.run, from: b.cursor, to: b.run.N, queue: qn})
		default:
			for i := range b.n {
				if e := b.ent(i); e.Queue == qn && !b.isDead(uint32(i)) {
					p.mem = append(p.mem, Job{Due: e.Due, Seq: e.Seq, SID: e.SID, Queue: queue, slot: slot, id: b.id, index: uint32(i)})
				}
			}
		}
	}
	return p
}

// Split parts p, an OfQueue's, into what lies in runs (to read without
// the owner's lock) and what lies in buckets in memory (no I/O).
func (p *Plan) Split() (runs, mem *Plan) {
	return &Plan{until: p.until, runs: p.runs}, &Plan{until: p.until, mem: p.mem}
}

// ReadQueue reads what OfQueue planned, without the owner's lock (as
// ReadDue): the jobs' ids and places, not their heads or payloads; dead
// ones included (Take tells).
func (s *Set) ReadQueue(p *Plan) ([]Job, error) {
	js := p.mem
	const chunk = 1 << 14
	var ss []Sorted
	for _, rp := range p.runs {
		for from := rp.from; from < rp.to; from += chunk {
			var err error
			if ss, err = rp.r.ReadSorted(from, min(from+chunk, rp.to), ss[:0]); err != nil {
				return nil, err
			}
			for _, e := range ss {
				if e.Queue == rp.queue {
					js = append(js, Job{Due: e.Due, Seq: e.Seq, SID: e.SID, Queue: rp.r.Names[e.Queue], slot: rp.slot, id: rp.id, index: e.Index})
				}
			}
		}
	}
	return js, nil
}
