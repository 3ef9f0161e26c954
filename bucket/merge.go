package bucket

import (
	"slices"
)

// Merging runs: every checkpoint seals the open bucket, so runs are many
// and small, and loading and cancels leave them mostly dead. A merge
// copies the live jobs of a few such runs into one new run and re-points
// their index cells, a chunk per hold of the owner's lock; the old runs,
// then all dead, leave at the next checkpoint (Installed), which names
// the new one. Until then a crash finds the old runs named and the new one
// not, which Open removes: a merge changes no job.

// mergeMin is how many runs are worth merging at once.
const mergeMin = 4

// Merge is a merge under way.
type Merge struct {
	id    uint64
	from  []mergeSrc
	names []string
	out   []mergeJob // the new run's jobs, by index
	slot  int        // the new run's slot, once Begin
	next  int        // the next job Step re-points
}

type mergeSrc struct {
	slot  int
	id    uint64
	r     *Run
	dead  []uint64 // its dead bits when planned
	queue []uint32 // its queues' numbers in the merge's names
}

type mergeJob struct {
	src   int // in from
	index uint32
	sid   uint64
	key   Sorted // its sorted entry in its run, its queue the merge's number
	pos   int    // its place in its run's sorted entries
}

// PlanMerge picks runs to merge: those at most a quarter live, fewest live
// first, while their live jobs fit one run; nil if fewer than mergeMin
// qualify. It captures their dead bits. O(buckets).
func (s *Set) PlanMerge() *Merge {
	var c []int
	for slot, b := range s.b {
		if b != nil && b.run != nil && b.live > 0 && b.live*4 <= b.run.N {
			c = append(c, slot)
		}
	}
	slices.SortFunc(c, func(a, b int) int { return s.b[a].live - s.b[b].live })
	m := &Merge{id: s.nextID}
	no := map[string]uint32{}
	total := 0
	for _, slot := range c {
		b := s.b[slot]
		if total+b.live > maxEntries {
			break
		}
		total += b.live
		f := mergeSrc{slot: slot, id: b.id, r: b.run, dead: slices.Clone(b.dead)}
		for _, q := range b.run.Names {
			k, ok := no[q]
			if !ok {
				k = uint32(len(m.names))
				m.names = append(m.names, q)
				no[q] = k
			}
			f.queue = append(f.queue, k)
		}
		m.from = append(m.from, f)
	}
	if len(m.from) < mergeMin {
		return nil
	}
	s.nextID++
	s.merging[m.id] = true
	// The open bucket must keep the greatest id (a job entering the
	// buckets lands after every place there is: Scan): it takes no more.
	if s.open >= 0 {
		if s.b[s.open].n == 0 {
			s.free(s.open)
		} else {
			s.b[s.open].frozen = true
		}
		s.open = -1
	}
	return m
}

// WriteMerge writes the merge's run, without the owner's lock (as
// WriteFrozen, yield too): the jobs live when it was planned, read from
// their runs.
func (s *Set) WriteMerge(m *Merge, yield func()) (*Run, error) {
	var ss []Sorted
	seq := make([]*seqReader, len(m.from))
	for k, f := range m.from {
		if f.r.inOrder {
			seq[k] = newSeqReader(f.r)
		}
		for from := 0; from < f.r.N; from += 1 << 14 {
			var err error
			if ss, err = f.r.ReadSorted(from, min(from+1<<14, f.r.N), ss[:0]); err != nil {
				return nil, err
			}
			for n, e := range ss {
				if i := e.Index; f.dead[i>>6]&(1<<(i&63)) == 0 {
					e.Queue = f.queue[e.Queue]
					m.out = append(m.out, mergeJob{src: k, index: i, sid: e.SID, key: e, pos: from + n})
				}
			}
		}
	}
	// writeRun asks for the jobs in the merged order: each run's in its
	// own sorted order, so one whose data lie in that order is read
	// through a window (seqReader), not a job's place and data each.
	return writeRun(s.o.FS, s.o.Path, m.id, m.names, len(m.out), func(i int) Sorted { return m.out[i].key }, func(i int) (runJob, error) {
		o := &m.out[i]
		if q := seq[o.src]; q != nil {
			return q.read(o.pos, o.key)
		}
		f := m.from[o.src]
		j, err := f.r.ReadData(o.index)
		if err != nil {
			return runJob{}, err
		}
		j.Queue = f.queue[j.Queue]
		return j, nil
	}, yield)
}

// AbortMerge forgets a merge whose WriteMerge failed (its file is gone).
func (s *Set) AbortMerge(m *Merge) { delete(s.merging, m.id) }

// BeginMerge adds the merge's run to the Set, every job dead until Step
// re-points it. O(1). On error the run is closed and its file is for the
// owner to remove (RemoveRuns).
func (s *Set) BeginMerge(m *Merge, r *Run) error {
	delete(s.merging, m.id)
	slot := -1
	for i := range s.b {
		if s.b[i] == nil {
			slot = i
			break
		}
	}
	if slot < 0 || r.N != len(m.out) {
		r.Close()
		return ErrNoSlots
	}
	dead := make([]uint64, (r.N+63)/64)
	for i := range dead {
		dead[i] = ^uint64(0)
	}
	r.order = nil // no job of it is dead but by Step
	s.b[slot] = &bucket{id: m.id, run: r, n: r.N, dead: dead}
	s.byID[m.id] = slot
	m.slot = slot
	return nil
}

// Step re-points at most n of the merge's jobs to the new run, those still
// where it read them (not removed, moved or loaded since), and says
// whether the merge is done. O(n). A load's Due..Take must not straddle a
// Step (the owner runs both on one goroutine): Take would miss a job
// re-pointed meanwhile until the next round, which may be after its due.
func (s *Set) Step(m *Merge, n int) bool {
	nb := s.b[m.slot]
	if nb == nil || nb.id != m.id {
		return true // a Reset meanwhile
	}
	end := min(m.next+n, len(m.out))
	for i := m.next; i < end; i++ {
		o := &m.out[i]
		f := m.from[o.src]
		b := s.b[f.slot]
		if b == nil || b.id != f.id || b.isDead(o.index) {
			continue
		}
		if l, ok := s.x.get(o.sid); !ok || l != packLoc(f.slot, o.index) {
			continue
		}
		s.x.put(o.sid, packLoc(m.slot, uint32(i)))
		b.kill(o.index)
		nb.dead[i>>6] &^= 1 << (i & 63)
		nb.live++
	}
	m.next = end
	return end == len(m.out)
}
