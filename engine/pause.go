package engine

import (
	"github.com/delayd/delayd/record"
)

// DELAY.PAUSE key / DELAY.RESUME key (docs/decisions/flow-control.md). A
// paused queue keeps its jobs and their timing but every take is refused,
// as at a limit (queue.Queue.CanTake). Like a limit, a pause belongs to the
// name: a flag of the name's entry in queue.Limits, logged when it changes
// (record.Pause) and written by a rewrite and a snapshot.

// SetPaused pauses (or resumes) a queue name and returns the log ticket to
// wait for. Resuming serves the queue's blocked clients. A pause that
// changes nothing is not logged. O(1), plus the waiters served.
func (e *Engine) SetPaused(name []byte, paused bool) (uint64, error) {
	if len(name) > MaxKey {
		return 0, ErrKeyTooLong
	}
	wr, err := e.begin(0)
	if err != nil {
		return 0, err
	}
	defer wr.end()
	now := wr.now
	if e.pausedLocked(name) == paused {
		return 0, nil
	}
	if err := e.gateAllows(record.Pause); err != nil {
		return 0, err
	}
	r := record.Rec{Op: record.Pause, Time: now, Queue: name}
	if paused {
		r.Flags = 1
	}
	ticket := e.logRec(&r) // before serving, whose pops follow it
	e.applyPause(&r)
	return ticket, nil
}

// Paused says whether a queue name is paused.
func (e *Engine) Paused(name []byte) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pausedLocked(name)
}

func (e *Engine) pausedLocked(name []byte) bool {
	l := e.limits.Of(string(name))
	return l != nil && l.Paused()
}

// applyPause applies a pause record, live or replayed: the name's flag is
// set outright; a resumed queue's waiters are served.
func (e *Engine) applyPause(r *record.Rec) {
	name := string(r.Queue)
	paused := r.Flags == 1
	l, ok := e.limits.SetPaused(name, paused)
	if !ok {
		return
	}
	qi, ok := e.byName[name]
	if !ok {
		return
	}
	e.queues[qi].Limit = l
	if !paused {
		e.serve(qi)
	}
}
