package aof

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// TempSuffix names the file a rewrite writes before Install renames it over
// the log. A leftover one (a crash during a rewrite) is garbage: CreateTemp
// truncates it, and the engine may remove it at start.
const TempSuffix = ".rewrite.tmp"

// maxRetainedBuffer bounds the buffer a Writer keeps between batches: a burst
// of large records should not pin its peak memory forever.
const maxRetainedBuffer = 4 << 20

// Writer appends records to one log file. Records are buffered in memory by
// Append and reach the file only in Flush, in the order they were appended.
//
// A Writer belongs to one goroutine, except that Sync may be called from
// another goroutine concurrently with Append, Buffered, Flush and Size.
type Writer struct {
	fs     FS
	f      File
	raw    *rawFile // f's raw write and fsync (rawwrite_linux.go); nil but for an *os.File
	path   string
	buf    []byte // framed records not yet written
	size   int64  // bytes in the file: header plus every flushed record
	closed bool

	mu  sync.Mutex // guards err, which Sync may set from another goroutine
	err error      // sticky failure, wraps ErrWriterFailed
}

// Create creates (or truncates) path and writes the header; the Writer starts
// at Size() == HeaderSize. Nothing is fsynced: a rewrite calls Install, which
// does. O(1), two syscalls.
func Create(fs FS, path string) (*Writer, error) {
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("aof: create %s: %w", path, err)
	}
	if _, err := f.Write(fileHeader()); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("aof: write header of %s: %w", path, err)
	}
	w := &Writer{fs: fs, f: f, path: path, size: HeaderSize}
	w.initRaw()
	return w, nil
}

// CreateTemp creates path+TempSuffix for a rewrite and returns its Writer and
// name. Append the live set and the tail to it, Flush, then Install.
func CreateTemp(fs FS, path string) (*Writer, string, error) {
	tmp := path + TempSuffix
	w, err := Create(fs, tmp)
	if err != nil {
		return nil, "", err
	}
	return w, tmp, nil
}

// OpenAppend continues the log at path after Replay, at size, the Result.Size
// Replay returned. The file must still be exactly that long, else
// ErrSizeMismatch. A size of 0 (no file, an empty file, or one torn at
// creation that Replay emptied) starts a new log: the header is written and
// fsynced and the directory fsynced, so the new file survives a crash.
func OpenAppend(fs FS, path string, size int64) (*Writer, error) {
	if size != 0 && size < HeaderSize {
		return nil, fmt.Errorf("aof: open %s at size %d: %w", path, size, ErrSizeMismatch)
	}
	flag := os.O_RDWR
	if size == 0 {
		flag |= os.O_CREATE
	}
	f, err := fs.OpenFile(path, flag, 0o644)
	if err != nil {
		return nil, fmt.Errorf("aof: open %s: %w", path, err)
	}
	w := &Writer{fs: fs, f: f, path: path, size: size}
	w.initRaw()
	if err := w.start(); err != nil {
		_ = f.Close()
		return nil, err
	}
	return w, nil
}

func (w *Writer) start() error {
	fi, err := w.f.Stat()
	if err != nil {
		return fmt.Errorf("aof: stat %s: %w", w.path, err)
	}
	if fi.Size() != w.size {
		return fmt.Errorf("aof: %s is %d bytes, replayed %d: %w", w.path, fi.Size(), w.size, ErrSizeMismatch)
	}
	if w.size == 0 {
		if _, err := w.f.Write(fileHeader()); err != nil {
			return fmt.Errorf("aof: write header of %s: %w", w.path, err)
		}
		if err := w.f.Sync(); err != nil {
			return fmt.Errorf("aof: fsync %s: %w", w.path, err)
		}
		if err := w.fs.SyncDir(filepath.Dir(w.path)); err != nil {
			return fmt.Errorf("aof: fsync directory of %s: %w", w.path, err)
		}
		w.size = HeaderSize
		return nil
	}
	if _, err := w.f.Seek(w.size, io.SeekStart); err != nil {
		return fmt.Errorf("aof: seek %s: %w", w.path, err)
	}
	return nil
}

// Append frames payload and buffers it; nothing reaches the file before Flush.
// O(len(payload)), no syscall. The payload is copied, so the caller may reuse
// it at once.
//
// Append panics if payload is empty or longer than MaxRecordSize: both are
// bugs in the caller, which must bound payloads before it accepts them.
func (w *Writer) Append(payload []byte) {
	if len(payload) == 0 || len(payload) > MaxRecordSize {
		panic(fmt.Sprintf("aof: Append of a %d-byte payload (want 1..%d)", len(payload), MaxRecordSize))
	}
	w.buf = appendRecord(w.buf, payload)
}

// Buffered returns the bytes appended since the last Flush, framing included.
// O(1).
func (w *Writer) Buffered() int { return len(w.buf) }

// Size returns the bytes in the file: the header plus every flushed record.
// O(1).
func (w *Writer) Size() int64 { return w.size }

// Flush writes everything buffered with one write(2) and empties the buffer.
// It does not fsync; see Sync.
//
// If the write fails, the records of this batch are dropped and the file is
// truncated back to Size(), so no partial record is left behind: the caller
// reports the error for this batch (and applies none of it) and may go on
// with the next. If the rollback fails too, or an earlier Sync failed, the
// Writer has failed for good and Flush returns an error matching
// ErrWriterFailed, dropping the batch.
func (w *Writer) Flush() error {
	if w.closed {
		return ErrClosed
	}
	if err := w.failed(); err != nil {
		w.resetBuf()
		return err
	}
	if len(w.buf) == 0 {
		return nil
	}
	n, err := w.write(w.buf)
	if err == nil && n != len(w.buf) {
		err = io.ErrShortWrite
	}
	w.resetBuf()
	if err == nil {
		w.size += int64(n)
		return nil
	}
	werr := fmt.Errorf("aof: write %s: %w", w.path, err)
	// Whatever part of the batch landed must go: the next batch would bury it
	// in the middle of the log, where Replay calls it corruption.
	rerr := w.f.Truncate(w.size)
	if rerr == nil {
		_, rerr = w.f.Seek(w.size, io.SeekStart)
	}
	if rerr != nil {
		return errors.Join(werr, w.fail(fmt.Errorf("aof: roll back %s to %d bytes: %w", w.path, w.size, rerr)))
	}
	return werr
}

// Sync fsyncs the file: every flushed record is durable when it returns nil.
// A failure is sticky (see the package Caveats). One fsync, O(dirty pages).
// Sync may run on another goroutine than the owner's.
func (w *Writer) Sync() error {
	if w.closed {
		return ErrClosed
	}
	if err := w.failed(); err != nil {
		return err
	}
	if err := w.f.Sync(); err != nil {
		return w.fail(fmt.Errorf("aof: fsync %s: %w", w.path, err))
	}
	return nil
}

// SyncPolled is Sync, with the fsync of an *os.File made through Linux AIO
// and its completion read through the runtime's poller (aiosync_linux.go):
// the calling goroutine parks and its P runs the others while the disk
// works, where fsync(2) kept the P until sysmon took it back. The process
// has one AIO context, never freed (io_destroy takes tens of ms), and its
// fsyncs go one at a time: for the log's own fsyncs, which go one at a
// time anyway. Elsewhere, or where AIO is refused, it is Sync.
func (w *Writer) SyncPolled() error {
	if w.closed {
		return ErrClosed
	}
	if err := w.failed(); err != nil {
		return err
	}
	ok, err := w.syncPolled()
	if !ok {
		return w.Sync()
	}
	if err != nil {
		return w.fail(fmt.Errorf("aof: fsync %s: %w", w.path, err))
	}
	return nil
}

// SyncRaw is Sync, with the fsync(2) of an *os.File made as a raw system
// call (rawwrite_linux.go): the calling goroutine keeps its P until the
// disk answers, instead of handing it to another thread and taking it back
// (with one P, two thread switches and the runtime's sysmon woken, for
// every fsync). Nothing else runs on that P meanwhile, and a GC's
// stop-the-world waits for it: for callers that would wait for the fsync
// anyway, and only while fsyncs are short. Elsewhere it is Sync.
func (w *Writer) SyncRaw() error {
	if w.closed {
		return ErrClosed
	}
	if err := w.failed(); err != nil {
		return err
	}
	ok, err := w.syncRaw()
	if !ok {
		return w.Sync()
	}
	if err != nil {
		return w.fail(fmt.Errorf("aof: fsync %s: %w", w.path, err))
	}
	return nil
}

// Close flushes, fsyncs and closes the file, returning the first error. The
// file is closed even when flushing fails.
func (w *Writer) Close() error {
	if w.closed {
		return ErrClosed
	}
	err := w.Flush()
	if err == nil {
		err = w.Sync()
	}
	w.closed = true
	if cerr := w.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("aof: close %s: %w", w.path, cerr)
	}
	return err
}

func (w *Writer) resetBuf() {
	if cap(w.buf) > maxRetainedBuffer {
		w.buf = nil
		return
	}
	w.buf = w.buf[:0]
}

func (w *Writer) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// fail records cause as the sticky failure (the first one wins) and returns
// the sticky error.
func (w *Writer) fail(cause error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = fmt.Errorf("%w: %w", ErrWriterFailed, cause)
	}
	return w.err
}

// Install makes the rewritten log at tmpPath the log at path: fsync tmpPath,
// rename it over path, fsync the directory. A crash at any point leaves either
// the old log or the new one, whole. Cost: two fsyncs and a rename.
//
// The Writer that wrote tmpPath must have flushed everything; it may stay open
// and go on appending after Install, since its descriptor follows the file.
// If Install fails before the rename, path is untouched (the old log and its
// Writer go on); see ErrRenameNotDurable for a failure after it.
func Install(fs FS, tmpPath, path string) error {
	f, err := fs.OpenFile(tmpPath, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("aof: install %s: %w", tmpPath, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("aof: install: fsync %s: %w", tmpPath, err)
	}
	if err := fs.Rename(tmpPath, path); err != nil {
		return fmt.Errorf("aof: install: rename %s to %s: %w", tmpPath, path, err)
	}
	if err := fs.SyncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("aof: install %s: %w: %w", path, ErrRenameNotDurable, err)
	}
	return nil
}
