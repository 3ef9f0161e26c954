package commands

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the README's command reference from the table")

// The README's command reference is generated from the command table, so
// what it says is what the dispatcher enforces. Run with -update to refresh.
func TestREADMEReferenceMatchesTable(t *testing.T) {
	const begin, end = "<!-- commands:begin -->\n", "<!-- commands:end -->"
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
	want := Reference()
	if got := s[i+len(begin) : j]; got != want {
		if *update {
			if err := os.WriteFile(path, []byte(s[:i+len(begin)]+want+s[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Fatalf("README command reference is stale; run: go test ./commands -run README -update\nwant:\n%s", want)
	}
}
