package aof

import (
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// MemFS is an in-memory FS that forgets, on Crash, everything that was not
// made durable, the way a machine that loses power does (after pebble's
// vfs.NewStrictMem):
//
//   - a file's bytes are durable up to its last Sync; a Crash brings back
//     exactly the contents of that Sync (or nothing, if it never had one);
//   - a create, rename or remove is durable once SyncDir has been called on
//     its directory; a Crash brings back each directory as of its last SyncDir.
//
// Faults can be injected to fail a write part way (a full disk), a Sync, a
// Truncate, a Rename, a SyncDir or an open; see Inject.
//
// Directories are implicit: any directory exists. MemFS is safe for concurrent
// use; one mutex guards everything, which is fine for tests.
type MemFS struct {
	mu      sync.Mutex
	files   map[string]*memNode // names as they are now
	durable map[string]*memNode // names as of the last SyncDir of their directory
	epoch   int                 // bumped by Crash; older handles are dead
	faults  []*Fault
	syncs   map[string]int // successful File.Sync calls by the name the file was opened as
}

// memNode is a file's contents (an inode).
type memNode struct {
	data     []byte // what reads see
	synced   []byte // what survives a crash; never shares memory with data
	dirtyLow int    // data[:dirtyLow] equals synced[:dirtyLow]
}

// NewMemFS returns an empty MemFS.
func NewMemFS() *MemFS {
	return &MemFS{
		files:   map[string]*memNode{},
		durable: map[string]*memNode{},
		syncs:   map[string]int{},
	}
}

// Op names an operation a Fault can fail.
type Op uint8

// Operations a Fault can fail.
const (
	OpWrite    Op = iota + 1 // File.Write
	OpSync                   // File.Sync
	OpTruncate               // File.Truncate
	OpRename                 // FS.Rename (Path matches either name)
	OpSyncDir                // FS.SyncDir (Path is the directory)
	OpOpen                   // FS.OpenFile
	OpRemove                 // FS.Remove
)

// Fault makes a MemFS operation fail.
type Fault struct {
	Op   Op
	Path string // the file (or directory for OpSyncDir) it applies to; "" for any
	// After is how much still succeeds first: for OpWrite, bytes (a write that
	// crosses the limit writes up to it and fails, a short write); for the
	// other operations, calls.
	After int64
	Err   error // returned when the fault fires; nil means ErrInjected
	// Sticky keeps the fault failing every matching call once it has fired
	// (a disk that stays full); otherwise it fires once and is removed.
	Sticky bool
}

// Inject adds a fault. Faults are checked in the order they were added; the
// first that matches an operation applies to it.
func (m *MemFS) Inject(f Fault) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f.Err == nil {
		f.Err = ErrInjected
	}
	if f.Path != "" {
		f.Path = filepath.Clean(f.Path)
	}
	m.faults = append(m.faults, &f)
}

// ClearFaults removes every fault.
func (m *MemFS) ClearFaults() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.faults = nil
}

// fault returns the fault that matches op on one of paths, if any. size is the
// bytes of a write. It returns how much may still proceed (bytes or, for other
// operations, 1 or 0) and the error to return after that, and updates the
// fault. Called with m.mu held.
func (m *MemFS) fault(op Op, size int64, paths ...string) (allowed int64, err error) {
	for i, f := range m.faults {
		if f.Op != op || (f.Path != "" && !slices.Contains(paths, f.Path)) {
			continue
		}
		need := int64(1)
		if op == OpWrite {
			need = size
		}
		if f.After >= need {
			f.After -= need
			return need, nil
		}
		allowed, f.After = f.After, 0
		if !f.Sticky {
			m.faults = slices.Delete(m.faults, i, i+1)
		}
		return allowed, f.Err
	}
	if op == OpWrite {
		return size, nil
	}
	return 1, nil
}

// Crash simulates a power loss and restart: every directory goes back to its
// last SyncDir, every file to its last Sync. Files open before the crash are
// dead: their methods fail. Faults are removed.
func (m *MemFS) Crash() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.epoch++
	m.faults = nil
	m.files = make(map[string]*memNode, len(m.durable))
	for name, n := range m.durable {
		n.data = slices.Clone(n.synced)
		n.dirtyLow = len(n.data)
		m.files[name] = n
	}
	// Nodes no durable name reaches are gone with their handles.
}

// CrashClone returns what a crash now would leave, as a new MemFS, and leaves
// m as it is: a test can look at many crash points of one run.
func (m *MemFS) CrashClone() *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := NewMemFS()
	clones := map[*memNode]*memNode{}
	for name, n := range m.durable {
		cn := clones[n]
		if cn == nil {
			cn = &memNode{data: slices.Clone(n.synced), synced: slices.Clone(n.synced), dirtyLow: len(n.synced)}
			clones[n] = cn
		}
		c.files[name] = cn
		c.durable[name] = cn
	}
	return c
}

// SyncCount returns how many File.Sync calls succeeded on files opened as
// name: a test can check that a batch of writes shared one fsync.
func (m *MemFS) SyncCount(name string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.syncs[filepath.Clean(name)]
}

// ReadFile returns a copy of the current contents of name.
func (m *MemFS) ReadFile(name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.files[filepath.Clean(name)]
	if n == nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: iofs.ErrNotExist}
	}
	return slices.Clone(n.data), nil
}

// WriteFile makes name hold data, durably: as if written, fsynced and its
// directory fsynced. Tests use it to lay down (damaged) logs.
func (m *MemFS) WriteFile(name string, data []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = filepath.Clean(name)
	n := &memNode{data: slices.Clone(data), synced: slices.Clone(data), dirtyLow: len(data)}
	m.files[name] = n
	m.durable[name] = n
}

// OpenFile implements FS.
func (m *MemFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = filepath.Clean(name)
	if _, err := m.fault(OpOpen, 0, name); err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	n := m.files[name]
	switch {
	case n == nil && flag&os.O_CREATE == 0:
		return nil, &os.PathError{Op: "open", Path: name, Err: iofs.ErrNotExist}
	case n != nil && flag&(os.O_CREATE|os.O_EXCL) == os.O_CREATE|os.O_EXCL:
		return nil, &os.PathError{Op: "open", Path: name, Err: iofs.ErrExist}
	case n == nil:
		n = &memNode{}
		m.files[name] = n
	}
	acc := flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
	f := &memFile{
		fs:     m,
		node:   n,
		name:   name,
		epoch:  m.epoch,
		read:   acc == os.O_RDONLY || acc == os.O_RDWR,
		write:  acc == os.O_WRONLY || acc == os.O_RDWR,
		append: flag&os.O_APPEND != 0,
	}
	if flag&os.O_TRUNC != 0 && f.write {
		n.truncate(0)
	}
	return f, nil
}

// Rename implements FS.
func (m *MemFS) Rename(oldpath, newpath string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	oldpath, newpath = filepath.Clean(oldpath), filepath.Clean(newpath)
	if _, err := m.fault(OpRename, 0, oldpath, newpath); err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	n := m.files[oldpath]
	if n == nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: iofs.ErrNotExist}
	}
	delete(m.files, oldpath)
	m.files[newpath] = n
	return nil
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = filepath.Clean(name)
	if _, err := m.fault(OpRemove, 0, name); err != nil {
		return &os.PathError{Op: "remove", Path: name, Err: err}
	}
	if m.files[name] == nil {
		return &os.PathError{Op: "remove", Path: name, Err: iofs.ErrNotExist}
	}
	delete(m.files, name)
	return nil
}

// Stat implements FS. A directory is reported if some file is in it.
func (m *MemFS) Stat(name string) (os.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = filepath.Clean(name)
	if n := m.files[name]; n != nil {
		return memInfo{name: filepath.Base(name), size: int64(len(n.data))}, nil
	}
	for f := range m.files {
		if filepath.Dir(f) == name {
			return memInfo{name: filepath.Base(name), dir: true}, nil
		}
	}
	return nil, &os.PathError{Op: "stat", Path: name, Err: iofs.ErrNotExist}
}

// SyncDir implements FS: the names in dir become durable as they are now.
func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir = filepath.Clean(dir)
	if _, err := m.fault(OpSyncDir, 0, dir); err != nil {
		return &os.PathError{Op: "sync", Path: dir, Err: err}
	}
	for name := range m.durable {
		if filepath.Dir(name) == dir {
			delete(m.durable, name)
		}
	}
	for name, n := range m.files {
		if filepath.Dir(name) == dir {
			m.durable[name] = n
		}
	}
	return nil
}

// truncate resizes the node's data, keeping track of what differs from synced.
func (n *memNode) truncate(size int64) {
	n.dirtyLow = min(n.dirtyLow, len(n.data), int(size))
	if int(size) <= len(n.data) {
		n.data = n.data[:size]
		return
	}
	n.data = append(n.data, make([]byte, int(size)-len(n.data))...)
}

// writeAt writes p at off, extending the data with zeros if off is past it.
func (n *memNode) writeAt(p []byte, off int64) {
	if int(off) > len(n.data) {
		n.truncate(off) // zeros, not whatever an earlier truncate left in the array
	}
	n.dirtyLow = min(n.dirtyLow, len(n.data), int(off))
	if end := int(off) + len(p); end > len(n.data) {
		n.data = slices.Grow(n.data, end-len(n.data))[:end]
	}
	copy(n.data[off:], p)
}

// sync makes the data durable. O(bytes changed since the last sync).
func (n *memNode) sync() {
	n.synced = append(n.synced[:n.dirtyLow], n.data[n.dirtyLow:]...)
	n.dirtyLow = len(n.data)
}

// memFile is an open MemFS file.
type memFile struct {
	fs                  *MemFS
	node                *memNode
	name                string
	epoch               int
	pos                 int64
	read, write, append bool
	closed              bool
}

var _ File = (*memFile)(nil)

// check returns why f cannot be used, if it cannot. Called with fs.mu held.
func (f *memFile) check(op string, needWrite, needRead bool) error {
	var err error
	switch {
	case f.closed:
		err = os.ErrClosed
	case f.epoch != f.fs.epoch:
		err = fmt.Errorf("memfs crashed since the file was opened: %w", os.ErrClosed)
	case needWrite && !f.write, needRead && !f.read:
		err = os.ErrPermission
	default:
		return nil
	}
	return &os.PathError{Op: op, Path: f.name, Err: err}
}

func (f *memFile) Read(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", false, true); err != nil {
		return 0, err
	}
	if f.pos >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[f.pos:])
	f.pos += int64(n)
	return n, nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", false, true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &os.PathError{Op: "read", Path: f.name, Err: iofs.ErrInvalid}
	}
	if off >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", true, false); err != nil {
		return 0, err
	}
	allowed, ferr := f.fs.fault(OpWrite, int64(len(p)), f.name)
	if f.append {
		f.pos = int64(len(f.node.data))
	}
	f.node.writeAt(p[:allowed], f.pos)
	f.pos += allowed
	if ferr != nil {
		return int(allowed), &os.PathError{Op: "write", Path: f.name, Err: ferr}
	}
	return len(p), nil
}

func (f *memFile) Seek(offset int64, whence int) (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("seek", false, false); err != nil {
		return 0, err
	}
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += f.pos
	case io.SeekEnd:
		offset += int64(len(f.node.data))
	default:
		offset = -1
	}
	if offset < 0 {
		return 0, &os.PathError{Op: "seek", Path: f.name, Err: iofs.ErrInvalid}
	}
	f.pos = offset
	return offset, nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("truncate", true, false); err != nil {
		return err
	}
	if size < 0 {
		return &os.PathError{Op: "truncate", Path: f.name, Err: iofs.ErrInvalid}
	}
	if _, err := f.fs.fault(OpTruncate, 0, f.name); err != nil {
		return &os.PathError{Op: "truncate", Path: f.name, Err: err}
	}
	f.node.truncate(size)
	return nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("sync", false, false); err != nil {
		return err
	}
	if _, err := f.fs.fault(OpSync, 0, f.name); err != nil {
		return &os.PathError{Op: "sync", Path: f.name, Err: err}
	}
	f.node.sync()
	f.fs.syncs[f.name]++
	return nil
}

func (f *memFile) Stat() (os.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("stat", false, false); err != nil {
		return nil, err
	}
	return memInfo{name: filepath.Base(f.name), size: int64(len(f.node.data))}, nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return &os.PathError{Op: "close", Path: f.name, Err: os.ErrClosed}
	}
	f.closed = true
	return nil
}

// memInfo is a MemFS os.FileInfo.
type memInfo struct {
	name string
	size int64
	dir  bool
}

func (i memInfo) Name() string { return i.name }
func (i memInfo) Size() int64  { return i.size }
func (i memInfo) Mode() os.FileMode {
	if i.dir {
		return os.ModeDir | 0o755
	}
	return 0o644
}
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }

// SlowSync returns m with every file's Sync taking d first, as a disk's
// fsync does, so that writers arriving meanwhile queue up behind it (the
// group commit tests). Inside a testing/synctest bubble d is fake time.
func SlowSync(m *MemFS, d time.Duration) FS { return slowSyncFS{m, d} }

type slowSyncFS struct {
	*MemFS
	d time.Duration
}

type slowSyncFile struct {
	File
	d time.Duration
}

func (fs slowSyncFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := fs.MemFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return slowSyncFile{f, fs.d}, nil
}

func (f slowSyncFile) Sync() error {
	time.Sleep(f.d)
	return f.File.Sync()
}
