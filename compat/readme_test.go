package compat

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the README's compatibility matrix from the suite's list of checks")

// readmeMatrix is the README's client x feature matrix, made from the same
// clients and features that TestCompat runs.
func readmeMatrix() string {
	var b strings.Builder
	b.WriteString("\n| client |")
	for _, f := range features {
		fmt.Fprintf(&b, " %s |", f.title)
	}
	b.WriteString("\n| --- |")
	for range features {
		b.WriteString(" --- |")
	}
	var notes []string
	note := func(text string) int {
		for i, n := range notes {
			if n == text {
				return i + 1
			}
		}
		notes = append(notes, text)
		return len(notes)
	}
	for _, c := range clients {
		fmt.Fprintf(&b, "\n| %s |", c.title)
		for _, f := range features {
			cl := c.cells[f.name]
			switch {
			case cl.na != "":
				fmt.Fprintf(&b, " n/a (%d) |", note(cl.na))
			case cl.note != "":
				fmt.Fprintf(&b, " ✓ (%d) |", note(cl.note))
			default:
				b.WriteString(" ✓ |")
			}
		}
	}
	b.WriteString("\n\n")
	for i, n := range notes {
		fmt.Fprintf(&b, "(%d) %s.  \n", i+1, n)
	}
	b.WriteString("\nWhat each column checks:\n\n")
	for _, f := range features {
		fmt.Fprintf(&b, "- **%s**: %s.\n", f.title, f.what)
	}
	b.WriteString("\n")
	return b.String()
}

// The README's matrix is generated from the suite's list of checks, so it
// shows what CI runs. Run with -update to refresh.
func TestREADMEMatrixMatchesSuite(t *testing.T) {
	const begin, end = "<!-- compat:begin -->\n", "<!-- compat:end -->"
	path := "../README.md"
	readme, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the %q ... %q markers", path, begin, end)
	}
	want := readmeMatrix()
	if got := s[i+len(begin) : j]; got != want {
		if *update {
			if err := os.WriteFile(path, []byte(s[:i+len(begin)]+want+s[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Fatalf("README compatibility matrix is stale; run: go test ./compat -run README -update\nwant:\n%s", want)
	}
}
