package engine

import "github.com/delayd/delayd/jobs"

// Failure reasons: DELAY.NACK key id [delay-ms] [ERROR text].
//
// A job keeps the last failure reason given for it (a NACK's ERROR text, or
// "ack timeout" when a reservation expired) until it ends: through its
// retries, into its dead-letter queue, and back out with DELAY.REQUEUE, so
// the operator looking at a dead letter sees why it died. A NACK without
// ERROR leaves the reason as it was.
//
// Few jobs fail, so the reason is not in the 64-byte job record: the text
// lives in a side table by slot (jobs.Table.Reasons, flagged jobs.FlagReason) and is
// freed with the slot (jobs.Table.Free). An expiry's reason is one flag bit,
// jobs.FlagTimedOut, and no table entry, so a fleet of workers dying with a
// million jobs reserved costs nothing when those reservations expire.
//
// In the log the reason travels:
//   - in the add record's tail (record's extReason), so a rewrite, a snapshot and a
//     dead-lettering (whose add record recreates the job in its new queue)
//     keep it;
//   - in the move record's optional tail (record's moveReason): a NACK is one move
//     record that also sets the reason. A move without the tail (an older
//     log; RESCHEDULE, PROMOTE, a delivery taken back) leaves it alone.
//
// An expiry is not logged; replay derives it, reason included, as it does
// the expiry itself. A requeue record needs nothing: the job keeps its
// reason where it goes.

// ReasonAckTimeout is the failure reason a job gets when its reservation
// expires without an ACK or NACK.
const ReasonAckTimeout = jobs.ReasonAckTimeout

var reasonAckTimeout = []byte(ReasonAckTimeout)

// MaxReason bounds a failure reason's length in bytes.
const MaxReason = 1024

// Reason returns the last failure reason of a job (a NACK's ERROR text, or
// ReasonAckTimeout), and whether the job exists; "" when it has none. For
// the dashboard, as DELAY.GET shows it. O(1).
func (e *Engine) Reason(queueName, id []byte) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	qi, ok := e.queueFor(queueName, false)
	if !ok {
		return "", false
	}
	s, ok := e.jobs.Lookup(&e.queues[qi].run, qi, id)
	if !ok {
		return "", false
	}
	return e.jobs.Reason(s), true
}
