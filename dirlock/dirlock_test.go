package dirlock

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

func TestSecondAcquireRefusedNamingDirAndPID(t *testing.T) {
	skipWithoutFlock(t)
	dir := t.TempDir()
	lk, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Release()

	_, err = Acquire(dir)
	var iu *InUseError
	if !errors.As(err, &iu) {
		t.Fatalf("second Acquire: %v, want an *InUseError", err)
	}
	if iu.Dir != lk.Dir() || iu.PID != os.Getpid() {
		t.Fatalf("InUseError{%q, %d}, want {%q, %d}", iu.Dir, iu.PID, lk.Dir(), os.Getpid())
	}
	want := fmt.Sprintf("data directory %s is in use by another delayd (pid %d); one process at a time", lk.Dir(), os.Getpid())
	if err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
}

func TestReleaseLetsTheNextOneIn(t *testing.T) {
	skipWithoutFlock(t)
	dir := t.TempDir()
	lk, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Release(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, FileName)); len(b) != 0 {
		t.Fatalf("LOCK after Release holds %q, want it empty", b)
	}
	lk2, err := Acquire(dir)
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	lk2.Release()
}

func TestAcquireCreatesTheDirAndWritesItsPID(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	// A crashed holder's longer pid must not show through ours.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte("123456789012\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lk, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Release()
	b, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), strconv.Itoa(os.Getpid())+"\n"; got != want {
		t.Fatalf("LOCK holds %q, want %q", got, want)
	}
}

func TestInUseErrorWithoutPID(t *testing.T) {
	// The holder is between its flock and its write of the pid.
	err := &InUseError{Dir: "/d"}
	if want := "data directory /d is in use by another delayd; one process at a time"; err.Error() != want {
		t.Fatalf("%q, want %q", err, want)
	}
}

// TestKilledHolderReleases is the crash case: a process holding the lock
// is killed with SIGKILL, and the lock is free at once, the stale pid in
// the file notwithstanding.
func TestKilledHolderReleases(t *testing.T) {
	skipWithoutFlock(t)
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHolder$")
	cmd.Env = append(os.Environ(), "DIRLOCK_HELPER_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "locked" {
		t.Fatalf("helper said %q (%v), want locked", line, err)
	}

	_, err = Acquire(dir)
	var iu *InUseError
	if !errors.As(err, &iu) || iu.PID != cmd.Process.Pid {
		t.Fatalf("Acquire while the helper holds it: %v, want in use by pid %d", err, cmd.Process.Pid)
	}

	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = cmd.Wait()
	lk, err := Acquire(dir)
	if err != nil {
		t.Fatalf("Acquire after the holder was killed: %v", err)
	}
	lk.Release()
}

// TestHelperHolder is TestKilledHolderReleases's other process: it takes
// the lock, says so, and waits to be killed.
func TestHelperHolder(t *testing.T) {
	dir := os.Getenv("DIRLOCK_HELPER_DIR")
	if dir == "" {
		t.Skip("run by TestKilledHolderReleases")
	}
	if _, err := Acquire(dir); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Println("locked")
	select {}
}

func skipWithoutFlock(t *testing.T) {
	switch runtime.GOOS {
	case "darwin", "dragonfly", "freebsd", "linux", "netbsd", "openbsd":
	default:
		t.Skip("no flock on", runtime.GOOS)
	}
}
