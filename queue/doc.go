// Package queue owns one queue's own state: its ready order (the FIFO of
// ready jobs, or priority lanes and groups served round-robin, with groups
// held at their GROUPCONCURRENCY), its counts and DELAY.STATS counters, and
// the limits by queue name (DELAY.LIMIT and DELAY.PAUSE) that gate every
// take.
//
// It is a leaf: no goroutines, no import of the engine, and no callbacks.
// Whether a job may be taken is an answer, (ok, retryAt), not a timer: the
// engine, which holds every Queue under its lock, arms the timer for
// retryAt and serves the waiters when it fires. The jobs themselves are
// the jobs package's; an Order links their slots through the records'
// Next, Prev and Lane fields, so it allocates nothing per job.
//
// The accessors on the pop path (Order.First, Order.Last, Queue.CanTake's
// first test) are small enough to inline into the engine; keep them so.
package queue
