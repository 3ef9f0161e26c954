package aof

import (
	"os"
	"syscall"
	"unsafe"
)

// rawFile is an *os.File's descriptor and one write's state, and one
// fsync's. The state and the callbacks live here, made once: a closure
// passed to RawConn.Control escapes, and with the variables it captured
// that was an allocation a write. The fsync has its own fields: it may run
// on another goroutine than the writes.
type rawFile struct {
	rc    syscall.RawConn
	fn    func(fd uintptr)
	b     []byte
	n     int
	errno syscall.Errno

	syncFn    func(fd uintptr)
	syncErrno syscall.Errno
}

// write appends b to the file. An *os.File gets raw write calls, without the
// runtime's entersyscall: on one CPU (the server pinned, GOMAXPROCS 1)
// each log write after an idle moment woke the runtime's sysmon thread,
// and the log writes a batch for nearly every job when jobs come one at a
// time: about 3 context switches a job, a third of the server's CPU (perf,
// 1k jobs/s). The price is Redis's: a write the kernel holds up (dirty page
// throttling) holds this goroutine's P with it instead of handing it on,
// as Redis's own AOF write holds its one thread. fsync keeps the normal
// path (Sync) but where the caller asks for this one (SyncRaw).
// docs/decisions/syscalls.md has the measurement.
func (w *Writer) write(b []byte) (int, error) {
	r := w.raw
	if r == nil || len(b) == 0 {
		return w.f.Write(b)
	}
	r.b, r.n, r.errno = b, 0, 0
	cerr := r.rc.Control(r.fn)
	n, errno := r.n, r.errno
	r.b = nil // the caller's buffer is not ours to keep
	if cerr != nil {
		return n, cerr
	}
	if errno != 0 {
		return n, &os.PathError{Op: "write", Path: w.path, Err: errno}
	}
	return n, nil
}

// initRaw makes the raw calls' state of an *os.File, once per file at its
// opening (SyscallConn allocates). Other files keep w.raw nil.
func (w *Writer) initRaw() {
	of, ok := w.f.(*os.File)
	if !ok {
		return
	}
	rc, err := of.SyscallConn()
	if err != nil {
		return
	}
	r := &rawFile{rc: rc}
	r.fn, r.syncFn = r.write, r.fsync
	w.raw = r
}

// syncRaw is SyncRaw's fsync of an *os.File: fsync(2) without the
// runtime's entersyscall, so the calling goroutine keeps its P until the
// disk answers. ok is false for another kind of file.
func (w *Writer) syncRaw() (ok bool, err error) {
	r := w.raw
	if r == nil {
		return false, nil
	}
	r.syncErrno = 0
	if cerr := r.rc.Control(r.syncFn); cerr != nil {
		return true, cerr
	}
	if r.syncErrno != 0 {
		return true, &os.PathError{Op: "sync", Path: w.path, Err: r.syncErrno}
	}
	return true, nil
}

// fsync is syncRaw's callback.
func (r *rawFile) fsync(fd uintptr) {
	for {
		_, _, e := syscall.RawSyscall(syscall.SYS_FSYNC, fd, 0, 0)
		if e != syscall.EINTR {
			r.syncErrno = e
			return
		}
	}
}

// write is Writer.write's callback: all of b, or the error that stopped it.
func (r *rawFile) write(fd uintptr) {
	b := r.b
	for r.n < len(b) {
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[r.n])), uintptr(len(b)-r.n))
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			r.errno = e
			return
		}
		if n == 0 {
			return
		}
		r.n += int(n)
	}
}
