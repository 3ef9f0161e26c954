package commands

import "github.com/delayd/delayd/engine"

// While the log replays at start the server already accepts connections:
// Exec answers every command not flagged Loading with errLoading, as Redis
// does (clients retry on it), until main publishes the engine with
// SetEngine. Handlers flagged Loading run meanwhile with engineFor nil.

const errLoading = "LOADING delayd is loading the dataset in memory"

// SetEngine publishes the engine once its log is loaded: from then on every
// command runs. It panics if an engine was already set.
func (d *Dispatcher) SetEngine(e *engine.Engine) {
	if e == nil || !d.eng.CompareAndSwap(nil, e) {
		panic("commands: SetEngine: the engine is nil or already set")
	}
	e.SetOnChange(d.invalidate) // CLIENT TRACKING's invalidations (tracking.go)
}

// Ready reports whether the engine is loaded and every command runs (for a
// readiness probe).
func (d *Dispatcher) Ready() bool { return d.eng.Load() != nil }

// persistence is INFO's persistence section: the engine's, or while the log
// loads how far it got.
func (d *Dispatcher) persistence(eng *engine.Engine) [][2]string {
	switch {
	case eng != nil:
		return eng.Persistence()
	case d.opts.Loading != nil:
		return d.opts.Loading.Persistence()
	}
	return [][2]string{{"loading", "1"}, {"async_loading", "0"}}
}

// engineInfo is eng.Info(), or zeros while the log loads.
func engineInfo(eng *engine.Engine) engine.Info {
	if eng == nil {
		return engine.Info{}
	}
	return eng.Info()
}
