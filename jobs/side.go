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
