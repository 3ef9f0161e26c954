package jobs

// The side tables of failed jobs: a failure reason, and a dead letter's
// origin. Which job gets what is the engine's to decide; how it is kept
// (a flag in the record, an entry by slot) is this package's.

// ReasonAckTimeout is the failure reason of a job whose reservation
// expired without an ACK or NACK. It is kept as a flag (FlagTimedOut), not
// as text: expiries are the common failure, and need no entry.
const ReasonAckTimeout = "ack timeout"

// Reason is the failure reason of the job in slot s, or "". O(1).
func (t *Table) Reason(s uint32) string {
	j := t.At(s)
	switch {
	case j.Flags&FlagReason != 0:
		return t.Reasons[s]
	case j.Flags&FlagTimedOut != 0:
		return ReasonAckTimeout
	}
	return ""
}

// SetReason gives the job in slot s its failure reason; "" keeps the one
// it has. The text is copied. O(1).
func (t *Table) SetReason(s uint32, text []byte) {
	if len(text) == 0 {
		return
	}
	j := t.At(s)
	if string(text) == ReasonAckTimeout {
		if j.Flags&FlagReason != 0 {
			delete(t.Reasons, s)
		}
		j.Flags = j.Flags&^FlagReason | FlagTimedOut
		return
	}
	if t.Reasons == nil {
		t.Reasons = make(map[uint32]string)
	}
	j.Flags = j.Flags&^FlagTimedOut | FlagReason
	t.Reasons[s] = string(text)
}

// SetOrigin records where the job in slot s, dead-lettered, came from (a
// copy of o), or forgets it (o nil). O(1).
func (t *Table) SetOrigin(s uint32, o *Origin) {
	j := t.At(s)
	if o == nil {
		if j.Flags&FlagOrigin != 0 {
			j.Flags &^= FlagOrigin
			delete(t.Origins, s)
		}
		return
	}
	if t.Origins == nil {
		t.Origins = make(map[uint32]*Origin)
	}
	j.Flags |= FlagOrigin
	var dl []byte
	if o.DeadLetter != nil {
		dl = append([]byte(nil), o.DeadLetter...)
	}
	t.Origins[s] = &Origin{Queue: append([]byte{}, o.Queue...), AckTimeout: o.AckTimeout, Retry: o.Retry, DeadLetter: dl}
}

// Requeue says where the ready job in slot s goes on DELAY.REQUEUE and
// with what options: to to, or with to nil to its origin queue; with its
// origin's ack timeout, retry limit and dead-letter queue, or its own when
// it has no origin. ok is false when it has neither origin nor to.
// deadLetter aliases the table: copy it before the job changes. O(1).
func (t *Table) Requeue(s uint32, to []byte) (dst []byte, ackTimeout, retry int64, deadLetter []byte, ok bool) {
	o := t.Origins[s] // nil without FlagOrigin
	if o == nil {
		if to == nil {
			return nil, 0, 0, nil, false
		}
		j := t.At(s)
		return to, int64(j.AckTimeout), int64(j.Retry), t.DeadLetters[s], true
	}
	if to == nil {
		to = o.Queue
	}
	return to, o.AckTimeout, o.Retry, o.DeadLetter, true
}

// Requeued gives the job in slot s, just requeued, its new options: no
// deliveries, ackTimeout and retry (clamped to the record's fields), the
// dead-letter queue deadLetter (nil: none; copied), and no origin. O(1).
func (t *Table) Requeued(s uint32, ackTimeout, retry int64, deadLetter []byte) {
	j := t.At(s)
	j.Deliveries = 0
	j.AckTimeout = uint32(min(max(ackTimeout, 0), 1<<32-1))
	j.Retry = int32(min(max(retry, -1), 1<<31-1))
	var dl []byte
	if deadLetter != nil {
		dl = append([]byte(nil), deadLetter...) // before the old one goes: it may alias it
	}
	if j.Flags&FlagDL != 0 {
		j.Flags &^= FlagDL
		delete(t.DeadLetters, s)
	}
	if dl != nil {
		j.Flags |= FlagDL
		t.DeadLetters[s] = dl
	}
	t.SetOrigin(s, nil)
}

// DeadLetter makes the job in slot s, out of deliveries in the queue named
// from, a plain job of its dead-letter queue, whose name it returns (ok
// false: it has none, and nothing changed). The job remembers where it came
// from and with what options (its origin), and has no ack timeout, retry
// limit, dead-letter queue, UNIQUE or DEBOUNCE any more. O(1).
func (t *Table) DeadLetter(s uint32, from []byte) (dl []byte, ok bool) {
	if dl, ok = t.DeadLetters[s]; !ok {
		return nil, false
	}
	j := t.At(s)
	t.SetOrigin(s, &Origin{Queue: from, AckTimeout: int64(j.AckTimeout), Retry: int64(j.Retry), DeadLetter: dl})
	delete(t.DeadLetters, s)
	j.Flags &^= FlagDL
	t.DropIdent(s)
	j.AckTimeout, j.Retry = 0, -1
	return dl, true
}
