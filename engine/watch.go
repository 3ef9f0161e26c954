package engine

import "github.com/delayd/delayd/queue"

// Watching queues for WATCH and CLIENT TRACKING: the table of watched names
// and their versions is queue.Watches; the engine attaches an entry to the
// queue of its name (queueEntry.watch), records every change under its
// lock, and calls the change hook.

// Watch registers a WATCH of the named queue and returns its version; the
// caller compares it with Version later and must call Unwatch once. O(1).
func (e *Engine) Watch(name []byte) uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.watchFor(name).Hold()
}

// Unwatch drops a WATCH taken with Watch. O(1).
func (e *Engine) Unwatch(name []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.watches.Release(name) {
		e.unwatched(string(name))
	}
}

// Version is the named queue's version: it differs from what Watch returned
// once the queue has changed since. Only meaningful while watched. O(1).
func (e *Engine) Version(name []byte) uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advanceLocked(e.nowMs()) // a job due by now has fired: that is a change
	if w := e.watches.Lookup(string(name)); w != nil {
		return w.Version
	}
	return 0
}

// Track asks for one call of the change hook (SetOnChange) at the named
// queue's next change, as Redis's tracking table remembers a key a client
// read until it is invalidated. O(1).
func (e *Engine) Track(name []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.watchFor(name).Track()
}

// SetOnChange sets the hook called when a tracked queue changes (see Track).
// It runs under the engine's lock, in apply order, with the queue's name: it
// must be quick and must not call the engine.
func (e *Engine) SetOnChange(fn func(name string)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.onChange = fn
}

// TrackAll makes every change to every queue call the change hook, watched
// or not: CLIENT TRACKING's BCAST mode is told of changes to keys nobody
// read. Calls count: each TrackAll(true) is undone by one TrackAll(false),
// so callers need not agree on who turns it off. O(1); while on, each change
// costs one hook call.
func (e *Engine) TrackAll(on bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.watches.TrackAll(on)
}

// watchFor returns the entry of name, making it (and attaching it to the
// queue, if the queue exists) when there is none. Called with mu held.
func (e *Engine) watchFor(name []byte) *queue.Watch {
	w, made := e.watches.For(name)
	if made {
		if qi, ok := e.byName[string(name)]; ok {
			e.queues[qi].watch = w
		}
	}
	return w
}

// unwatched detaches the entry of name, gone from the table, from its
// queue. Called with mu held.
func (e *Engine) unwatched(name string) {
	if qi, ok := e.byName[name]; ok {
		e.queues[qi].watch = nil
	}
}

// changed records a change to queue q, which has an entry unless TrackAll
// is on. Called with mu held, by every place a job enters or leaves a
// state, behind the test q.watch != nil || e.watches.All.
func (e *Engine) changed(q *queueEntry) {
	tell, dropped := e.watches.Changed(q.name, q.watch)
	if tell && e.onChange != nil {
		e.onChange(q.name)
	}
	if dropped {
		e.unwatched(q.name)
	}
}

// changedAll records a change to every watched name: the engine's state was
// rebuilt (a reload after a failed log write) and any of them may differ.
func (e *Engine) changedAll() {
	tell, dropped := e.watches.ChangedAll()
	if e.onChange != nil {
		for _, name := range tell {
			e.onChange(name)
		}
	}
	for _, name := range dropped {
		e.unwatched(name)
	}
}
