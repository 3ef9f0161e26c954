package testserver

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ModuleRoot is the directory of the go.mod above the working directory,
// which go test sets to the package's own: the tree the binary is built
// from.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testserver: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Build builds the delayd binary of the module at root into a new temp dir,
// with -race when race is set, and returns its path and a func that removes
// it. A failed build's error holds the compiler's output.
func Build(root string, race bool) (bin string, remove func(), err error) {
	tmp, err := os.MkdirTemp("", "delayd-test-")
	if err != nil {
		return "", nil, err
	}
	remove = func() { os.RemoveAll(tmp) }
	bin = filepath.Join(tmp, "delayd")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	args = append(args, ".")
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		remove()
		return "", nil, fmt.Errorf("go %s in %s failed: %v\n%s", strings.Join(args, " "), root, err, out)
	}
	return bin, remove, nil
}

// Binary is the binary named by the environment variable env (a release
// build, or one to test while the tree does not compile), as an absolute
// path; or else the one Build makes of this module. remove is never nil.
func Binary(env string, race bool) (bin string, remove func(), err error) {
	if p := os.Getenv(env); p != "" {
		abs, err := filepath.Abs(p)
		return abs, func() {}, err
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", func() {}, err
	}
	bin, remove, err = Build(root, race)
	if err != nil {
		return "", func() {}, err
	}
	return bin, remove, nil
}
