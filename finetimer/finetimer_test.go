package finetimer

import (
	"runtime"
	"testing"
	"time"
)

// This test runs on the real clock: it asserts what happens, never how
// soon (the machine is shared); the generous wait only keeps a broken
// timer from hanging the run.
const realWait = 30 * time.Second

func TestFineTimerFiresAndRearms(t *testing.T) {
	ft, err := New()
	if runtime.GOOS != "linux" {
		if err == nil {
			t.Fatal("a fine timer outside Linux")
		}
		t.Skip("timerfd is Linux only")
	}
	if err != nil {
		t.Fatal(err)
	}
	defer ft.Close()
	// A later arming replaces an earlier one: an hour, then now.
	ft.Arm(time.Hour)
	ft.Arm(0)
	select {
	case <-ft.C:
	case <-time.After(realWait):
		t.Fatal("the timer armed to fire now never fired")
	}
	ft.Arm(time.Millisecond)
	select {
	case <-ft.C:
	case <-time.After(realWait):
		t.Fatal("the timer armed for a millisecond never fired")
	}
}
