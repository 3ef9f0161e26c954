package engine

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
		e.queues = append(e.queues, queue{})
		qi = uint32(len(e.queues) - 1)
	}
	e.queues[qi] = queue{name: string(name), live: true, run: pushRun{pages: &e.runs}}
	e.byName[e.queues[qi].name] = qi
	if len(e.watches) > 0 {
		e.queues[qi].watch = e.watches[e.queues[qi].name]
	}
	if len(e.flow.limits) > 0 {
		e.attachLimit(qi)
	}
	return qi, true
}

// releaseQueue frees a queue that holds nothing, so an empty queue leaves
// nothing behind.
func (e *Engine) releaseQueue(qi uint32) {
	q := &e.queues[qi]
	if !q.live || q.delayed+q.ready+q.reserved > 0 || q.nwait > 0 {
		return
	}
	delete(e.byName, q.name)
	*q = queue{}
	e.qfree = append(e.qfree, qi)
}

func (e *Engine) pushReady(s uint32, atHead bool) {
	j := e.jobs.at(s)
	q := &e.queues[j.queue]
	j.state = stateReady
	q.ready++
	if q.watch != nil || e.trackAll {
		e.changed(q)
	}
	q.rd.push(&e.jobs, s, atHead)
}

// markDelayed counts the job in slot s, just added to the wheel, as delayed.
func (e *Engine) markDelayed(s uint32) {
	j := e.jobs.at(s)
	q := &e.queues[j.queue]
	j.state = stateDelayed
	q.delayed++
	if q.watch != nil || e.trackAll {
		e.changed(q)
	}
}

func (e *Engine) unlinkReady(s uint32) {
	q := &e.queues[e.jobs.at(s).queue]
	q.rd.unlink(&e.jobs, s)
	q.ready--
}

// detach takes a job out of wherever it is (wheel, ready list, reservation)
// and fixes the counts; the slot stays allocated, in no list (stateFree)
// until the caller places it again.
func (e *Engine) detach(s uint32) {
	j := e.jobs.at(s)
	q := &e.queues[j.queue]
	if (q.watch != nil || e.trackAll) && q.live { // a doomed queue's name is another queue's now
		e.changed(q)
	}
	switch j.state {
	case stateDelayed:
		e.wheel.Remove(s)
		q.delayed--
	case stateReady:
		e.unlinkReady(s)
	case stateReserved:
		e.wheel.Remove(s)
		q.reserved--
		e.unreserved(j.queue, s)
	}
	j.state = stateFree
}

// remove deletes a job entirely. O(1).
func (e *Engine) remove(s uint32) {
	var buf [sidLen]byte
	j := e.jobs.at(s)
	qi := j.queue
	e.entomb(s, e.recNow()) // UNIQUE: from the time of the record that removes it
	e.detach(s)
	e.queues[qi].rd.leave(&e.jobs, s)
	e.queues[qi].bytes -= dataSize(j)
	var id []byte // a server id is unfiled by number (indexDelete)
	if j.idLen > 0 {
		id = e.idOf(j, &buf)
	}
	e.indexDelete(s, id)
	e.freeSlot(s)
	if e.queues[qi].live {
		e.njobs--
	} else {
		e.lazy.pending-- // DEL counted it out already (lazyfree.go)
	}
	e.releaseQueue(qi)
}
