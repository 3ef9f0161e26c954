package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A waiting restore file is taken only by a new group's first node: one
// started to bootstrap, with no Raft state yet. Anything else refuses to
// start, saying what to do, rather than start without the backup.
func TestCheckRestore(t *testing.T) {
	for _, tc := range []struct {
		name      string
		file      bool
		bootstrap bool
		hasState  bool
		want      string // "" ok; else in the error
		restore   bool
	}{
		{name: "no file", bootstrap: true},
		{name: "no file, state", hasState: true},
		{name: "first node", file: true, bootstrap: true, restore: true},
		{name: "joining", file: true, want: "--cluster-bootstrap yes"},
		{name: "state already", file: true, bootstrap: true, hasState: true, want: "already holds Raft state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.file {
				os.MkdirAll(filepath.Join(dir, "raft"), 0o755)
				os.WriteFile(RestorePath(dir), []byte{0}, 0o600)
			}
			c := &Cluster{cfg: Config{Dir: dir, Bootstrap: tc.bootstrap}}
			err := c.checkRestore(tc.hasState)
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
			if (c.restorePath != "") != tc.restore {
				t.Fatalf("restorePath %q", c.restorePath)
			}
		})
	}
}
