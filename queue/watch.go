package queue

// Watches is the table of watched names. WATCH (optimistic transactions)
// and CLIENT TRACKING (client-side caching) both need to know when a queue
// changes, including the changes no command makes: a job firing, a
// reservation expiring. Only names someone watches or tracks have an
// entry, so a queue nobody watches pays one nil check per change, and a
// name can be watched while its queue does not exist, as Redis lets a
// client WATCH a missing key: the engine attaches the entry to the queue
// when it makes one of that name.
//
// The table decides (the version, whether a change must be told, when an
// entry goes); the engine holds it under its lock and calls the change
// hook.
type Watches struct {
	byName map[string]*Watch
	// All is set while some client tracks every change (TrackAll): then a
	// queue with no entry changes too. Read on every change: a field, not
	// a method, so the test stays one load.
	All     bool
	allRefs int // TrackAll(true) calls not yet undone
}

// Watch is the entry of one watched or tracked name.
type Watch struct {
	Version uint64 // bumped on every change to the queue
	refs    int    // WATCHes holding the name
	tracked bool   // a tracking client read it since its last change
}

// Len is the number of names with an entry.
func (t *Watches) Len() int { return len(t.byName) }

// Lookup returns the entry of name, or nil.
func (t *Watches) Lookup(name string) *Watch { return t.byName[name] }

// For returns the entry of name; made says it was just made, and the
// engine attaches it to the queue of that name if there is one. O(1).
func (t *Watches) For(name []byte) (w *Watch, made bool) {
	if w, ok := t.byName[string(name)]; ok {
		return w, false
	}
	if t.byName == nil {
		t.byName = make(map[string]*Watch)
	}
	w = &Watch{}
	t.byName[string(name)] = w
	return w, true
}

// Hold counts a WATCH of w's name and returns its version.
func (w *Watch) Hold() uint64 {
	w.refs++
	return w.Version
}

// Track marks w's name as read by a tracking client: its next change is
// told once.
func (w *Watch) Track() { w.tracked = true }

// Release drops a WATCH of name taken with Hold; dropped says the entry
// went, and the engine detaches it from the queue. O(1).
func (t *Watches) Release(name []byte) (dropped bool) {
	w, ok := t.byName[string(name)]
	if !ok {
		return false
	}
	w.refs--
	return t.dropIfIdle(string(name), w)
}

// Changed records a change to the queue of name, whose entry is w (nil:
// none, which happens only while All is set). tell says the change hook
// must be called; dropped says the entry went (nobody holds it any more),
// and the engine detaches it from the queue. O(1).
func (t *Watches) Changed(name string, w *Watch) (tell, dropped bool) {
	if w == nil {
		return true, false
	}
	w.Version++
	if w.tracked || t.All {
		w.tracked = false
		tell = true
	}
	return tell, t.dropIfIdle(name, w)
}

// ChangedAll records a change to every name with an entry (the state was
// rebuilt, so any of them may differ). It returns the names whose change
// must be told, and those whose entry went, which the engine detaches.
func (t *Watches) ChangedAll() (tell, dropped []string) {
	for name, w := range t.byName {
		w.Version++
		if w.tracked {
			w.tracked = false
			tell = append(tell, name)
		}
		if t.dropIfIdle(name, w) {
			dropped = append(dropped, name)
		}
	}
	return tell, dropped
}

// TrackAll counts a client tracking every change (on) or one that stops:
// each TrackAll(true) is undone by one TrackAll(false), so callers need
// not agree on who turns it off. O(1).
func (t *Watches) TrackAll(on bool) {
	if on {
		t.allRefs++
	} else if t.allRefs > 0 {
		t.allRefs--
	}
	t.All = t.allRefs > 0
}

// dropIfIdle forgets an entry nobody holds any more and says whether it did.
func (t *Watches) dropIfIdle(name string, w *Watch) bool {
	if w.refs > 0 || w.tracked {
		return false
	}
	delete(t.byName, name)
	return true
}
