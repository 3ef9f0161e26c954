// Package wheel is a hierarchical timing wheel as a plain data structure:
// it schedules small integer handles at millisecond due times and says
// which are due when the caller moves its clock. Timers (timers.go) is a
// wheel whose handles stand for a (kind, ref) the caller interprets: the
// engine's clocks that are not jobs.
//
// It is the algorithm of Varghese and Lauck ("Hashed and Hierarchical
// Timing Wheels: Data Structures for the Efficient Implementation of a
// Timer Facility", SOSP 1987) in the form Kafka uses for its request
// purgatory (kafka.utils.timer.TimingWheel, TimerTaskList, SystemTimer):
// levels of buckets, each level's tick the span of the level below,
// coarser levels created on demand, and a coarse bucket re-added to finer
// levels when the clock reaches it (Kafka's bucket.flush(reinsert)). The
// occupancy bitmaps that find the next non-empty bucket come from the
// Linux kernel's timer wheel.
//
// # Why a wheel, and why this shape
//
// A heap of jobs costs O(log n) per add and per cancel, and with one heap
// object per job every garbage-collection cycle scans all of them: at 10M
// pending jobs that is tail latency for every request. The wheel keeps add
// and cancel O(1) and holds no pointers at all. Its nodes live in one
// slab ([]node, 16 bytes each) indexed by uint32 handles the caller
// chooses. Buckets of coarser levels are intrusive doubly linked lists
// through integer links in those nodes, with the per-level bucket heads in
// arrays of integers: they hold most pending jobs, and a list costs nothing
// per job beyond the node. The buckets of levels 0 and 1, which hold at
// most 1,024 and 65,536 ticks of jobs and are walked whole when they fire
// or move down, are arrays of handles: a walk of an array fetches its nodes
// in parallel, a list's one at a time.
// Steady-state Add, Remove and Advance allocate nothing.
//
// The wheel starts no goroutines, takes no locks and never reads a clock:
// time comes in as arguments, so its owner decides what "now" means and
// tests are exact and instant (as in nats-server's thw package).
//
// # Usage
//
// The caller owns the handle space (typically the index of the job in its
// own slab) and serialises all calls:
//
//	w := wheel.New(1, nowMs)              // 1 ms ticks, clock at nowMs
//	if !w.Add(h, dueMs, seq) {            // seq: an add counter
//		ready(h)                          // already due
//	}
//	...
//	if d, ok := w.NextDeadline(); ok {
//		timer.Reset(time.Duration(d-nowMs) * time.Millisecond)
//	}
//	...                                   // when the timer fires:
//	buf = w.Advance(nowMs, buf[:0])       // due handles in (due, seq) order
//	for _, h := range buf {
//		ready(h)
//	}
//
// # Semantics and invariants
//
//   - Never early, at most one tick late: with tick T, a handle due at d
//     fires in the first Advance(now) with now >= floor(d/T)*T + T - 1, the
//     last millisecond of the tick containing d. With T = 1 that is now >= d.
//   - One Advance returns exactly the handles whose tick has completed,
//     ordered by (due, seq), whichever levels they passed through.
//   - A handle is scheduled at most once; it stops being scheduled when it
//     fires or is removed, and may then be added again.
//   - The clock only moves forward; Advance with an earlier time is a no-op.
//   - Every scheduled handle sits in a bucket at or after the clock: level 0
//     holds the next 1,024 ticks, level L>0 the 63 buckets after the clock's
//     own bucket at that level.
//
// # Cost
//
//	New           O(1); about 60 KB (level 0's 1,024 buckets), each further
//	              level 520 bytes
//	Add           O(1), 0 allocs once the slab covers h (else amortised append)
//	Remove        O(1)
//	Contains, Due, Len, Now   O(1)
//	NextDeadline  O(levels): one rotate + count-trailing-zeros per level
//	Advance       O(levels) per non-empty bucket reached, O(1) per entry
//	              moved down a level (at most once per level it started
//	              above 0), plus sorting a fired bucket whose entries did not
//	              arrive in (due, seq) order; an idle jump costs O(levels)
//	              A coarse bucket is drained ahead of its start, at most
//	              1024 entries per level per Advance (drain.go), so with the
//	              clock moving every tick no Advance moves a whole bucket
//
// Level 0 has 1,024 buckets of one tick, the levels above it 64 buckets
// each 64 times as wide as the level below (level 1's are 1,024 ticks).
// With a 1 ms tick, level 0 spans 1 s, level 1 65 s, level 2 70 min,
// level 3 74.6 h, level 4 199 days, level 5 35 years; at most 10 levels
// cover every representable time. Level 0 is wider than the rest so that
// a delay under a second, common for retries and short timers, goes
// straight to the bucket it fires from and is never moved.
//
// # Caveats
//
//   - Not safe for concurrent use. The owner (the engine) serialises calls.
//   - Handles index a slab that never shrinks: its size is the largest
//     handle ever used, 16 bytes each (24 for a wheel from New, which
//     keeps the seqs too). Keep handles dense and reuse them. Handles above
//     MaxHandle (2^31-1) are reserved.
//   - NextDeadline may name a time at which Advance only cascades or
//     drains a coarse bucket and fires nothing (a job that starts on level
//     L can cause up to about 2L such wake-ups, and a bucket being drained
//     asks for every tick until its pass ends); the caller simply asks
//     again. It is never later than the first fire.
//   - Times are clamped to ±math.MaxInt64/2 ms (about 146 million years).
//     A due time beyond that, such as math.MaxInt64 for "never", is stored
//     as is (Due returns it) but fires as if it were math.MaxInt64/2.
//   - Handles due within the same tick fire together at the tick's end; a
//     coarse tick trades timeliness for fewer wake-ups, never for early fires.
package wheel
