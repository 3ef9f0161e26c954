//go:build !linux

package engine

import (
	"errors"
	"time"
)

// fineTimer exists on Linux only (timerfd); elsewhere the engine sleeps on
// the Go runtime's timer alone.
type fineTimer struct{ c chan struct{} }

func newFineTimer() (*fineTimer, error) {
	return nil, errors.New("a fine timer needs Linux's timerfd")
}

func (t *fineTimer) arm(time.Duration) {}
func (t *fineTimer) close()            {}
