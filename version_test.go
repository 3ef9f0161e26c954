package main

import (
	"regexp"
	"testing"
)

// A release's stamp is its commit: the go command records none in a linked
// worktree, so the build info must not override what the script stamped.
func TestVersionLineTakesTheStampedCommit(t *testing.T) {
	defer func(v, c string) { version, commitStamp = v, c }(version, commitStamp)
	version, commitStamp = "0.3.0-rc.1", "0c598a9d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b-dirty"
	got := versionLine()
	want := regexp.MustCompile(`^delayd 0\.3\.0-rc\.1 commit 0c598a9d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b-dirty go\S+ \w+/\w+$`)
	if !want.MatchString(got) {
		t.Fatalf("versionLine() = %q, want %v", got, want)
	}
}

// Unstamped, a test binary has no vcs settings: the commit says so rather
// than print an empty field.
func TestVersionLineUnstamped(t *testing.T) {
	defer func(v, c string) { version, commitStamp = v, c }(version, commitStamp)
	version, commitStamp = "devel", ""
	if got := commit(); got == "" {
		t.Fatal("commit() is empty")
	}
	if got := versionLine(); !regexp.MustCompile(`^delayd devel commit \S+ go`).MatchString(got) {
		t.Fatalf("versionLine() = %q", got)
	}
}
