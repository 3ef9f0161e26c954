package engine

import (
	"encoding/binary"
	"errors"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/record"
)

// Transactions (docs/decisions/transactions.md): MULTI/EXEC runs its
// commands under one hold of the lock, through a handle whose methods skip
// it (engineLock), so EXEC runs the very handlers a lone command runs. Time
// stands still inside; the records gather in a unit (journal.Unit), logged
// when the function returns as one framed record.Unit, in parts past
// unitPartMax, the last the commit; blocked clients a write would serve are
// served then, as Redis serves them after EXEC.
// larger than one log record may be; the last part is the commit.

// ErrInTransaction is returned by the methods that cannot run inside Atomic:
// they would wait for something the held lock stops (a fsync, a blocked
// client, a background rewrite), or nest a transaction.
var ErrInTransaction = errors.New("not allowed inside a transaction")

// unitPartMax bounds the body of one unit record: a unit larger than that
// is logged as several parts. A variable so tests can make parts small.
var unitPartMax = aof.MaxRecordSize - 32

// Atomic runs fn with a handle on the engine that holds its lock for the
// whole call: no other client's command and no timer work runs until fn
// returns. The handle is valid only inside fn (using it after fn returned
// panics). It returns the unit's log ticket, which every write inside fn
// also returned: WaitDurable(ticket) waits for all of them at once; 0 when
// nothing was logged. Inside fn, PopOrWait never parks (it returns
// ErrInTransaction when it would), and WaitDurable, Rewrite, Stop, Close and
// Atomic refuse.
//
// Cost: the lock is held for all of fn, so fn must be a bounded list of
// O(1)-ish operations (a transaction's commands), never a wait.
func (e *Engine) Atomic(fn func(tx *Engine)) (ticket uint64, err error) {
	if e.mu.held {
		return 0, ErrInTransaction
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	now, up := e.clock()
	if e.wheel != nil {
		e.advanceLocked(now)
	}
	tx := &Engine{core: e.core, mu: engineLock{m: e.mu.m, held: true}, txNow: now, txUp: up}
	e.inTx = true
	defer func() {
		// Also on a panic: what was applied must be logged as it was.
		for _, qi := range e.txServe {
			tx.serveWaiters(qi) // their pops go into the unit: inTx is still set
		}
		tx.mu = engineLock{} // a handle kept past fn panics rather than race
		e.txServe = e.txServe[:0]
		e.inTx = false
		ticket = e.endUnit()
	}()
	fn(tx)
	return 0, nil
}

// unitRec appends a record made inside Atomic to the unit and returns the
// unit's ticket, taken at its first record. Called with mu held.
func (e *Engine) unitRec(b []byte) uint64 { return e.j.unit.Add(e.journal, b) }

// endUnit appends the unit, if anything was logged, to the pending batch
// (journal.Unit) and returns its ticket. Called with mu held.
func (e *Engine) endUnit() uint64 { return e.j.unit.End(e.journal, unitPartMax) }

// replayRecord applies one record of the log file. A unit's parts are
// gathered until its commit (journal.Gather), then its records are applied
// in order.
func (e *Engine) replayRecord(p []byte) error {
	rec, unit, err := e.j.gather.Feed(p, e.opts.Logger)
	switch {
	case err != nil:
		return err
	case rec != nil:
		return e.apply(rec)
	case unit != nil:
		err = e.applyUnit(unit)
		e.j.gather.Applied()
	}
	return err
}

// dropTornUnit forgets the parts of a unit whose commit did not follow.
func (e *Engine) dropTornUnit() { e.j.gather.DropTorn(e.opts.Logger) }

// applyUnit applies the records of a committed unit, each a uvarint length
// then the record. The whole body is checked before any record applies, so
// a malformed unit changes nothing.
func (e *Engine) applyUnit(body []byte) error {
	var r record.Rec
	for b := body; len(b) > 0; {
		n, k := binary.Uvarint(b)
		if k <= 0 || n == 0 || n > uint64(len(b)-k) || r.Decode(b[k:k+int(n)]) != nil {
			return record.ErrBad
		}
		b = b[k+int(n):]
	}
	for len(body) > 0 {
		n, k := binary.Uvarint(body)
		if err := e.apply(body[k : k+int(n)]); err != nil {
			return err
		}
		body = body[k+int(n):]
	}
	return nil
}
