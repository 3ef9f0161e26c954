package finetimer

import (
	"os"
	"syscall"
	"time"
	"unsafe"
)

// Timer is a Linux timerfd read through the Go netpoller: a sleep with
// the kernel's microsecond resolution that holds no thread and no P while
// it waits. The Go runtime's own timers wake an idle process up to a
// millisecond late: it sleeps in epoll_wait, whose timeout is whole
// milliseconds (runtime/netpoll_epoll.go rounds a sub-millisecond remainder
// up to 1 ms and truncates the rest), so a deadline at the start of a
// millisecond is met on average half a millisecond after it. An fd event
// ends epoll_wait at once.
type Timer struct {
	// C receives one value per expiry read from the fd (buffered 1: an
	// expiry while one is pending is one wake-up).
	C <-chan struct{}
	c chan struct{}

	f  *os.File
	rc syscall.RawConn
}

type itimerspec struct {
	interval, value syscall.Timespec
}

const (
	clockMonotonic = 1 // CLOCK_MONOTONIC: what Go's monotonic clock reads
	tfdNonblock    = syscall.O_NONBLOCK
	tfdCloexec     = syscall.O_CLOEXEC
)

// New opens the timerfd and starts the goroutine that turns its expiries
// into values on C. It fails where timerfd is refused (old kernels,
// seccomp); the caller then keeps the Go timer alone.
func New() (*Timer, error) {
	fd, _, errno := syscall.Syscall(syscall.SYS_TIMERFD_CREATE, clockMonotonic, tfdNonblock|tfdCloexec, 0)
	if errno != 0 {
		return nil, os.NewSyscallError("timerfd_create", errno)
	}
	f := os.NewFile(fd, "timerfd") // non-blocking: registered with the netpoller
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	c := make(chan struct{}, 1)
	t := &Timer{C: c, c: c, f: f, rc: rc}
	go t.read()
	return t, nil
}

// read forwards expiries until the fd is closed. The read and the arming
// are raw system calls (no entersyscall): a timerfd never blocks a
// non-blocking read, and on one CPU the runtime's bookkeeping around a
// system call (waking sysmon, which then hands the P to another thread)
// cost more context switches than the timer saves (see resp/rawio_linux.go).
//
// It stays inside one RawConn.Read: after an expiry it waits on the poller
// without reading again. A read that finds the expiry empties the timerfd's
// counter, and a later expiry is a new edge that ends the wait, so the
// read that would find nothing (EAGAIN) is skipped: one system call an
// expiry. A new RawConn.Read would have to make it, since it clears the
// poller's readiness mark before its first read (internal/poll's prepareRead).
func (t *Timer) read() {
	var buf [8]byte
	t.rc.Read(func(fd uintptr) bool {
		_, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&buf[0])), 8)
		switch e {
		case syscall.EAGAIN: // not expired (a wake-up from an earlier edge)
		case syscall.EBADF:
			return true // closed under us
		default:
			// An expiry, or an error no timerfd we arm can give: either
			// wakes the caller, which at worst finds nothing due.
			select {
			case t.c <- struct{}{}:
			default: // a wake-up is already pending; one is enough
			}
		}
		return false // wait on the poller; Read returns once the fd is closed
	})
}

// Arm sets the timer to expire d from now, replacing any earlier arming; d
// at or below zero expires at once (a zero it_value would disarm it). One
// system call, about a microsecond.
func (t *Timer) Arm(d time.Duration) {
	if d <= 0 {
		d = 1
	}
	spec := itimerspec{value: syscall.NsecToTimespec(int64(d))}
	t.rc.Control(func(fd uintptr) { // holds the fd open: no use after close
		syscall.RawSyscall6(syscall.SYS_TIMERFD_SETTIME, fd, 0, uintptr(unsafe.Pointer(&spec)), 0, 0, 0)
	})
}

// Close stops the reader goroutine and releases the fd.
func (t *Timer) Close() { t.f.Close() }
