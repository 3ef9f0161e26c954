package jobs

// ScanVisit bounds a scan's walk: at most this many slots are visited per
// job asked for, so a page of a queue that holds few of the slab's slots
// comes back short (even empty, with a cursor to go on from) rather than
// walking the whole slab while its caller holds a lock.
const ScanVisit = 16

// ScanMinVisit is the fewest slots a page may visit: a page of count 1
// still makes progress through a sparse slab.
const ScanMinVisit = 4096

// Scan calls fn for each slot in [cursor, ...) that holds a job of queue q,
// up to count of them, visiting at most max(count×ScanVisit, ScanMinVisit)
// slots. It returns the cursor of the next page, 0 once the walk has passed
// the last slot. A job lives in one slot from its add to its end, through
// every state, so a job present for the whole scan is seen exactly once;
// one added or ended meanwhile may or may not be. O(visited slots).
func (t *Table) Scan(q uint32, cursor uint64, count int, fn func(s uint32)) (next uint64) {
	n := uint64(t.Len())
	if count <= 0 || cursor >= n {
		return 0
	}
	end := min(n, cursor+uint64(max(count*ScanVisit, ScanMinVisit)))
	s, seen := cursor, 0
	for ; s < end && seen < count; s++ {
		if j := t.At(uint32(s)); j.Queue == q && j.State != StateFree {
			fn(uint32(s))
			seen++
		}
	}
	if s >= n {
		return 0
	}
	return s
}
