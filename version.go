package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is the release this binary is. scripts/release.sh stamps it with
// -ldflags "-X main.version=0.3.0"; go build, go run and go install say devel.
// INFO's delayd_version, /metrics' delayd_build_info and the dashboard show
// it, and --version prints it with the commit.
var version = "devel"

// commitStamp is the commit scripts/release.sh stamps (-X main.commitStamp=),
// as git rev-parse HEAD with -dirty when the tree had changes: the go command
// stamps nothing in a linked git worktree, and a release must say its commit
// wherever it was built.
var commitStamp string

// commit is the commit the binary was built from, with -dirty when the tree
// had changes: the stamped one, or what the go command recorded of the git
// checkout it built in (vcs.revision, vcs.modified); "unknown" when neither
// (-buildvcs=false, a worktree, a source archive, go install of a module).
func commit() string {
	if commitStamp != "" {
		return commitStamp
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "unknown", ""
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	return rev + dirty
}

// versionLine is what --version prints, on one line for scripts and bug
// reports: delayd 0.3.0 commit 0c598a9...-dirty go1.26.8 linux/amd64.
func versionLine() string {
	return fmt.Sprintf("delayd %s commit %s %s %s/%s", version, commit(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
