//go:build linux && (amd64 || arm64)

package aof

import (
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// The fsync of SyncPolled, where it can, goes through Linux AIO (IOCB_CMD_FSYNC,
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
// is refused (no context to be had, a file it cannot fsync) SyncPolled
// makes the ordinary call.

// aioSync is the process's one AIO context and its eventfd, made at the
// first SyncPolled and never freed: io_destroy waits tens of milliseconds.
// Fsyncs through it go one at a time (the log's: once a second, a
// compaction's, a rolled segment's), so one completion is ever pending.
var aioSync struct {
	lock  chan struct{} // held from submit to reaping
	ctx   uintptr       // aio_context_t; 0 until made
	ev    *os.File      // the eventfd, non-blocking: reads park in the poller
	off   bool          // AIO was refused once: SyncPolled makes the ordinary call
	count atomic.Uint64 // fsyncs made through it (tests)
}

func init() { aioSync.lock = make(chan struct{}, 1) }

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
	aioSync.lock <- struct{}{}
	defer func() { <-aioSync.lock }()
	if aioSync.off || !aioSetup() {
		return false, nil
	}
	var errno syscall.Errno
	cerr := r.rc.Control(func(fd uintptr) {
		ok, errno = aioFsync(fd)
	})
	if cerr != nil {
		return true, cerr
	}
	if !ok {
		aioSync.off = true // refused for this file, so for the next: one probe, not one a second
		return false, nil
	}
	aioSync.count.Add(1)
	if errno != 0 {
		return true, &os.PathError{Op: "sync", Path: w.path, Err: errno}
	}
	return true, nil
}

// aioSetup makes the context and the eventfd once. Called with the lock
// held; false (and AIO off for good) if either is refused.
func aioSetup() bool {
	if aioSync.ctx != 0 {
		return true
	}
	var ctx uintptr
	if _, _, e := syscall.Syscall(syscall.SYS_IO_SETUP, 1, uintptr(unsafe.Pointer(&ctx)), 0); e != 0 {
		aioSync.off = true
		return false
	}
	efd, _, e := syscall.Syscall(syscall.SYS_EVENTFD2, 0, syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	if e != 0 {
		syscall.Syscall(syscall.SYS_IO_DESTROY, ctx, 0, 0)
		aioSync.off = true
		return false
	}
	aioSync.ctx, aioSync.ev = ctx, os.NewFile(efd, "aof-fsync-eventfd")
	return true
}

// aioFsync submits an fsync of fd, parks until the eventfd says it is
// done, and reaps it. submitted is false if the kernel refused the
// request; errno is the fsync's own result.
func aioFsync(fd uintptr) (submitted bool, errno syscall.Errno) {
	cb := iocb{opcode: iocbCmdFsync, fildes: uint32(fd), flags: iocbFlagResfd, resfd: uint32(aioSync.ev.Fd())}
	cbs := [1]*iocb{&cb}
	for {
		n, _, e := syscall.Syscall(syscall.SYS_IO_SUBMIT, aioSync.ctx, 1, uintptr(unsafe.Pointer(&cbs[0])))
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
	aioSync.ev.Read(buf[:])
	var ev ioEvent
	for {
		n, _, e := syscall.Syscall6(syscall.SYS_IO_GETEVENTS, aioSync.ctx, 1, 1, uintptr(unsafe.Pointer(&ev)), 0, 0)
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

// PolledSyncs is how many fsyncs went through AIO (SyncPolled) since the
// process started: its callers' tests tell which path an fsync took.
func PolledSyncs() uint64 { return aioSync.count.Load() }
