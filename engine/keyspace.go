package engine

import (
	"unsafe"

	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/record"
)

// The keyspace: a queue is a key while it holds a job in any state (SCAN,
// KEYS, DBSIZE, INFO keyspace, FLUSHDB, FLUSHALL, MEMORY USAGE). SCAN's
// cursor is a queue's index, kept while the queue lives, so a key present
// for a whole scan is returned at least once (docs/decisions/lists-keyspace.md).
// Long walks take the lock a chunk at a time.

// scanChunk bounds the queue slots one hold of the lock visits.
const scanChunk = 1024

// isKey says whether queue q is a key: it holds a job. Called with mu held.
func (q *queueEntry) isKey() bool {
	return q.live && q.Jobs() > 0
}

// Scan visits about count queue slots from cursor on and returns the names
// of those that are keys and that match accepts (called under the lock, so
// it must be quick), and the cursor to continue from: 0 when the walk
// reached the end. O(count).
func (e *Engine) Scan(cursor uint64, count int, match func(name string) bool) (uint64, []string) {
	count = max(count, 1)
	var keys []string
	i := cursor
	for visited := 0; visited < count; {
		e.mu.Lock()
		n := uint64(len(e.queues))
		stop := min(i+uint64(min(count-visited, scanChunk)), n)
		for ; i < stop; i++ {
			if q := &e.queues[i]; q.isKey() && (match == nil || match(q.name)) {
				keys = append(keys, q.name)
			}
		}
		e.mu.Unlock()
		if i >= n {
			return 0, keys
		}
		visited += scanChunk
	}
	return i, keys
}

// Keys returns the name of every key that match accepts (see Scan). O(queues),
// taking the lock a chunk at a time.
func (e *Engine) Keys(match func(name string) bool) []string {
	var keys []string
	cursor := uint64(0)
	for {
		var chunk []string
		cursor, chunk = e.Scan(cursor, scanChunk, match)
		keys = append(keys, chunk...)
		if cursor == 0 {
			return keys
		}
	}
}

// Flush removes every job of every queue (FLUSHDB, FLUSHALL), logged as one
// record. Blocked clients stay blocked, as after DEL. Ids and add order are
// not reset: a server id is never made twice. O(queues + waiters) under the
// lock; the memory the jobs held goes to the garbage collector.
func (e *Engine) Flush() (uint64, error) {
	wr, err := e.begin(0)
	if err != nil {
		return 0, err
	}
	defer wr.end()
	now := wr.now
	r := record.Rec{Op: record.Flush, Time: now}
	ticket := e.logRec(&r)
	e.flushAll()
	return ticket, nil
}

// flushAll applies a flush, live or replayed: the state is dropped whole
// rather than job by job, keeping only the waiters.
func (e *Engine) flushAll() {
	for i := range e.queues {
		if q := &e.queues[i]; q.isKey() && q.watch != nil {
			e.changed(q)
		}
	}
	waiting := e.parkedWaiters() // a follower's, or none at start-up
	limits := e.limits           // limits belong to names, not to jobs: FLUSHALL keeps them
	e.flushFar()
	if e.j.replaying {
		now := e.wheel.Now()
		e.resetState()
		e.keepLimits(limits)
		e.wheel = e.newJobWheel(now)
		e.parkAgain(waiting)
		return
	}
	e.resetState()
	e.keepLimits(limits)
	e.wheel = e.newJobWheel(e.recNow()) // the flush record's time
	e.repark(waiting)
}

// Per-job and per-queue costs beyond the arena bytes, for MEMORY USAGE:
// the slab record, an index entry (a 4-byte cell of a table kept between
// 3/8 and 3/4 full, about 8 bytes a job), a wheel node for a delayed or reserved job, and
// the queue's own struct, name and byName entry. A job in the far-future
// buckets keeps only its cell of their index (12 bytes in a table kept
// between 3/8 and 3/4 full).
const (
	indexEntryBytes = 8
	wheelNodeBytes  = 32
	farCellBytes    = 20
	queueBytes      = int64(unsafe.Sizeof(queueEntry{})) + 48
)

// MemoryUsage estimates the bytes a queue holds: its jobs' slab records,
// index entries, wheel nodes, id and payload blocks (counted as they are
// allocated, by size class), and the queue itself. ok is false when the
// queue is not a key. O(1).
func (e *Engine) MemoryUsage(name []byte) (int64, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	qi, ok := e.queueFor(name, false)
	if !ok || !e.queues[qi].isKey() {
		return 0, false
	}
	q := &e.queues[qi]
	held, far := int64(q.Jobs()-q.far), int64(q.far)
	n := queueBytes + int64(len(q.name)) + q.Bytes + far*farCellBytes +
		held*(int64(jobs.Size)+indexEntryBytes) + int64(q.Delayed-q.far+q.Reserved)*wheelNodeBytes
	return n, true
}
