package aof

import (
	"io"
	"os"
)

// FS is the filesystem seam: everything the log does to files goes through it,
// so tests can run the real code on MemFS and crash it. Paths are plain OS
// paths. Errors for missing files must match fs.ErrNotExist.
//
// Implementations must be safe for concurrent use (a rewrite writes one file
// while the engine appends to another).
type FS interface {
	// OpenFile opens name with os.OpenFile's flags: O_RDONLY, O_WRONLY, O_RDWR,
	// O_CREATE, O_EXCL, O_TRUNC, O_APPEND.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// Rename renames oldpath to newpath, replacing newpath atomically. The new
	// name is durable only after SyncDir of its directory.
	Rename(oldpath, newpath string) error
	// Remove removes a file.
	Remove(name string) error
	// Stat describes a file.
	Stat(name string) (os.FileInfo, error)
	// SyncDir fsyncs a directory, making the creates, renames and removes of
	// names in it durable.
	SyncDir(dir string) error
}

// File is an open file. *os.File implements it.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.Seeker
	io.Closer
	// Sync makes the file's contents durable (fsync).
	Sync() error
	// Truncate changes the file's size; it does not move the offset.
	Truncate(size int64) error
	// Stat describes the file; Size() is its current length.
	Stat() (os.FileInfo, error)
}

// OS is the real filesystem.
var OS FS = osFS{}

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err // not a typed nil inside the interface
	}
	return f, nil
}

func (osFS) Rename(oldpath, newpath string) error  { return os.Rename(oldpath, newpath) }
func (osFS) Remove(name string) error              { return os.Remove(name) }
func (osFS) Stat(name string) (os.FileInfo, error) { return os.Stat(name) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
