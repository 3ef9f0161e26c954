package worker

import (
	"testing"
	"time"
)

func TestExponentialCeiling(t *testing.T) {
	for _, c := range []struct {
		n    int
		want time.Duration
	}{
		{0, time.Second}, {1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second},
		{12, 2048 * time.Second}, {13, time.Hour}, {1 << 30, time.Hour},
	} {
		if got := expCeiling(time.Second, 2, time.Hour, c.n); got != c.want {
			t.Errorf("ceiling after %d deliveries: %v, want %v", c.n, got, c.want)
		}
	}
}

// Full jitter: uniform over [0, ceiling], both ends reachable.
func TestJitterSpansZeroToCeiling(t *testing.T) {
	if got := jitter(4*time.Second, func() float64 { return 0 }); got != 0 {
		t.Errorf("u=0: %v, want 0", got)
	}
	if got := jitter(4*time.Second, func() float64 { return 0.9999999999 }); got != 4*time.Second {
		t.Errorf("u->1: %v, want 4s", got)
	}
	if got := jitter(4*time.Second, func() float64 { return 0.5 }); got != 2*time.Second {
		t.Errorf("u=0.5: %v, want 2s", got)
	}
	b := DefaultBackoff
	seen := map[bool]bool{}
	for i := 0; i < 1000; i++ {
		d := b(3, nil, nil)
		if d < 0 || d > 4*time.Second {
			t.Fatalf("third delivery's backoff %v outside [0, 4s]", d)
		}
		seen[d > 2*time.Second] = true
	}
	if len(seen) != 2 {
		t.Fatal("1000 draws all fell in one half of [0, 4s]")
	}
}

func TestCutReason(t *testing.T) {
	if cutReason("") != "error" {
		t.Error("an empty error text must become a reason of at least one byte")
	}
	long := ""
	for len(long) < 1100 {
		long += "é" // two bytes: 1024 falls on a boundary, 1023 does not
	}
	long = "x" + long
	got := cutReason(long)
	if len(got) > 1024 || len(got) < 1020 {
		t.Fatalf("cut to %d bytes", len(got))
	}
	for i, r := range got {
		if r == 0xFFFD {
			t.Fatalf("a rune cut in half at byte %d", i)
		}
	}
}
