// Package latetrace is the lateness trace of a debug build (go build -tags
// latetrace): for every job handed to a blocked client, how long after the
// first nanosecond of its due millisecond the timer goroutine woke, the
// waiter was resolved, the client's goroutine took the job and its pop
// record was written, and how long each advance of the timer held the
// engine's lock. Dump prints the percentiles to stderr when the engine
// stops. In the normal build On is false and every function is empty.
//
// It is a leaf: the engine measures in its own clock and passes durations
// in; this package only keeps and prints them.
package latetrace
