//go:build linux && (amd64 || arm64)

package aof

import (
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// The fsync of Sync, where it can, goes through Linux AIO (IOCB_CMD_FSYNC,
// since 4.18): the kernel runs it on a worker and signals an eventfd the
// runtime's poller watches, and the calling goroutine parks on that
// eventfd meanwhile. An fsync(2) made as an ordinary system call keeps the
// caller's P until the runtime's sysmon takes it back, and sysmon, once it
// has had nothing to do for a millisecond, looks only every 10 ms and takes
// a P on its second look: on a server of one P (pinned to one CPU) every
// goroutine stopped for up to 20 ms, more on a loaded machine, while the
// everysec syncer's fsync ran (an execution trace of bench/loadgen's ack
// run: the P held through the whole fsync in 26 of 48 fsyncs over 1 ms, up
// to 166 ms). docs/decisions/compaction-stalls.md. What the fsync does
// and reports is fsync(2)'s (vfs_fsync on the kernel's worker); where AIO
// is refused (no context to be had, a file it cannot fsync) Sync makes the
// ordinary call. Each Writer has its own context (io_setup reserves about
// 16 of the system's aio-max-nr, 65,536 by default), freed by Close.

// aioState is a Writer's AIO context and eventfd, made at its first Sync
// and let go by Close: one per file, so that the fsyncs of different logs
// (a cluster's Raft groups) still run side by side. One completion is ever
// pending on it: lock is held from submit to reaping.
type aioState struct {
	lock chan struct{}
	ctx  uintptr  // aio_context_t; 0 until made
	ev   *os.File // the eventfd, non-blocking: its reads park in the poller
	off  bool     // AIO was refused for this file: Sync makes the ordinary call
}

// aioSyncs counts the fsyncs made through AIO (tests).
var aioSyncs atomic.Uint64

// iocb and ioEvent are the kernel's struct iocb and struct io_event
// (include/uapi/linux/aio_abi.h) on a little-endian 64-bit machine.
type iocb struct {
	data     uint64
	key      uint32
	rwFlags  uint32
	opcode   uint16
	reqprio  int16
	fildes   uint32
	buf      uint64
	nbytes   uint64
	offset   int64
	reserved uint64
	flags    uint32
	resfd    uint32
}

type ioEvent struct {
	data, obj uint64
	res, res2 int64
}

const (
	iocbCmdFsync  = 2
	iocbFlagResfd = 1 << 0
)

// syncPolled fsyncs w's file through AIO. ok is false where it did not
// (not an *os.File, AIO refused): the caller makes the ordinary call.
func (w *Writer) syncPolled() (ok bool, err error) {
	r := w.raw
	if r == nil {
		return false, nil
	}
	a := &r.aio
	a.lock <- struct{}{}
	defer func() { <-a.lock }()
	if a.off || !a.setup() {
		return false, nil
	}
	var errno syscall.Errno
	cerr := r.rc.Control(func(fd uintptr) {
		ok, errno = a.fsync(fd)
	})
	if cerr != nil {
		return true, cerr
	}
	if !ok {
		a.off = true // refused for this file: one probe, not one a second
		a.close()
		return false, nil
	}
	aioSyncs.Add(1)
	if errno != 0 {
		return true, &os.PathError{Op: "sync", Path: w.path, Err: errno}
	}
	return true, nil
}

// setup makes the context and the eventfd once. Called with lock held;
// false (and AIO off for the file) if either is refused.
func (a *aioState) setup() bool {
	if a.ctx != 0 {
		return true
	}
	var ctx uintptr
	if _, _, e := syscall.Syscall(syscall.SYS_IO_SETUP, 1, uintptr(unsafe.Pointer(&ctx)), 0); e != 0 {
		a.off = true
		return false
	}
	efd, _, e := syscall.Syscall(syscall.SYS_EVENTFD2, 0, syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	if e != 0 {
		syscall.Syscall(syscall.SYS_IO_DESTROY, ctx, 0, 0)
		a.off = true
		return false
	}
	a.ctx, a.ev = ctx, os.NewFile(efd, "aof-fsync-eventfd")
	return true
}

// close lets go of the context and the eventfd. Called with lock held, or
// by the Writer's Close.
func (a *aioState) close() {
	if a.ctx != 0 {
		syscall.Syscall(syscall.SYS_IO_DESTROY, a.ctx, 0, 0)
		a.ev.Close()
		a.ctx, a.ev = 0, nil
	}
}

// closeAIO is Close's: the file's AIO state goes with it.
func (w *Writer) closeAIO() {
	if r := w.raw; r != nil {
		r.aio.lock <- struct{}{}
		r.aio.close()
		<-r.aio.lock
	}
}

// fsync submits an fsync of fd, parks until the eventfd says it is done,
// and reaps it. submitted is false if the kernel refused the request;
// errno is the fsync's own result.
func (a *aioState) fsync(fd uintptr) (submitted bool, errno syscall.Errno) {
	cb := iocb{opcode: iocbCmdFsync, fildes: uint32(fd), flags: iocbFlagResfd, resfd: uint32(a.ev.Fd())}
	cbs := [1]*iocb{&cb}
	for {
		n, _, e := syscall.Syscall(syscall.SYS_IO_SUBMIT, a.ctx, 1, uintptr(unsafe.Pointer(&cbs[0])))
		if e == syscall.EINTR || e == syscall.EAGAIN {
			continue
		}
		if e != 0 || n != 1 {
			return false, 0
		}
		break
	}
	// The eventfd's counter: a read parks the goroutine in the poller
	// until the kernel's worker has made the fsync. Should it fail, the
	// reaping below waits in the kernel instead.
	var buf [8]byte
	a.ev.Read(buf[:])
	var ev ioEvent
	for {
		n, _, e := syscall.Syscall6(syscall.SYS_IO_GETEVENTS, a.ctx, 1, 1, uintptr(unsafe.Pointer(&ev)), 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 || n != 1 {
			return true, syscall.EIO // submitted and signalled, but not to be reaped: say the fsync failed
		}
		break
	}
	if ev.res < 0 {
		return true, syscall.Errno(-ev.res)
	}
	return true, 0
}
