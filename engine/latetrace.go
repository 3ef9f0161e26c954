package engine

import (
	"time"

	"github.com/delayd/delayd/latetrace"
)

// The lateness trace of a debug build (package latetrace), measured on the
// engine's clock. Every call is guarded by traceOn, so the normal build
// computes nothing.
const traceOn = latetrace.On

func (e *Engine) traceWake(dl int64)   { latetrace.Wake(e.lateBy(dl)) }
func (e *Engine) traceServe(w *Waiter) { latetrace.Serve(w, e.lateBy(w.d.Due)) }
func traceDurable(ticket uint64)       { latetrace.Durable(ticket) }

func (e *Engine) lateBy(ms int64) time.Duration { return e.clk.LateBy(ms) }
