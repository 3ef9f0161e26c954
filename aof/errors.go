package aof

import (
	"errors"
	"fmt"
	"strings"
)

// Errors, grouped by the phase that returns them. Compare with errors.Is.
var (
	// Replay and Repair.

	// ErrCorrupt means the log is damaged before its tail. It is always
	// returned inside a *CorruptError, which also matches one of the reasons
	// below.
	ErrCorrupt = errors.New("aof: log is corrupt")

	// ErrBadMagic: the file does not start with "DLYD"; it is not a delayd log.
	ErrBadMagic = errors.New("aof: not a delayd log (bad magic)")
	// ErrBadVersion: the header names a format version this build cannot read.
	ErrBadVersion = errors.New("aof: unknown log format version")
	// ErrChecksum: a record's CRC-32C does not match its length and payload.
	ErrChecksum = errors.New("aof: record checksum mismatch")
	// ErrBadLength: a record's length runs past the end of the file or over
	// MaxRecordSize, and good records follow it.
	ErrBadLength = errors.New("aof: record length out of range")
	// ErrZeroFill: zero-filled space (a zero length) with data after it.
	ErrZeroFill = errors.New("aof: zero-filled space before the end of the log")

	// Writing (OpenAppend, Flush, Sync, Close).

	// ErrSizeMismatch: OpenAppend was given a size that differs from the file's
	// size, so the file changed since it was replayed.
	ErrSizeMismatch = errors.New("aof: log size differs from the replayed size")
	// ErrWriterFailed: an earlier fsync failed, or a failed write could not be
	// rolled back; the Writer refuses further work (see the package Caveats).
	ErrWriterFailed = errors.New("aof: writer failed earlier and cannot continue")
	// ErrClosed: the Writer was closed.
	ErrClosed = errors.New("aof: writer is closed")

	// Install.

	// ErrRenameNotDurable: Install renamed the new log over the old one, but
	// the directory fsync failed. The path now names the new log, so the caller
	// must go on with the new file (the old one is unlinked), yet a crash may
	// still bring the old log back. Treat it like a failed fsync.
	ErrRenameNotDurable = errors.New("aof: log renamed, but the directory fsync failed")

	// MemFS.

	// ErrInjected is the default error of a Fault injected into a MemFS.
	ErrInjected = errors.New("aof: injected fault")
)

// CorruptError reports damage before the tail of a log: Replay stops there and
// cuts nothing; Repair cuts the log at Offset. It matches ErrCorrupt and its
// Reason with errors.Is.
type CorruptError struct {
	Path   string // the log file
	Offset int64  // byte offset of the first record (or header) that does not check out
	Reason error  // ErrBadMagic, ErrBadVersion, ErrChecksum, ErrBadLength or ErrZeroFill
}

func (e *CorruptError) Error() string {
	reason := "damaged"
	if e.Reason != nil {
		reason = strings.TrimPrefix(e.Reason.Error(), "aof: ")
	}
	return fmt.Sprintf("aof: %s is corrupt at offset %d (%s); start with --repair to cut the log there "+
		"and keep the cut bytes beside it in %s.broken", e.Path, e.Offset, reason, e.Path)
}

// Unwrap lets errors.Is match both ErrCorrupt and the reason.
func (e *CorruptError) Unwrap() []error {
	if e.Reason == nil {
		return []error{ErrCorrupt}
	}
	return []error{ErrCorrupt, e.Reason}
}
