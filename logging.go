package main

import (
	"io"
	"os"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
)

// Durations in the log. JSON keeps zerolog's default: a duration field is
// a number of milliseconds (a float: "took_ms":1234.567), so log pipelines
// can compare and sum it, and its name ends in _ms so no one has to guess
// the unit (every Dur call names its field so; TestLogDurationFieldNames
// holds the code to it). The console is for people: the same field reads
// took=1.23s or took=412ms, the unit in the value and not the name.

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
// written by Dur) is shown with three ("1.23s"), and a Dur field's _ms
// suffix, which names the JSON unit, is dropped (took_ms -> took=1.23s).
// Other fields are left as they are, durations already short ("10s")
// included.
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
			s = r.String()
		}
		if name, ok := strings.CutSuffix(k, "_ms"); ok && name != "" {
			if _, taken := evt[name]; !taken {
				delete(evt, k)
				k = name
			}
		}
		evt[k] = s
	}
	return nil
}

// isTerminal reports whether w is a terminal: the console format writes
// colours only there, and "auto" picks the console only there.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
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
