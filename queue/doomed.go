package queue

import "time"

// Doomed is the list of deleted queues still holding jobs, and the pace at
// which they are freed. DEL of a big queue must not hold the engine's lock
// for the whole of it (a second for 3M jobs), as Redis's lazyfree frees a
// big key's value away from its main thread: the engine detaches the queue
// from its name at once and frees its jobs in batches, from a goroutine of
// its own that takes the lock for one batch, then sleeps Pause.
//
// Doomed decides which queue comes next, where the slab scan for its jobs
// stands, and when a batch has done enough; the engine frees the jobs.
type Doomed struct {
	queues  []doomedQueue // oldest first
	Pending int           // jobs of doomed queues not yet freed (INFO lazyfree_pending_objects)
	// The longest hold of the lock by one batch, the batches run and the
	// most jobs one freed: what the tests check the pace by.
	MaxHold          time.Duration
	Batches, MaxFree int
}

// doomedQueue is a queue being freed; scan is the next slab slot to look at
// for its jobs that are not in its ready order (delayed, reserved, held by
// a group's cap).
type doomedQueue struct {
	qi   uint32
	scan uint32
}

// The bounds of one batch: jobs freed, slab slots looked at for the
// queue's jobs outside its ready order, and time, for a slow machine.
const (
	Batch = 4096
	Scan  = 1 << 16
	Hold  = 250 * time.Microsecond
	// Pause is the freer's sleep between batches. A client's write used to
	// pass the lock twice (its command, then the flusher taking the batch;
	// the journal now takes it under its own lock), and with a short pause
	// the freer took the lock back between the two: at 50 µs other
	// clients' median round trip was 3-4 times the baseline and, with the
	// server on one CPU of a loaded machine, p99 10-50 ms against 2-5 ms,
	// since a process that keeps its CPU busy is the one the OS makes
	// wait. At 1 ms a round trip fits between two batches and the figures
	// during a free match those without one (docs/benchmarks.md); the
	// price is a free 3-4 times slower (3M jobs: about 17 s on the loaded
	// 2-core machine), memory the freer gives back later but no client
	// waits for.
	Pause = time.Millisecond
)

// Doom adds queue qi, holding jobs jobs, to the end of the list.
func (d *Doomed) Doom(qi uint32, jobs int) {
	d.Pending += jobs
	d.queues = append(d.queues, doomedQueue{qi: qi})
}

// Len is the number of queues being freed.
func (d *Doomed) Len() int { return len(d.queues) }

// Oldest returns the queue to free from now and its scan position, which
// the engine moves along the slab.
func (d *Doomed) Oldest() (qi uint32, scan *uint32) {
	q := &d.queues[0]
	return q.qi, &q.scan
}

// Freed drops the oldest queue: it holds no job any more.
func (d *Doomed) Freed() { d.queues = d.queues[1:] }

// Over says whether a batch that started at start and freed n jobs has
// done enough. The clock is read once in 64 jobs.
func Over(n int, start time.Time) bool {
	return n >= Batch || n&63 == 63 && time.Since(start) > Hold
}

// Ran counts a batch that freed n jobs and held the lock for held.
func (d *Doomed) Ran(n int, held time.Duration) {
	d.MaxHold = max(d.MaxHold, held)
	d.Batches++
	d.MaxFree = max(d.MaxFree, n)
}

// Reset forgets every doomed queue: the state they were in was dropped.
func (d *Doomed) Reset() { d.queues, d.Pending = nil, 0 }
