package aof

import (
	"os"
	"syscall"
	"unsafe"
)

// write appends b to the file. An *os.File gets raw write calls, without the
// runtime's entersyscall: on one CPU (the server pinned, GOMAXPROCS 1)
// each log write after an idle moment woke the runtime's sysmon thread,
// and the log writes a batch for nearly every job when jobs come one at a
// time: about 3 context switches a job, a third of the server's CPU (perf,
// 1k jobs/s). The price is Redis's: a write the kernel holds up (dirty page
// throttling) holds this goroutine's P with it instead of handing it on,
// as Redis's own AOF write holds its one thread. fsync keeps the normal
// path: it blocks by design. docs/decisions.md has the measurement.
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
		w.raw = rc
	}
	n := 0
	var errno syscall.Errno
	cerr := w.raw.Control(func(fd uintptr) {
		for n < len(b) {
			r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[n])), uintptr(len(b)-n))
			if e == syscall.EINTR {
				continue
			}
			if e != 0 {
				errno = e
				return
			}
			if r == 0 {
				return
			}
			n += int(r)
		}
	})
	if cerr != nil {
		return n, cerr
	}
	if errno != 0 {
		return n, &os.PathError{Op: "write", Path: of.Name(), Err: errno}
	}
	return n, nil
}
