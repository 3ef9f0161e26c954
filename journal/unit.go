package journal

import (
	"encoding/binary"

	"github.com/rs/zerolog"

	"github.com/delayd/delayd/record"
)

// A transaction is logged as one unit: after a crash all of its records are
// in the log or none is. Its records gather in a Unit while it runs; at its
// end the unit goes to the pending batch as one record framed
//
//	op part more body
//
// (part a uvarint from 0, more 1 while a part follows), split into parts
// when it is larger than one log record may be; the last part is the
// commit. Replay gathers the parts (Gather) and applies the body only once
// the commit is read. The body is the records, each a uvarint length then
// the record; what they mean is the owner's.

// Unit is the records of a transaction under way. Guarded by the owner's
// lock, as the records' order is.
type Unit struct {
	body  []byte
	open  bool   // a record was added since the last End
	next  uint64 // the ticket End is expected to give (Add's answer)
	frame []byte
}

// Add appends an encoded record to the unit and returns the ticket End will
// give the unit, which every record of the transaction shares: no other
// record is appended while the owner's lock holds the transaction, so the
// next ticket is the unit's. It is not taken here: a commit that ran
// between here and End would count it durable (a commit marks every
// ticket given out when it took its batch) before the unit is in any
// batch, and the transaction's reply would leave before its records were
// written (an acknowledged transaction lost to kill -9).
func (u *Unit) Add(j *Journal, rec []byte) uint64 {
	u.body = binary.AppendUvarint(u.body, uint64(len(rec)))
	u.body = append(u.body, rec...)
	if !u.open {
		u.open = true
		j.mu.Lock()
		u.next = j.ticket + 1
		j.mu.Unlock()
	}
	return u.next
}

// End appends the unit, if anything was logged, to j's pending batch as one
// unit record (record.AppendUnit), or as parts of at most partMax bytes of
// body with the last one the commit, and returns its ticket (0: nothing
// logged), which every part carries: the ticket is taken and every part
// appended in one hold of j's lock, so no commit marks the ticket durable
// before the commit part is in its batch, and no reply of the transaction
// leaves before the commit is written. It readies the unit for the next
// transaction. O(size of the unit).
func (u *Unit) End(j *Journal, partMax int) uint64 {
	if !u.open {
		return 0
	}
	body := u.body
	j.mu.Lock()
	j.ticket++
	t := j.ticket
	for part := uint64(0); ; part++ {
		n := min(len(body), partMax)
		more := byte(0)
		if n < len(body) {
			more = 1
		}
		u.frame = record.AppendUnit(u.frame[:0], part, more, body[:n])
		j.appendLocked(u.frame, t)
		body = body[n:]
		if more == 0 {
			break
		}
	}
	j.mu.Unlock()
	if cap(u.body) > 1<<20 {
		u.body = nil // do not keep a big transaction's buffer
	} else {
		u.body = u.body[:0]
	}
	if cap(u.frame) > 1<<20 {
		u.frame = nil
	}
	u.open = false
	return t
}

// Gather follows a unit logged in parts through a replay. Parts whose
// commit never came (a crash tore the unit, and a restart may have logged
// more after them) are dropped by whatever record comes next, and at the
// end of the log: the owner calls Torn then.
type Gather struct {
	buf  []byte
	open bool
	next uint64 // the part expected next
}

// Part takes the unit part read with this number, more and body (the rest
// of the record after the frame). With done, whole is the unit's body: its
// commit was read, and the owner applies it, then calls Applied. orphan says the part
// follows no part before it and cannot commit anything: the owner drops it
// (after Torn). Part 0 starts a unit: the owner calls Torn first.
func (g *Gather) Part(part uint64, more bool, body []byte) (whole []byte, done, orphan bool) {
	if part == 0 && !more {
		return body, true, false // the usual case: a unit in one record, no copy
	}
	if part != 0 && (!g.open || part != g.next) {
		return nil, false, true
	}
	g.open, g.next = true, part+1
	g.buf = append(g.buf, body...)
	if more {
		return nil, false, false
	}
	return g.buf, true, false
}

// Feed takes one record of a replay or a committed batch: a plain record
// comes back as rec (a unit in parts before it, torn, is dropped first);
// a unit's part is gathered, and its body comes back as unit once its
// commit is read: the owner applies it, then calls Applied. logger warns
// of what is dropped.
func (g *Gather) Feed(p []byte, logger zerolog.Logger) (rec, unit []byte, err error) {
	if len(p) == 0 || p[0] != record.Unit {
		g.DropTorn(logger)
		return p, nil, nil
	}
	part, more, body, err := record.DecodeUnit(p)
	if err != nil {
		return nil, nil, err
	}
	if part == 0 {
		g.DropTorn(logger)
	}
	body, done, orphan := g.Part(part, more == 1, body)
	if orphan {
		g.DropTorn(logger)
		logger.Warn().Uint64("part", part).Msg("log: a transaction part without its start dropped")
		return nil, nil, nil
	}
	if !done {
		return nil, nil, nil
	}
	return nil, body, nil
}

// DropTorn drops the parts of a unit whose commit did not follow (Torn),
// and says so on logger.
func (g *Gather) DropTorn(logger zerolog.Logger) {
	if torn, parts, n := g.Torn(); torn {
		logger.Warn().Uint64("parts", parts).Int("bytes", n).
			Msg("log: a transaction torn by a crash was dropped whole (its commit was never written)")
	}
}

// Applied readies Gather for the next unit after the owner applied a
// whole one.
func (g *Gather) Applied() { g.open, g.buf = false, g.buf[:0] }

// Torn drops the parts of a unit whose commit did not follow. torn says
// there were any, with how many parts and bytes, for the owner's log line.
func (g *Gather) Torn() (torn bool, parts uint64, bytes int) {
	if !g.open {
		return false, 0, 0
	}
	parts, bytes = g.next, len(g.buf)
	g.open, g.next, g.buf = false, 0, g.buf[:0]
	return true, parts, bytes
}

// Reset forgets everything gathered: a new replay starts.
func (g *Gather) Reset() { *g = Gather{} }
