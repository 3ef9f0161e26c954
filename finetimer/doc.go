// Package finetimer owns one thing: a sleep with the kernel's microsecond
// resolution that holds no thread while it waits, a Linux timerfd read
// through the Go netpoller (docs/decisions/timer-wakeup.md). The engine's
// timer goroutine arms it for the timing wheel's next deadline.
//
// It is a leaf with one goroutine per Timer, the reader that turns the
// fd's expiries into values on Timer.C; it shares nothing with its caller
// but that channel. Outside Linux New fails, and the caller keeps the Go
// runtime's timer.
package finetimer
