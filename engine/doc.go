// Package engine owns every job of delayd: it holds the jobs (package jobs)
// and the queues (package queue) under one lock, the clients blocked in
// pops, and the timer that drives the timing wheel. Commands call it; it
// calls the leaves, the wheel and, for durability, the journal (package
// journal), whose steps its goroutines drive, with records of package
// record.
//
// # Model
//
// A job is (queue, id) -> payload, due time, state, deliveries. A job is in
// exactly one place: the wheel (delayed) or its queue's ready list (ready).
// When its due time comes the engine moves it to the tail of the ready list
// and hands it to the oldest waiter, if any. With PRIORITY and GROUP the
// ready list is a ready order instead (queue.Order: priorities, then groups
// in turn), and DELAY.LIMIT and DELAY.PAUSE can hold a queue's pops back:
// every take asks queue.Queue.CanTake, which answers (ok, retryAt), and the
// engine sets the timer for retryAt (limit.go). Jobs of one queue become
// ready in (due time, add order), whichever wheel level each went through:
// the wheel sorts each batch it fires by (due, seq).
//
// # State that is not jobs
//
// Recurring schedules (schedule.go), the tombstones of finished UNIQUE ids
// (unique.go), DELAY.LIMIT's limits and DELAY.PAUSE's pauses (queue.Limits;
// logged by limit.go and pause.go) are state like jobs:
// logged as records that set it outright (package record), replayed, and
// written by a rewrite or a snapshot right after the meta record
// (stateRecs). Each such feature registers once, in features.go: its
// record kinds and how they apply, its part of a rewrite, its reset and
// its timer kind; apply, stateRecs, resetState and onTimer read that. Their
// clocks (a schedule's next firing, a tombstone's end, a rate limit's next
// token) ride a second timing wheel (wheel.Timers; their kinds and actions
// in timers.go, their owners in features.go), so a job's slot stays its handle in the job wheel. Only a
// live leader fires schedules and spends tokens; replay and followers apply
// the records the leader made. The state itself lives in leaves that decide
// and return: package schedule keeps the schedule table and says when each
// fires next and which missed firings its MISFIRE policy owes; package jobs
// keeps the tombstones (jobs.Tombs) and each job's UNIQUE and DEBOUNCE
// options. The files here log, arm timers and apply.
//
// Other state that is not the coordinator's lives in leaves too, and the
// engine applies what they decide: the names watched by WATCH and client
// tracking (queue.Watches; watch.go calls the change hook), each queue's
// FIFO of parked clients (queue.Waiters; waiter.go serves them), the
// deleted queues being freed and the pace of freeing (queue.Doomed;
// lazyfree.go runs the freer), the order and cursor of DELAY.UPCOMING and
// DELAY.RESERVED (jobs.Listing; upcoming.go walks the wheel), a requeued
// job's target and options (jobs.Table.Requeue), and a transaction's unit
// and its parts (journal.Unit, journal.Gather; tx.go).
//
// # Memory
//
// Jobs live in package jobs (a jobs.Table, e.jobs): a paged slab of
// pointer-free 64-byte records linked by slot numbers (pages never move, so growth never copies under the lock); ids and
// payloads live in a byte arena of 1 MiB chunks; server-made ids and
// client ids (by a hash of (queue, id)) are found through two
// open-addressing tables of uint32 slots, and list-pushed jobs' server ids
// through their queue's push run. None of these hold
// pointers, so the garbage collector does not scan per-job memory, and 10M
// pending jobs do not slow every GC cycle. An earlier design with one heap
// object per job (links as pointers, payload as []byte) cost three pointers
// per job to scan. All of them, and the wheel's nodes, are mapped outside
// the Go heap (package offheap), so GOGC's headroom does not double them;
// FLUSHALL and Close unmap them (dropPages). What only a few jobs have (a
// dead-letter queue, UNIQUE and DEBOUNCE, a dead letter's origin, a failure
// reason: reason.go) lives in side tables by slot, flagged in the job's
// flags and freed with its slot (jobs.Table.Free, which calls nothing
// back), so the record stays 64 bytes.
//
// # Synchronization
//
// One mutex, Engine.mu, guards all state and is held only for O(1) work per
// job (O(k log k) to sort a batch of k jobs fired together). Callers never
// block under it: a blocked pop parks a Waiter and returns; the waiter is
// signalled through a buffered channel. One goroutine (run) sleeps on a single
// time.Timer until the wheel's next deadline, so an idle server does no work.
// An add that is earlier than that deadline wakes it. With
// Options.FineTimer (the server's setting) it sleeps on a Linux timerfd
// instead (package finetimer), because the runtime's timers wake an idle
// process up to a millisecond late (docs/decisions/timer-wakeup.md); in a
// busy process, which reads the timerfd late, each command's end checks the
// deadline (Overdue).
//
// Every write takes one path: begin takes the lock, refuses the write if
// writes are refused, and moves the wheel to the operation's time; its
// records go to the journal (logRec) under the lock, in apply order; end
// lets the lock go; the caller waits for the last record's ticket
// (WaitDurable) before it replies. The journal has its own lock, taken
// inside Engine.mu for O(1) per record and never the other way round.
//
// A transaction (Atomic) holds the mutex for all of its operations: an
// Engine is a handle on the state, and the handle Atomic passes on skips
// the lock its methods would take (engineLock), so every public method runs
// inside a transaction unchanged, at the cost of one branch. Inside it time
// stands still and the log gathers its records into one unit (journal.Unit,
// tx.go).
//
// # Time
//
// Due times are unix milliseconds. The engine reads them from the monotonic
// clock (unix ms at start plus elapsed), floored, so a job is never handed
// out before its due millisecond and a wall-clock step cannot reorder jobs.
// The wheel advances by elapsed time, catching up every due bucket in one
// step, never by counting ticks.
//
// # Replication
//
// In cluster mode (Options.Replicator) the engine is a leader or a follower
// (replica.go). The leader applies writes as above and the journal
// proposes each group-commit batch of records instead of writing it to a
// log; a reply waits until its batch commits. A follower applies committed batches as
// replay applies the log, so its time is the leader's time in the records:
// its own clock never moves a job, and it refuses writes and pops. The
// leader logs the time its wheel advances to, so followers fire exactly
// what it fired. A leader whose batch fails refuses writes until the
// cluster layer rebuilds it from a snapshot and the committed log.
//
// # Caveats
//
// Arena memory is reused for new payloads but not returned to the operating
// system. Queue names are Go strings (one pointer per queue, not per job).
package engine
