package engine

import "github.com/delayd/delayd/jobs"

// Failure reasons: DELAY.NACK key id [delay-ms] [ERROR text]. Package jobs
// keeps each job's last reason (jobs.Table.SetReason, jobs.FlagTimedOut);
// how it travels in the log and why: docs/decisions/failure-reasons.md.

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
