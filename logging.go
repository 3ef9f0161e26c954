package main

import (
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// Durations in the log. JSON keeps zerolog's default: a duration field is
// a number of milliseconds (a float: "took":1234.567), so log pipelines can
// compare and sum it. The console is for people: the same field reads
// took=1.23s or took=412ms.

// setDurationFormat makes zerolog write durations for the log format
// chosen: as strings with units for the console, ms numbers for JSON. A
// process-wide setting of zerolog's, set once at start, before any log line.
func setDurationFormat(format string) {
	if format == "console" {
		zerolog.DurationFieldFormat = zerolog.DurationFormatString
	} else {
		zerolog.DurationFieldFormat = zerolog.DurationFormatFloat
		zerolog.DurationFieldUnit = time.Millisecond
	}
}

// roundDurations is the console writer's FormatPrepare: a field that reads
// as a duration with more than three significant digits ("1.234567891s",
// written by Dur) is shown with three ("1.23s"). Other fields are left as
// they are, durations already short ("10s") included.
func roundDurations(evt map[string]any) error {
	for k, v := range evt {
		s, ok := v.(string)
		if !ok || len(s) < 2 || !strings.ContainsAny(s[len(s)-1:], "smhn") {
			continue
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			continue
		}
		if r := roundSignificant(d, 3); r != d {
			evt[k] = r.String()
		}
	}
	return nil
}

// roundSignificant rounds d to n significant digits.
func roundSignificant(d time.Duration, n int) time.Duration {
	limit := time.Duration(1)
	for range n {
		limit *= 10
	}
	abs := d
	if abs < 0 {
		abs = -abs
	}
	for unit := time.Duration(1); unit < time.Hour; unit *= 10 {
		if abs/unit < limit {
			return d.Round(unit)
		}
	}
	return d.Round(time.Second)
}
