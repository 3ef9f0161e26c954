package resp

import (
	"io"
	"net"
	"os"
	"sync"
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
	// The calls' state and callbacks live here, made once: a closure
	// passed to RawConn.Read or Write escapes (an interface call), and
	// with the variables it captured that was three allocations a call,
	// 12 of the 27 of a parked pop's cycle (BenchmarkParkedPop). rmu and
	// wmu keep one call at a time on each: writes come from the
	// connection's goroutine and its outbox's (push.go), reads from the
	// connection's goroutine and its reader goroutine, one after the other.
	rmu, wmu        sync.Mutex
	rd, wr          rawIO
	readFn, writeFn func(fd uintptr) bool
	pmu             sync.Mutex // peerGone's, apart: a parked read holds rmu
	pollFn          func(fd uintptr)
	gone            bool // peerGone's answer, under pmu
}

// rawIO is one Read's or Write's buffer and result.
type rawIO struct {
	p     []byte
	n     int
	errno syscall.Errno
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
	c := &rawConn{Conn: nc, rc: rc}
	c.readFn, c.writeFn, c.pollFn = c.read, c.write, c.poll
	return c
}

// SyscallConn keeps the descriptor reachable (CLIENT LIST fd=).
func (c *rawConn) SyscallConn() (syscall.RawConn, error) { return c.rc, nil }

func (c *rawConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	c.rd = rawIO{p: p}
	err := c.rc.Read(c.readFn)
	n, errno := c.rd.n, c.rd.errno
	c.rd.p = nil // the caller's buffer is not ours to keep
	c.rmu.Unlock()
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

// read is Read's callback: false waits for the poller.
func (c *rawConn) read(fd uintptr) bool {
	p := c.rd.p
	for {
		r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		switch e {
		case 0:
			c.rd.n = int(r)
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false // wait for the poller
		default:
			c.rd.errno = e
			return true
		}
	}
}

func (c *rawConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	c.wr = rawIO{p: p}
	err := c.rc.Write(c.writeFn)
	n, errno := c.wr.n, c.wr.errno
	c.wr.p = nil
	c.wmu.Unlock()
	if err == nil && errno != 0 {
		err = os.NewSyscallError("write", errno)
	}
	if err != nil {
		return n, c.opError("write", err)
	}
	return n, nil
}

// write is Write's callback: false waits for the poller.
func (c *rawConn) write(fd uintptr) bool {
	p := c.wr.p
	for c.wr.n < len(p) {
		r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[c.wr.n])), uintptr(len(p)-c.wr.n))
		switch e {
		case 0:
			c.wr.n += int(r)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false // the send buffer is full: wait for the poller
		default:
			c.wr.errno = e
			return true
		}
	}
	return true
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
// or reset: one ppoll(2) (arm64 has no poll). A hang-up that came just
// before a job was served may not have reached the parked pop's reader yet
// (its goroutine has not run since the poller saw it), so it is seen only
// here; written into the dead socket, the job was lost (BLPOP) or held
// until its ack timeout (TestJobServedAsClientsHangUp: 3 runs in 30 when a
// watcher stopped by a read deadline was all there was).
func (c *rawConn) peerGone() bool {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	c.gone = false
	c.rc.Control(c.pollFn)
	return c.gone
}

// poll is peerGone's callback.
func (c *rawConn) poll(fd uintptr) {
	const pollRDHUP = 0x2000
	pfd := struct {
		fd              int32
		events, revents int16
	}{int32(fd), pollRDHUP, 0}
	var now syscall.Timespec // no wait
	r, _, e := syscall.RawSyscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd)), 1, uintptr(unsafe.Pointer(&now)), 0, 0, 0)
	c.gone = e == 0 && r == 1 && pfd.revents&(pollRDHUP|syscall.EPOLLHUP|syscall.EPOLLERR) != 0
}
