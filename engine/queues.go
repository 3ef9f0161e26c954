package engine

import "github.com/delayd/delayd/jobs"

// Queues: ready lists, and taking a job out of wherever it is.

// queueFor returns the index of the named queue, creating it when create is
// set. The name is copied only when a queue is created.
func (e *Engine) queueFor(name []byte, create bool) (uint32, bool) {
	// The queue found last is compared first: a command looks its queue
	// up more than once (DELAY.ADD twice), and pipelines repeat a queue.
	// A live queue's name is in byName and no other live queue has it, so
	// a live queue of the name is the one byName would give.
	if c := e.lastQ; c != 0 && int(c) <= len(e.queues) {
		if q := &e.queues[c-1]; q.live && q.name == string(name) {
			return c - 1, true
		}
	}
	if qi, ok := e.byName[string(name)]; ok {
		e.lastQ = qi + 1
		return qi, true
	}
	if !create {
		return 0, false
	}
	var qi uint32
	if n := len(e.qfree); n > 0 {
		qi = e.qfree[n-1]
		e.qfree = e.qfree[:n-1]
	} else {
		e.queues = append(e.queues, queueEntry{})
		qi = uint32(len(e.queues) - 1)
	}
	e.queues[qi] = queueEntry{name: string(name), live: true, run: e.jobs.NewRun()}
	e.byName[e.queues[qi].name] = qi
	if e.watches.Len() > 0 {
		e.queues[qi].watch = e.watches.Lookup(e.queues[qi].name)
	}
	if e.limits.Len() > 0 {
		e.queues[qi].SetLimit(e.limits.Of(e.queues[qi].name))
	}
	return qi, true
}

// releaseQueue frees a queue that holds nothing, so an empty queue leaves
// nothing behind.
func (e *Engine) releaseQueue(qi uint32) {
	q := &e.queues[qi]
	if !q.live || q.Jobs() > 0 || q.waiters.Len() > 0 {
		return
	}
	delete(e.byName, q.name)
	*q = queueEntry{}
	e.qfree = append(e.qfree, qi)
}

func (e *Engine) pushReady(s uint32, atHead bool) {
	j := e.jobs.At(s)
	q := &e.queues[j.Queue]
	j.State = jobs.StateReady
	q.Ready++
	if q.watch != nil || e.watches.All {
		e.changed(q)
	}
	q.Order.Push(&e.jobs.Slab, s, atHead)
}

// markDelayed counts the job in slot s, just added to the wheel, as delayed.
func (e *Engine) markDelayed(s uint32) {
	j := e.jobs.At(s)
	q := &e.queues[j.Queue]
	j.State = jobs.StateDelayed
	q.Delayed++
	if q.watch != nil || e.watches.All {
		e.changed(q)
	}
}

func (e *Engine) unlinkReady(s uint32) {
	q := &e.queues[e.jobs.At(s).Queue]
	q.Order.Unlink(&e.jobs.Slab, s)
	q.Ready--
}

// detach takes a job out of wherever it is (wheel, ready list, reservation)
// and fixes the counts; the slot stays allocated, in no list (jobs.StateFree)
// until the caller places it again.
func (e *Engine) detach(s uint32) {
	j := e.jobs.At(s)
	q := &e.queues[j.Queue]
	if (q.watch != nil || e.watches.All) && q.live { // a doomed queue's name is another queue's now
		e.changed(q)
	}
	switch j.State {
	case jobs.StateDelayed:
		e.wheel.Remove(s)
		q.Delayed--
	case jobs.StateReady:
		e.unlinkReady(s)
	case jobs.StateReserved:
		e.wheel.Remove(s)
		e.unreserve(j.Queue, s)
	}
	j.State = jobs.StateFree
}

// remove deletes a job entirely. O(1).
func (e *Engine) remove(s uint32) {
	var buf [jobs.SIDLen]byte
	j := e.jobs.At(s)
	qi := j.Queue
	e.entomb(s, e.recNow()) // UNIQUE: from the time of the record that removes it
	e.detach(s)
	e.queues[qi].Order.Leave(&e.jobs.Slab, s)
	size := jobs.DataSize(j)
	e.queues[qi].Bytes -= size
	e.j.live.Sub(e.jobs.Home(s), size)
	var id []byte // a server id is unfiled by number (jobs.Table.Delete)
	if j.IDLen > 0 {
		id = e.jobs.ID(j, &buf)
	}
	e.jobs.Delete(&e.queues[qi].run, s, id)
	e.jobs.Free(s)
	if e.queues[qi].live {
		e.njobs--
	} else {
		e.lazy.Pending-- // DEL counted it out already (lazyfree.go)
	}
	e.releaseQueue(qi)
}
