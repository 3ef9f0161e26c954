//go:build !linux

package finetimer

import (
	"errors"
	"time"
)

// Timer exists on Linux only (timerfd); elsewhere the caller sleeps on the
// Go runtime's timer alone.
type Timer struct{ C <-chan struct{} }

// New fails outside Linux.
func New() (*Timer, error) {
	return nil, errors.New("a fine timer needs Linux's timerfd")
}

func (t *Timer) Arm(time.Duration) {}
func (t *Timer) Close()            {}
