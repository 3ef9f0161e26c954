package wheel

// Timers is a set of timers on a wheel of their own, each one a Timer (a
// kind and a ref that mean something to the caller) behind a handle that
// indexes a slab of them. The engine keeps its clocks that are not jobs
// here (a schedule's next firing, a tombstone's end, a limit's next token),
// so a job's slot stays its handle in the job wheel and neither slab grows
// for the other. The zero value is empty and must be Started before Add.
type Timers struct {
	w    *Wheel
	recs []Timer
	free []uint32
	buf  []uint32
	seq  uint64
}

// Timer is what a timer stands for: its kind and ref, the caller's to
// interpret. The zero Timer is a free record.
type Timer struct {
	Kind uint8
	Ref  uint64
}

// Started says whether Start was called.
func (t *Timers) Started() bool { return t.w != nil }

// Start makes the wheel, with the given tick, its clock at now.
func (t *Timers) Start(tick, now int64) { t.w = New(tick, now) }

// Add sets a timer for tm at due (unix ms) and returns its handle, in the
// order added among timers of the same due time; ok is false when due is
// not after the wheel's clock (the caller acts at once instead). O(1).
func (t *Timers) Add(tm Timer, due int64) (uint32, bool) {
	var h uint32
	if n := len(t.free); n > 0 {
		h = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		t.recs = append(t.recs, Timer{})
		h = uint32(len(t.recs) - 1)
	}
	t.seq++
	if !t.w.Add(h, due, t.seq) {
		t.free = append(t.free, h)
		return 0, false
	}
	t.recs[h] = tm
	return h, true
}

// Stop cancels the timer of handle h, if it has not fired. O(1).
func (t *Timers) Stop(h uint32) {
	if t.w != nil && t.w.Remove(h) {
		t.recs[h] = Timer{}
		t.free = append(t.free, h)
	}
}

// Due is when the timer of handle h fires; ok is false once it fired or
// was stopped.
func (t *Timers) Due(h uint32) (int64, bool) {
	if t.w == nil {
		return 0, false
	}
	return t.w.Due(h)
}

// NextDeadline is the wheel's next deadline.
func (t *Timers) NextDeadline() (int64, bool) {
	if t.w == nil {
		return 0, false
	}
	return t.w.NextDeadline()
}

// Advance moves the clock to now and returns the handles of the timers due
// by now, in (due, order added). The caller takes each one's Timer (Take)
// and runs its action, which may add timers, and then gives the slice back
// (Recycle).
func (t *Timers) Advance(now int64) []uint32 {
	if t.w == nil {
		return nil
	}
	if dl, ok := t.w.NextDeadline(); !ok || dl > now {
		t.w.Advance(now, nil) // the clock moves with the caller's
		return nil
	}
	fired := t.w.Advance(now, t.buf[:0])
	t.buf = nil // an action may advance again (it should not)
	return fired
}

// Take is the Timer of a fired handle, whose record and handle it frees.
func (t *Timers) Take(h uint32) Timer {
	tm := t.recs[h]
	t.recs[h] = Timer{}
	t.free = append(t.free, h)
	return tm
}

// Recycle gives back the slice Advance returned, for the next Advance.
func (t *Timers) Recycle(fired []uint32) {
	if fired != nil {
		t.buf = fired[:0]
	}
}

// Free gives back the wheel's memory (Wheel.Free); the set must be reset
// (a new zero Timers) before it is used again.
func (t *Timers) Free() {
	if t.w != nil {
		t.w.Free()
	}
}
