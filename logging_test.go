package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestLogDurations: the console shows durations with units, rounded to
// three digits; JSON keeps them as numbers of milliseconds.
func TestLogDurations(t *testing.T) {
	ansi := regexp.MustCompile("\x1b\\[[0-9;]*m")
	var buf bytes.Buffer
	log := newLogger(config{LogFormat: "console", LogLevel: "info"}, &buf)
	log.Info().Dur("took", 1234567891*time.Nanosecond).Dur("fsync", 412345678*time.Nanosecond).
		Dur("tiny", 12345*time.Nanosecond).Str("timeout", "10s").Str("mode", "hms").Msg("done")
	got := ansi.ReplaceAllString(buf.String(), "")
	for _, want := range []string{"took=1.23s", "fsync=412ms", `tiny="12.3µs"`, "timeout=10s", "mode=hms", "done"} {
		if !strings.Contains(got, want) {
			t.Errorf("console line %q has no %q", got, want)
		}
	}
	buf.Reset()
	log = newLogger(config{LogFormat: "json", LogLevel: "info"}, &buf)
	log.Info().Dur("took", 1234500*time.Microsecond).Msg("done")
	if got := buf.String(); !strings.Contains(got, `"took":1234.5,`) {
		t.Errorf("JSON line %q, want took as 1234.5 (ms)", got)
	}
	for d, want := range map[time.Duration]string{
		999 * time.Nanosecond:                  "999ns",
		1500 * time.Millisecond:                "1.5s",
		-1234 * time.Millisecond:               "-1.23s",
		61*time.Minute + 1234*time.Millisecond: "1h1m0s",
	} {
		if got := roundSignificant(d, 3).String(); got != want {
			t.Errorf("roundSignificant(%v) = %s, want %s", d, got, want)
		}
	}
}
