package resp

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// rawConn reads and writes a plain socket with raw system calls, through
// the netpoller as net.Conn does, but without the runtime's
// entersyscall/exitsyscall around each call. Those exist for calls that
// may block; on a non-blocking socket read and write return at once, and
// on one CPU (the server pinned, GOMAXPROCS 1) the bookkeeping is costly:
// every call made after an idle moment wakes the runtime's sysmon thread,
// which then sees the P "in a system call", takes it and hands it to
// another thread. With workers that block for each job that was 5 to 6
// context switches a job and about 40% of the server's CPU (perf, the
// rivals race's steady case). Deadlines, Close and the one-Write-at-a-time
// rule are net.Conn's own: the calls run inside RawConn.Read and Write,
// which hold the descriptor and wait on its poller.
type rawConn struct {
	net.Conn
	rc syscall.RawConn
}

// fastIO wraps plain TCP and Unix sockets; anything else (TLS, a test's
// pipe) is returned as it is.
func fastIO(nc net.Conn) net.Conn {
	var sc syscall.Conn
	switch c := nc.(type) {
	case *net.TCPConn:
		sc = c
	case *net.UnixConn:
		sc = c
	default:
		return nc
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nc
	}
	return &rawConn{Conn: nc, rc: rc}
}

// SyscallConn keeps the descriptor reachable (CLIENT LIST fd=).
func (c *rawConn) SyscallConn() (syscall.RawConn, error) { return c.rc, nil }

func (c *rawConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := c.rc.Read(func(fd uintptr) bool {
		for {
			r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			switch e {
			case 0:
				n = int(r)
				return true
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // wait for the poller
			default:
				errno = e
				return true
			}
		}
	})
	if err == nil && errno != 0 {
		err = os.NewSyscallError("read", errno)
	}
	if err != nil {
		return n, c.opError("read", err)
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (c *rawConn) Write(p []byte) (int, error) {
	var n int
	var errno syscall.Errno
	err := c.rc.Write(func(fd uintptr) bool {
		for n < len(p) {
			r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[n])), uintptr(len(p)-n))
			switch e {
			case 0:
				n += int(r)
			case syscall.EINTR:
			case syscall.EAGAIN:
				return false // the send buffer is full: wait for the poller
			default:
				errno = e
				return true
			}
		}
		return true
	})
	if err == nil && errno != 0 {
		err = os.NewSyscallError("write", errno)
	}
	if err != nil {
		return n, c.opError("write", err)
	}
	return n, nil
}

// opError wraps err as net.Conn's methods do, so callers' checks (a
// deadline's os.ErrDeadlineExceeded, net.ErrClosed) read the same.
func (c *rawConn) opError(op string, err error) error {
	if oe, ok := err.(*net.OpError); ok { // RawConn's own ("raw-read")
		oe.Op = op
		return oe
	}
	return &net.OpError{Op: op, Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

// peerGone asks the kernel, without waiting, whether the peer has hung up
// or reset: one ppoll(2) (arm64 has no poll). The parked pop's watcher is
// stopped by a read deadline, which ends its read before it looks at the
// socket, so a hang-up that came just before a job was served is seen only
// here; written into the dead socket, the job was lost (BLPOP) or held
// until its ack timeout (TestJobServedAsClientsHangUp: 3 runs in 30).
func (c *rawConn) peerGone() bool {
	const pollRDHUP = 0x2000
	var gone bool
	c.rc.Control(func(fd uintptr) {
		pfd := struct {
			fd              int32
			events, revents int16
		}{int32(fd), pollRDHUP, 0}
		var now syscall.Timespec // no wait
		r, _, e := syscall.RawSyscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd)), 1, uintptr(unsafe.Pointer(&now)), 0, 0, 0)
		gone = e == 0 && r == 1 && pfd.revents&(pollRDHUP|syscall.EPOLLHUP|syscall.EPOLLERR) != 0
	})
	return gone
}
