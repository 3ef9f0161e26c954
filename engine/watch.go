package engine

// Watching queues. WATCH (optimistic transactions) and CLIENT TRACKING
// (client-side caching) both need to know when a queue changes, including
// the changes no command makes: a job firing from the wheel, a reservation
// expiring. Only names that someone watches or tracks are registered, so a
// queue nobody watches pays one nil check per change, and a name can be
// watched while its queue does not exist (it is attached when the queue is
// made, as Redis lets a client WATCH a missing key).

// watch is the registry entry of one watched or tracked name.
type watch struct {
	version uint64 // bumped on every change to the queue
	refs    int    // WATCHes holding the name
	tracked bool   // a tracking client read it since its last change
}

// Watch registers a WATCH of the named queue and returns its version; the
// caller compares it with Version later and must call Unwatch once. O(1).
func (e *Engine) Watch(name []byte) uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	w := e.watchFor(name)
	w.refs++
	return w.version
}

// Unwatch drops a WATCH taken with Watch. O(1).
func (e *Engine) Unwatch(name []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	w, ok := e.watches[string(name)]
	if !ok {
		return
	}
	w.refs--
	e.dropIfIdle(string(name), w)
}

// Version is the named queue's version: it differs from what Watch returned
// once the queue has changed since. Only meaningful while watched. O(1).
func (e *Engine) Version(name []byte) uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advanceLocked(e.nowMs()) // a job due by now has fired: that is a change
	if w, ok := e.watches[string(name)]; ok {
		return w.version
	}
	return 0
}

// Track asks for one call of the change hook (SetOnChange) at the named
// queue's next change, as Redis's tracking table remembers a key a client
// read until it is invalidated. O(1).
func (e *Engine) Track(name []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.watchFor(name).tracked = true
}

// SetOnChange sets the hook called when a tracked queue changes (see Track).
// It runs under the engine's lock, in apply order, with the queue's name: it
// must be quick and must not call the engine.
func (e *Engine) SetOnChange(fn func(name string)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.onChange = fn
}

// watchFor returns the registry entry of name, making it (and attaching it
// to the queue, if the queue exists) when there is none. Called with mu held.
func (e *Engine) watchFor(name []byte) *watch {
	if w, ok := e.watches[string(name)]; ok {
		return w
	}
	if e.watches == nil {
		e.watches = make(map[string]*watch)
	}
	w := &watch{}
	e.watches[string(name)] = w
	if qi, ok := e.byName[string(name)]; ok {
		e.queues[qi].watch = w
	}
	return w
}

// dropIfIdle forgets an entry nobody holds any more. Called with mu held.
func (e *Engine) dropIfIdle(name string, w *watch) {
	if w.refs > 0 || w.tracked {
		return
	}
	delete(e.watches, name)
	if qi, ok := e.byName[name]; ok {
		e.queues[qi].watch = nil
	}
}

// TrackAll makes every change to every queue call the change hook, watched
// or not: CLIENT TRACKING's BCAST mode is told of changes to keys nobody
// read. Calls count: each TrackAll(true) is undone by one TrackAll(false),
// so callers need not agree on who turns it off. O(1); while on, each change
// costs one hook call.
func (e *Engine) TrackAll(on bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if on {
		e.trackAllRefs++
	} else if e.trackAllRefs > 0 {
		e.trackAllRefs--
	}
	e.trackAll = e.trackAllRefs > 0
}

// changed records a change to queue q, which has a registry entry unless
// TrackAll is on. Called with mu held, by every place a job enters or
// leaves a state.
func (e *Engine) changed(q *queueEntry) {
	w := q.watch
	if w == nil {
		if e.onChange != nil {
			e.onChange(q.name)
		}
		return
	}
	w.version++
	if w.tracked || e.trackAll {
		w.tracked = false
		if e.onChange != nil {
			e.onChange(q.name)
		}
	}
	e.dropIfIdle(q.name, w)
}

// changedAll records a change to every watched name: the engine's state was
// rebuilt (a reload after a failed log write) and any of them may differ.
func (e *Engine) changedAll() {
	for name, w := range e.watches {
		w.version++
		if w.tracked {
			w.tracked = false
			if e.onChange != nil {
				e.onChange(name)
			}
		}
		e.dropIfIdle(name, w)
	}
}
