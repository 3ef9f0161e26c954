package archtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/delayd/delayd"

// leaves are the packages that own one kind of state and decide, never
// calling back: the engine applies their effects. A leaf not yet written is
// skipped, so the entry enforces the rule from the day the package lands.
var leaves = []string{
	"wheel", "aof", "offheap", "glob", "schedule", "jobs", "finetimer", "latetrace", "hist", "topn", "backup",
	"queue", "record", "journal", "clock", "bucket", "raftlog",
}

// above are the packages a leaf must not import, directly or not: the
// coordinator, the command layer and the cluster.
var above = []string{"engine", "commands", "cluster"}

// TestLeavesImportNoCoordinator fails if a leaf depends on engine/,
// commands/ or cluster/, which would let it call back into what applies
// its decisions (issue 31: leaves decide, the coordinator applies).
func TestLeavesImportNoCoordinator(t *testing.T) {
	root := moduleRoot(t)
	var pkgs []string
	for _, l := range leaves {
		if _, err := os.Stat(filepath.Join(root, l)); err != nil {
			t.Logf("leaf %s/ does not exist yet: skipped", l)
			continue
		}
		pkgs = append(pkgs, "./"+l)
	}
	// .Deps is every package a package imports, directly or not: what
	// go list -deps prints.
	cmd := exec.Command("go", append([]string{"list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}"}, pkgs...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr(err))
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		seen++
		for _, dep := range f[1:] {
			for _, a := range above {
				if dep == module+"/"+a || strings.HasPrefix(dep, module+"/"+a+"/") {
					t.Errorf("leaf %s imports %s", f[0], dep)
				}
			}
		}
	}
	if seen != len(pkgs) {
		t.Fatalf("go list described %d packages, want %d:\n%s", seen, len(pkgs), out)
	}
}

// moduleRoot is the directory of go.mod, two levels up from this package.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", root, err)
	}
	return root
}

func stderr(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.Stderr
	}
	return nil
}
