package aof

import (
	"os"
	"syscall"
	"unsafe"
)

// rawFile is an *os.File's descriptor and one write's state. The state
// and the callback live here, made once: a closure passed to
// RawConn.Control escapes, and with the variables it captured that was an
// allocation a write.
type rawFile struct {
	rc    syscall.RawConn
	fn    func(fd uintptr)
	b     []byte
	n     int
	errno syscall.Errno
}

// write appends b to the file. An *os.File gets raw write calls, without the
// runtime's entersyscall: on one CPU (the server pinned, GOMAXPROCS 1)
// each log write after an idle moment woke the runtime's sysmon thread,
// and the log writes a batch for nearly every job when jobs come one at a
// time: about 3 context switches a job, a third of the server's CPU (perf,
// 1k jobs/s). The price is Redis's: a write the kernel holds up (dirty page
// throttling) holds this goroutine's P with it instead of handing it on,
// as Redis's own AOF write holds its one thread. fsync keeps the normal
// path: it blocks by design. docs/decisions/syscalls.md has the measurement.
func (w *Writer) write(b []byte) (int, error) {
	of, ok := w.f.(*os.File)
	if !ok || len(b) == 0 {
		return w.f.Write(b)
	}
	if w.raw == nil { // once per file: SyscallConn allocates
		rc, err := of.SyscallConn()
		if err != nil {
			return w.f.Write(b)
		}
		w.raw = &rawFile{rc: rc}
		w.raw.fn = w.raw.write
	}
	r := w.raw
	r.b, r.n, r.errno = b, 0, 0
	cerr := r.rc.Control(r.fn)
	n, errno := r.n, r.errno
	r.b = nil // the caller's buffer is not ours to keep
	if cerr != nil {
		return n, cerr
	}
	if errno != 0 {
		return n, &os.PathError{Op: "write", Path: of.Name(), Err: errno}
	}
	return n, nil
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
