//go:build !latetrace

package engine

import "time"

const traceOn = false

func (e *Engine) traceWake(int64)    {}
func (e *Engine) traceServe(*Waiter) {}
func traceWoken(*Waiter)             {}
func traceDurable(uint64)            {}
func traceDump()                     {}
func traceAdvance(time.Duration)     {}
