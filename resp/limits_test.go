package resp

import (
	"testing"
	"testing/synctest"
	"time"
)

func TestParseOutputLimit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want OutputLimit
		show string
	}{
		{"normal 0 0 0", OutputLimit{}, "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"},
		{"normal 64mb 16mb 60", OutputLimit{64 << 20, 16 << 20, time.Minute},
			"normal 67108864 16777216 60 slave 268435456 67108864 60 pubsub 33554432 8388608 60"},
		{"pubsub 1mb 1mb 1 NORMAL 1000 0 0 slave 0 0 0", OutputLimit{Hard: 1000},
			"normal 1000 0 0 slave 0 0 0 pubsub 1048576 1048576 1"},
	} {
		got, show, err := ParseOutputLimit(tc.in)
		if err != nil || got != tc.want || show != tc.show {
			t.Errorf("ParseOutputLimit(%q) = %+v, %q, %v; want %+v, %q", tc.in, got, show, err, tc.want, tc.show)
		}
	}
	for _, bad := range []string{"normal 1 2", "normal x 0 0", "normal 0 0 -1", "client 0 0 0", "1mb"} {
		if _, _, err := ParseOutputLimit(bad); err == nil {
			t.Errorf("ParseOutputLimit(%q) accepted", bad)
		}
	}
}

// The soft limit: pushes may stay above it for SoftFor, not longer; the
// hard limit closes at once.
func TestOutboxLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ob := &outbox{max: 100, lim: OutputLimit{Hard: 100, Soft: 10, SoftFor: time.Second}}
		ob.buf = make([]byte, 20)
		if ob.overflowing() {
			t.Fatal("closed as soon as it passed the soft limit")
		}
		time.Sleep(time.Second)
		if ob.overflowing() {
			t.Fatal("closed after exactly SoftFor above the soft limit")
		}
		ob.buf = ob.buf[:5] // it read: the clock starts again
		if ob.overflowing() {
			t.Fatal("closed below the soft limit")
		}
		ob.buf = ob.buf[:20]
		ob.overflowing()
		time.Sleep(999 * time.Millisecond)
		if ob.overflowing() {
			t.Fatal("the soft clock did not restart when the client caught up")
		}
		time.Sleep(2 * time.Millisecond)
		if !ob.overflowing() {
			t.Fatal("not closed after more than SoftFor above the soft limit")
		}
		hard := &outbox{max: 100}
		hard.buf, hard.inflight = make([]byte, 60), 50
		if !hard.overflowing() {
			t.Fatal("bytes being written do not count toward the hard limit")
		}
	})
}
