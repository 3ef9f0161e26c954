package bucket

import "slices"

// Earliest returns up to count live jobs of queue due after (due, seq),
// in (due, add order), heads and payloads read: the far part of a
// DELAY.UPCOMING page, which the owner merges with its wheel's. Under the
// owner's lock, with I/O: each run's sorted entries are read from the
// first chunk that may hold (due, seq), until count of the queue's live
// jobs are found in it or the run ends; a bucket in memory is scanned
// whole. O(entries read), an admin's listing, not a hot path.
func (s *Set) Earliest(queue string, due int64, seq uint64, count int) ([]Job, error) {
	after := func(d int64, q uint64) bool { return d > due || d == due && q > seq }
	var out []Job
	for slot, b := range s.b {
		if b == nil || b.live == 0 || count <= 0 {
			continue
		}
		qn, ok := b.queueNo(queue)
		if !ok {
			continue
		}
		if b.run == nil {
			for i := range b.n {
				e := b.ent(i)
				if e.Queue == qn && !b.isDead(uint32(i)) && after(e.Due, e.Seq) {
					out = append(out, Job{Due: e.Due, Seq: e.Seq, SID: e.SID, Queue: queue, slot: slot, id: b.id, index: uint32(i)})
				}
			}
			continue
		}
		// The first entry due at due or later lies in the chunk before
		// the one Bound names, or later.
		start := b.cursor
		if due > -1<<63 {
			start = max(start, b.run.Bound(due-1)-sparseEvery)
		}
		found := 0
		const chunk = 128
		var ss []Sorted
		for from := start; from < b.run.N && found < count; from += chunk {
			var err error
			if ss, err = b.run.ReadSorted(from, min(from+chunk, b.run.N), ss[:0]); err != nil {
				return nil, err
			}
			for _, e := range ss {
				if e.Queue == qn && !b.isDead(e.Index) && after(e.Due, e.Seq) {
					out = append(out, Job{Due: e.Due, Seq: e.Seq, SID: e.SID, Queue: queue, slot: slot, id: b.id, index: e.Index})
					if found++; found == count {
						break
					}
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b Job) int {
		if a.Due != b.Due {
			return cmpInt(a.Due, b.Due)
		}
		return cmpInt(a.Seq, b.Seq)
	})
	out = out[:min(len(out), count)]
	for i := range out {
		j := &out[i]
		got, _, err := s.Get(j.SID)
		if err != nil {
			return nil, err
		}
		j.Head, j.Payload = got.Head, got.Payload
	}
	return out, nil
}
