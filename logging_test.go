package main

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestLogDurations: the console shows durations with units, rounded to
// three digits, under their name without the _ms suffix; JSON keeps them
// as numbers of milliseconds in fields named so.
func TestLogDurations(t *testing.T) {
	var buf bytes.Buffer
	log := newLogger(config{LogFormat: "console", LogLevel: "info"}, &buf)
	log.Info().Dur("took_ms", 1234567891*time.Nanosecond).Dur("fsync_ms", 412345678*time.Nanosecond).
		Dur("tiny_ms", 12345*time.Nanosecond).Str("timeout", "10s").Str("mode", "hms").Int64("tick_ms", 1).Msg("done")
	got := buf.String()
	for _, want := range []string{"took=1.23s", "fsync=412ms", `tiny="12.3µs"`, "timeout=10s", "mode=hms", "tick_ms=1", "done"} {
		if !strings.Contains(got, want) {
			t.Errorf("console line %q has no %q", got, want)
		}
	}
	buf.Reset()
	log = newLogger(config{LogFormat: "json", LogLevel: "info"}, &buf)
	log.Info().Dur("took_ms", 1234500*time.Microsecond).Msg("done")
	if got := buf.String(); !strings.Contains(got, `"took_ms":1234.5,`) {
		t.Errorf("JSON line %q, want took_ms as 1234.5", got)
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

// TestLogConsoleColoursOnlyOnATerminal: --log-format console into a file
// or a pipe writes no escape codes (a terminal gets colours; not testable
// here without a pty).
func TestLogConsoleColoursOnlyOnATerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var buf bytes.Buffer
	for _, out := range []io.Writer{f, &buf} {
		log := newLogger(config{LogFormat: "console", LogLevel: "info"}, out)
		log.Warn().Str("k", "v").Err(errors.New("e")).Msg("hello")
	}
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	for what, got := range map[string]string{"file": string(b), "buffer": buf.String()} {
		if !strings.Contains(got, "hello") || strings.Contains(got, "\x1b[") {
			t.Errorf("console log into a %s: %q, want it without escape codes", what, got)
		}
	}
	if isTerminal(f) || isTerminal(&buf) {
		t.Errorf("a file or a buffer taken for a terminal")
	}
}

// TestLogDurationFieldNames: every duration the code logs names its unit,
// so a JSON reader never guesses ("took_ms", not "took").
func TestLogDurationFieldNames(t *testing.T) {
	dur := regexp.MustCompile(`\bDur\("([^"]*)"`)
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range dur.FindAllStringSubmatch(string(src), -1) {
			if !strings.HasSuffix(m[1], "_ms") {
				t.Errorf("%s: Dur(%q): a duration field's name ends in _ms (zerolog writes ms)", path, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
