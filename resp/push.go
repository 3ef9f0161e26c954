package resp

import (
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/delayd/delayd/commands"
)

// The push path: messages other goroutines send a connection (client
// tracking's invalidations, MONITOR's lines), possibly under the engine's
// lock, so sending never blocks on the network.
//
// Order is Redis's: a push never overtakes a reply the connection computed
// before it. While the connection's goroutine runs a batch of commands it
// is busy, and pushes wait in the outbox; its flush writes them right after
// the batch's replies. A push made while the connection is idle (parked in
// Read, or in a blocking pop) is written at once by a small writer
// goroutine, started on the first push. (An invalidation of a key the
// client read in this batch may thus follow the reply of a read made after
// the change: that costs a cache miss, never a stale value.)
//
// The outbox is bounded (--client-output-buffer-limit, limits.go): a
// client that does not read its pushes is disconnected (logged when its
// connection ends), as Redis disconnects a client past its output buffer
// limit.

// outbox is one connection's pushes. It implements commands.Conn.
type outbox struct {
	cn    *conn
	proto atomic.Int32 // the connection's protocol, for encoding pushes

	mu       sync.Mutex
	buf      []byte // pushes not yet written
	spare    []byte // the writer's last buffer, for reuse
	busy     bool   // the connection is running commands: its flush writes buf
	dead     bool   // gone, or disconnected for falling behind
	overflow bool   // dead because buf passed maxPushBytes
	started  bool   // the writer goroutine runs
	kick     chan struct{}
	done     chan struct{} // closed when the connection ends

	max       int         // most bytes waiting, being written included
	lim       OutputLimit // for the soft limit
	inflight  int         // bytes the writer goroutine is writing
	softSince time.Time   // when the waiting bytes went above the soft limit
}

func newOutbox(cn *conn, lim OutputLimit) *outbox {
	ob := &outbox{cn: cn, kick: make(chan struct{}, 1), done: make(chan struct{}), max: lim.pushCap(), lim: lim}
	ob.proto.Store(2)
	return ob
}

// Push implements commands.Conn. O(size of the message); never blocks.
func (ob *outbox) Push(fn func(w commands.Writer)) bool {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	if ob.dead {
		return false
	}
	w := writer{buf: ob.buf, proto: int(ob.proto.Load())}
	fn(&w)
	ob.buf = w.buf
	if ob.overflowing() {
		ob.dead, ob.overflow, ob.buf = true, true, nil
		ob.cn.kill()
		return false
	}
	if !ob.busy && len(ob.buf) > 0 {
		ob.wake()
	}
	return true
}

// Kill implements commands.Conn.
func (ob *outbox) Kill() { ob.cn.kill() }

// Output implements commands.Conn: the batch of replies the connection's
// goroutine is writing (with the pushes it took along), the pushes
// waiting, and those the writer goroutine is writing. Bytes the kernel
// took are not counted: like Redis's omem, this is what the server holds.
func (ob *outbox) Output() (bytes, blocks int) {
	if n := ob.cn.writing.Load(); n > 0 {
		bytes, blocks = int(n), 1
	}
	ob.mu.Lock()
	defer ob.mu.Unlock()
	for _, n := range []int{len(ob.buf), ob.inflight} {
		if n > 0 {
			bytes += n
			blocks++
		}
	}
	return bytes, blocks
}

// wake has the writer goroutine write buf. Called with mu held.
func (ob *outbox) wake() {
	if !ob.started {
		ob.started = true
		go ob.run()
	}
	select {
	case ob.kick <- struct{}{}:
	default:
	}
}

// run writes pushes made while the connection is idle.
func (ob *outbox) run() {
	for {
		select {
		case <-ob.kick:
		case <-ob.done:
			return
		}
		ob.mu.Lock()
		if ob.busy || ob.dead || len(ob.buf) == 0 {
			ob.mu.Unlock()
			continue
		}
		out := ob.buf
		ob.buf, ob.spare = ob.spare[:0], nil // never the array being written
		ob.inflight = len(out)
		ob.mu.Unlock()
		// net.Conn serializes whole Writes, so this never splits a reply
		// the connection's goroutine writes at the same time.
		_, err := ob.cn.nc.Write(out)
		ob.mu.Lock()
		ob.inflight = 0
		if cap(out) <= 64<<10 {
			ob.spare = out[:0]
		}
		if err != nil {
			ob.dead = true
		}
		ob.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// begin marks the connection busy: replies are being computed, and pushes
// wait for them.
func (ob *outbox) begin() {
	ob.mu.Lock()
	ob.busy = true
	ob.mu.Unlock()
}

// drainInto appends the waiting pushes after the replies in buf. Called by
// the connection's goroutine just before it writes buf.
func (ob *outbox) drainInto(buf []byte) []byte {
	ob.mu.Lock()
	if len(ob.buf) > 0 {
		buf = append(buf, ob.buf...)
		ob.buf = ob.buf[:0]
	}
	ob.mu.Unlock()
	return buf
}

// end marks the connection idle after its replies are written; pushes made
// meanwhile go out through the writer goroutine.
func (ob *outbox) end() {
	ob.mu.Lock()
	ob.busy = false
	if len(ob.buf) > 0 && !ob.dead {
		ob.wake()
	}
	ob.mu.Unlock()
}

// close ends the writer goroutine; later pushes are dropped.
func (ob *outbox) close() {
	ob.mu.Lock()
	ob.dead = true
	ob.buf = nil
	ob.mu.Unlock()
	close(ob.done)
}

// kill closes the connection from any goroutine without blocking: the
// deadline wakes its reader (and any write in progress), and the
// connection's goroutine, seeing killed, ends.
func (cn *conn) kill() {
	cn.killed.Store(true)
	cn.nc.SetDeadline(time.Now())
}

// fdOf is the socket's descriptor, for CLIENT LIST fd=; -1 if unknown.
func fdOf(nc net.Conn) int {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return -1
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	rc.Control(func(f uintptr) { fd = int(f) })
	return fd
}
