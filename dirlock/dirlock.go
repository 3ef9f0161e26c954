package dirlock

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// FileName is the lock file's name inside the directory.
const FileName = "LOCK"

// InUseError is Acquire's error when another process holds the lock.
type InUseError struct {
	Dir string // absolute path of the directory
	PID int    // the holder's pid as it wrote it; 0 if not written yet
}

func (e *InUseError) Error() string {
	holder := "another delayd"
	if e.PID > 0 {
		holder = fmt.Sprintf("another delayd (pid %d)", e.PID)
	}
	return fmt.Sprintf("data directory %s is in use by %s; one process at a time", e.Dir, holder)
}

// errWouldBlock is what tryLock returns when the lock is held elsewhere.
var errWouldBlock = errors.New("lock held")

// Lock is a held directory lock.
type Lock struct {
	f   *os.File
	dir string
}

// Acquire creates dir if need be and takes its lock without waiting. It
// returns an *InUseError if another process (or another Acquire in this
// one) holds it.
func Acquire(dir string) (*Lock, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(abs, FileName)
	// Not O_TRUNC: the file may be a holder's, whose pid is still to be read.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("data directory lock: %w", err)
	}
	if err := tryLock(f); err != nil {
		defer f.Close()
		if errors.Is(err, errWouldBlock) {
			return nil, &InUseError{Dir: abs, PID: readPID(f)}
		}
		return nil, fmt.Errorf("data directory lock %s: %w", path, err)
	}
	// A crashed holder's pid may still be there, longer than ours.
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("data directory lock %s: %w", path, err)
	}
	return &Lock{f: f, dir: abs}, nil
}

// Dir is the absolute path of the locked directory.
func (l *Lock) Dir() string { return l.dir }

// Release drops the lock. The file stays (see the package comment); its
// pid is cleared so that no one reads a finished process's pid as a holder.
func (l *Lock) Release() error {
	_ = l.f.Truncate(0)
	return l.f.Close() // closing the last descriptor drops a flock
}

// readPID reads the pid a holder wrote, 0 if there is none (yet).
func readPID(f *os.File) int {
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	pid, err := strconv.Atoi(string(bytes.TrimSpace(buf[:n])))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}
