//go:build !latetrace

package latetrace

import "time"

// On is false in the normal build: callers guard their calls with it, and
// the calls and their arguments compile away.
const On = false

func Wake(time.Duration)       {}
func Serve(any, time.Duration) {}
func Woken(any, uint64)        {}
func Durable(uint64)           {}
func Advance(time.Duration)    {}
func Dump()                    {}
