package bucket

// Walking every far job of a queue by cursor (DELAY.SCAN, so `delayd
// export`): buckets in id order, and in a bucket its entries, by index in
// memory and in sorted order in a run. The walk needs one invariant, kept
// by Add, Move, room and PlanMerge: a job that enters a bucket takes a
// place after every place there is (the open bucket has the greatest id,
// and a merge's run a greater id than the runs it reads). So a job that
// moves within the buckets only moves ahead of a cursor, and one that
// comes out of memory lands ahead of it.
//
// A DELAY.SCAN cursor (ScanCursor) walks the buckets first, then the
// slab, then the buckets again from where the open bucket stood when the
// slab's walk began (Tail):
//   - a job taken from a bucket into memory during the first walk is in
//     the slab, which is walked whole after;
//   - a job that goes out of memory during the slab's walk lands at or
//     after Tail, and the last walk meets it;
//   - a job taken back into memory during the last walk left a dead entry
//     at or after Tail that the walk has yet to pass: passing it, the walk
//     reports its id and head (gone), for the owner to look up in memory.
//   - a run at or after Tail dropped before the last walk passed it (every
//     job of it gone, and a checkpoint since) takes its dead entries with
//     it: then the slab's walk and the last one run again, from a new Tail
//     (Resume). That needs every job of a run made during the scan gone,
//     those that went back to memory a horizon's half after they went out
//     or by an operation by id on each.
// A job present for the whole scan is met at least once; one that changes
// place may be met twice.

// ScanAt is a place in the walk of the buckets: a bucket's id, and an
// entry's index in it (in memory) or a sorted position (Run: a run's).
// A place in a bucket sealed since it was given restarts at the run's
// start.
type ScanAt struct {
	ID  uint64
	At  int
	Run bool
}

// Scan returns the live jobs of queue from at on, heads and payloads read,
// at most count of them and of the ids in gone, visiting at most visit entries; next is where the
// walk goes on, done says it passed the last bucket. With gone set, the
// ids and heads of queue's dead entries it passes are appended there (the
// last walk: those jobs may be in memory now; a head names a client id's
// job, whose id here is only its key). Under the owner's lock, with I/O: a
// run's sorted entries are read 128 at a time, a job's data with a pread
// or three. O(visit).
func (s *Set) Scan(queue string, at ScanAt, count, visit int, gone *[]Job) (js []Job, next ScanAt, done bool, err error) {
	var ss []Sorted
	met := 0 // jobs and gone ids
	for visit > 0 && met < count {
		slot := s.scanSlot(at.ID)
		if slot < 0 {
			return js, ScanAt{}, true, nil
		}
		b := s.b[slot]
		if b.id != at.ID || (b.run != nil) != at.Run {
			at = ScanAt{ID: b.id, Run: b.run != nil}
		}
		qn, ok := b.queueNo(queue)
		if !ok || b.live == 0 && gone == nil {
			at = ScanAt{ID: b.id + 1}
			continue
		}
		if b.run == nil {
			for ; at.At < b.n && visit > 0 && met < count; at.At++ {
				visit--
				e := b.ent(at.At)
				switch {
				case e.Queue != qn:
				case !b.isDead(uint32(at.At)):
					j := Job{Due: e.Due, Seq: e.Seq, SID: e.SID, Queue: queue, Head: append([]byte(nil), b.head(e)...)}
					if j.Payload, err = s.readLoc(e.Loc, s.runOf); err != nil {
						return nil, at, false, err
					}
					js = append(js, j)
					met++
				case gone != nil:
					*gone = append(*gone, Job{SID: e.SID, Head: append([]byte(nil), b.head(e)...)})
					met++
				}
			}
			if at.At >= b.n {
				at = ScanAt{ID: b.id + 1}
			}
			continue
		}
		if gone == nil {
			at.At = max(at.At, b.cursor) // sorted entries before the cursor are dead
		}
		for at.At < b.run.N && visit > 0 && met < count {
			to := min(at.At+sparseEvery, b.run.N, at.At+visit)
			if ss, err = b.run.ReadSorted(at.At, to, ss[:0]); err != nil {
				return nil, at, false, err
			}
			for _, e := range ss {
				if met == count {
					break
				}
				at.At++
				visit--
				switch {
				case e.Queue != qn:
				case !b.isDead(e.Index):
					rj, err := b.run.ReadData(e.Index)
					if err != nil {
						return nil, at, false, err
					}
					js = append(js, Job{Due: e.Due, Seq: e.Seq, SID: e.SID, Queue: queue, Head: rj.Head, Payload: rj.Payload})
					met++
				case gone != nil:
					rj, err := b.run.ReadData(e.Index)
					if err != nil {
						return nil, at, false, err
					}
					*gone = append(*gone, Job{SID: e.SID, Head: rj.Head})
					met++
				}
			}
		}
		if at.At >= b.run.N {
			at = ScanAt{ID: b.id + 1}
		}
	}
	return js, at, false, nil
}

// scanSlot returns the slot of the bucket with the least id at or after
// id, or -1. O(slots).
func (s *Set) scanSlot(id uint64) int {
	best := -1
	for slot, b := range s.b {
		if b != nil && b.id >= id && (best < 0 || b.id < s.b[best].id) {
			best = slot
		}
	}
	return best
}

// Tail is where a job entering the buckets from now on lands, or before:
// the end of the open bucket, or the next bucket. A walk from it meets
// every job that enters after.
func (s *Set) Tail() ScanAt {
	if s.open >= 0 {
		return ScanAt{ID: s.b[s.open].id, At: s.b[s.open].n}
	}
	return ScanAt{ID: s.nextID}
}

// Resume returns the cursor a page given c goes on from. In the slab's
// walk the cursor keeps Tail's id modulo 2^12 (tailBits), widened here to
// the greatest such id up to Tail now: a walk of the slab during which 4,096
// buckets are made would start its last walk too late. If a run the rest
// of the walks needs was dropped (Dropped, at or after its Tail, or ahead
// of the last walk), the slab's walk starts again.
func (s *Set) Resume(c ScanCursor) ScanCursor {
	if c.Phase == ScanSlab {
		t := s.Tail().ID
		c.Tail.ID = t - (t-c.Tail.ID)&(1<<tailBits-1)
	}
	if c.Phase == ScanSlab && s.dropped >= c.Tail.ID || c.Phase == ScanTail && c.At.ID != 0 && s.dropped >= c.At.ID {
		return ScanCursor{Phase: ScanSlab, Tail: s.Tail()}
	}
	return c
}

// A DELAY.SCAN cursor over the buckets and the slab, in 64 bits: the phase
// in the top two; in a walk of the buckets a bucket id (41 bits), whether
// the place is a run's (1) and the place (20: a bucket holds at most
// 2^20 jobs); in the slab's walk Tail (its id's low 12 bits, its place,
// 20) and the slot (30: a slab of a billion jobs). Cursor 0 is the start
// of the first walk.
type ScanCursor struct {
	Phase ScanPhase
	At    ScanAt // ScanBuckets, ScanTail
	Tail  ScanAt // ScanSlab
	Slot  uint64 // ScanSlab
}

const tailBits = 12

// ScanPhase is a walk of a DELAY.SCAN.
type ScanPhase uint8

// The walks, in order.
const (
	ScanBuckets ScanPhase = iota
	ScanSlab
	ScanTail
)

// ParseCursor reads a cursor Encode made (any other is a place in one of
// the walks, as SCAN takes any number); Resume completes it.
func ParseCursor(c uint64) ScanCursor {
	sc := ScanCursor{Phase: ScanPhase(c >> 62)}
	switch sc.Phase {
	case ScanSlab:
		sc.Tail = ScanAt{ID: c >> 50 & (1<<tailBits - 1), At: int(c >> 30 & (1<<entryBits - 1))}
		sc.Slot = c & (1<<30 - 1)
	default:
		sc.Phase = min(sc.Phase, ScanTail)
		sc.At = ScanAt{ID: c >> 21 & (1<<41 - 1), Run: c>>20&1 != 0, At: int(c & (1<<entryBits - 1))}
	}
	return sc
}

// Encode returns the cursor as DELAY.SCAN gives it.
func (sc ScanCursor) Encode() uint64 {
	c := uint64(sc.Phase) << 62
	if sc.Phase == ScanSlab {
		return c | (sc.Tail.ID&(1<<tailBits-1))<<50 | uint64(sc.Tail.At)&(1<<entryBits-1)<<30 | sc.Slot&(1<<30-1)
	}
	c |= (sc.At.ID&(1<<41-1))<<21 | uint64(sc.At.At)&(1<<entryBits-1)
	if sc.At.Run {
		c |= 1 << 20
	}
	return c
}
