package cluster

import (
	"os"
	"path/filepath"
	"testing"
)

// The groups file lists groups added since the bootstrap past its count;
// a group this node bootstrapped ("") is kept as a field of its own, so a
// later one keeps its place; a file of the build before reads alike.
func TestLayoutAddedGroups(t *testing.T) {
	dir := t.TempDir()
	l := Layout{Groups: 3} // the bootstrap node: every group its own
	l.SetJoin(3, NotHeld)
	l.SetJoin(4, "10.0.0.9:6384")
	if err := WriteLayout(dir, l); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, groupsFile))
	if string(b) != "3\n+\n+\n+\n-\n10.0.0.9:6384\n" {
		t.Errorf("file %q", b)
	}
	got, ok, err := ReadLayout(dir)
	if err != nil || !ok || got.Groups != 3 || got.Total() != 5 {
		t.Fatalf("read back %+v %v %v", got, ok, err)
	}
	for g, held := range []bool{true, true, true, false, true} {
		if got.Held(g) != held {
			t.Errorf("group %d held %v", g, got.Held(g))
		}
	}
	if got.Join[0] != "" || got.Join[4] != "10.0.0.9:6384" {
		t.Errorf("joins %q", got.Join)
	}
	// A joined node's file, as the build before wrote it.
	if err := os.WriteFile(filepath.Join(dir, groupsFile), []byte("3\na:1\n-\nc:3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := ReadLayout(dir); got.Total() != 3 || got.Held(1) || !got.Held(2) || got.Join[2] != "c:3" {
		t.Errorf("an older file: %+v", got)
	}
}
