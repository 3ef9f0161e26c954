// Package engine is delayd's coordinator: it owns the lock (Engine.mu),
// the clock, the timer goroutine, the public operations commands call,
// the clients blocked in pops, apply and replay, and the leader and
// follower roles. The state lives in leaves that decide and return (jobs,
// queue, schedule, wheel, hist); the engine applies what they decide:
// timers, records to the journal, waiters served. Each feature that is not
// jobs registers once, in features.go.
//
// Locking: Engine.mu guards all state and is held only for O(1) work per
// job; nothing blocks under it (a blocked pop parks a Waiter and returns).
// The journal's own locks are taken inside Engine.mu, never the other way
// round. A transaction (Atomic) hands its operations an Engine whose
// methods skip the lock it already holds (engineLock).
//
// docs/architecture.md tells the rest: the flow of an add and a pop, where
// each kind of state lives, the write path, time, replication, and the
// checklists for adding a command, a record kind or a feature.
package engine
