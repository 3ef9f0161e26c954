// Package resp is delayd's network front end: it accepts connections, parses
// RESP commands (and inline telnet lines, with redcon's parser), hands each to
// the commands dispatcher, and writes the replies back in RESP2 or RESP3, one
// write per batch of pipelined commands.
//
// It owns what only a connection can know: the reply encoding the client
// chose (HELLO 3), the output buffer, and whether the client is still there.
// Other goroutines reach a connection only through its outbox (push.go):
// invalidation pushes and MONITOR lines, written after the replies computed
// before them, and CLIENT KILL.
// A client blocked in a pop is watched for disconnection while it waits, so a
// job is never handed to a client that has gone (DESIGN "Blocking pops").
//
// redcon's server loop runs a handler on the goroutine that reads the socket,
// so a handler that blocks cannot see the client leave; Detach would hand us
// the socket anyway. So the loop here is our own (see reader.go for why the
// fast path of parsing is too).
package resp

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/delayd/delayd/commands"
)

// Options configure a Server.
type Options struct {
	Addr       string // host:port to listen on ("": no plain listener)
	MaxClients int    // connections beyond this get an error and are closed
	// TLSAddr, with TLS, is a second listener whose connections speak TLS
	// and are then served exactly as plain ones (tls.go).
	TLSAddr    string
	TLS        *tls.Config
	Dispatcher *commands.Dispatcher
	Log        zerolog.Logger

	// Limits (limits.go).
	IdleTimeout time.Duration // close a client idle this long (0: never)
	OutputLimit OutputLimit   // cap on a client's pending output
}

// Server accepts connections and serves each on its own goroutine.
type Server struct {
	opts Options
	d    *commands.Dispatcher
	ln   net.Listener // plain; nil with Addr ""
	tln  net.Listener // TLS; nil without TLSAddr
	log  zerolog.Logger

	closing atomic.Bool
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   map[net.Conn]struct{} // guarded by mu
}

// Listen binds the addresses; Serve then accepts.
func Listen(opts Options) (*Server, error) {
	s := &Server{opts: opts, d: opts.Dispatcher, log: opts.Log, conns: make(map[net.Conn]struct{})}
	if opts.Addr != "" {
		ln, err := net.Listen("tcp", opts.Addr)
		if err != nil {
			return nil, err
		}
		s.ln = ln
	}
	if err := s.listenTLS(); err != nil {
		if s.ln != nil {
			s.ln.Close()
		}
		return nil, err
	}
	if s.ln == nil && s.tln == nil {
		return nil, errors.New("no address to listen on")
	}
	return s, nil
}

// Addr is the address the server listens on: the plain one, or the TLS
// one when there is no plain listener.
func (s *Server) Addr() net.Addr {
	if s.ln == nil {
		return s.tln.Addr()
	}
	return s.ln.Addr()
}

// Serve accepts connections on every listener until Close.
func (s *Server) Serve() error {
	if s.tln != nil {
		if s.ln == nil {
			return s.accept(s.tln)
		}
		go s.accept(s.tln)
	}
	return s.accept(s.ln)
}

func (s *Server) accept(ln net.Listener) error {
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return nil
			}
			// Out of file descriptors and the like: wait and go on, as
			// net/http does, rather than spin or stop serving.
			if backoff == 0 {
				backoff = 5 * time.Millisecond
			} else if backoff < time.Second {
				backoff *= 2
			}
			s.log.Warn().Err(err).Dur("retry_in_ms", backoff).Msg("accept failed")
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		s.wg.Add(1)
		go s.serveConn(fastIO(nc))
	}
}

// StopAccepting closes the listener; connections go on.
func (s *Server) StopAccepting() {
	if s.closing.CompareAndSwap(false, true) {
		if s.ln != nil {
			s.ln.Close()
		}
		if s.tln != nil {
			s.tln.Close()
		}
	}
}

// Close stops accepting, lets every connection finish the replies it has,
// and closes them, waiting up to grace for their goroutines.
func (s *Server) Close(grace time.Duration) {
	s.StopAccepting()
	s.mu.Lock()
	for nc := range s.conns {
		// Wakes a reader parked in Read; replies already made still go out.
		nc.SetReadDeadline(time.Now())
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		s.mu.Lock()
		for nc := range s.conns {
			nc.Close()
		}
		s.mu.Unlock()
	}
}

func (s *Server) serveConn(nc net.Conn) {
	defer s.wg.Done()
	defer nc.Close()
	s.d.TotalConns.Add(1)
	if n := s.d.Connected.Add(1); s.opts.MaxClients > 0 && n > int64(s.opts.MaxClients) {
		s.d.Connected.Add(-1)
		s.d.Rejected.Add(1)
		// Over TLS the write below makes the handshake: bound it.
		nc.SetDeadline(time.Now().Add(handshakeTimeout))
		nc.Write([]byte("-ERR max number of clients reached\r\n"))
		return
	}
	defer s.d.Connected.Add(-1)
	if s.denied(nc) {
		return
	}
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		return
	}
	s.conns[nc] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, nc)
		s.mu.Unlock()
	}()
	if tc, ok := nc.(*tls.Conn); ok && !s.handshake(tc) {
		return
	}

	cn := &conn{s: s, nc: nc, w: &writer{proto: 2}, closing: &s.closing}
	cn.ob = newOutbox(cn, s.opts.OutputLimit)
	cn.w.shared = &cn.ob.proto
	defer func() {
		cn.ob.close()
		if cn.ob.overflow {
			s.log.Warn().Str("addr", nc.RemoteAddr().String()).Int("limit", cn.ob.max).
				Msg("client disconnected: it did not read its pushes (invalidations, MONITOR)")
		}
	}()
	c := s.d.Connect(cn.w, commands.ConnInfo{
		Addr:  nc.RemoteAddr().String(),
		LAddr: nc.LocalAddr().String(),
		FD:    fdOf(nc),
		Conn:  cn.ob,
	})
	defer s.d.CloseClient(c)
	defer cn.stopReader()
	rd := newReader(cn, func() bool { return c.Authed })
	for {
		// Run every command the buffer holds, then send all their replies
		// with one write: pipelining costs one syscall per batch.
		cn.ob.begin()
		c.Seen()
		for {
			args, ok, err := rd.next()
			if err != nil {
				// The stream cannot be resynchronised: say why, then
				// close. Other connections are untouched.
				cn.w.Error("ERR " + err.Error())
				cn.flush(s.d)
				return
			}
			if !ok {
				break
			}
			start := len(cn.w.buf)
			c.Ticket = 0
			s.d.Exec(c, args)
			dropped := c.DropReply // CLIENT REPLY OFF or SKIP: no reply to wait for
			if dropped {
				c.DropReply = false
				cn.w.buf = cn.w.buf[:start]
			}
			if c.Ticket != 0 && !dropped {
				cn.logged = append(cn.logged, loggedReply{start, len(cn.w.buf), c.Ticket})
			}
			if c.Block == nil && cn.overLimit() { // a pop parked in the engine must be released by block
				return
			}
			if c.Block != nil && !cn.block(c, s.d) {
				return
			}
			if c.Quit {
				cn.flush(s.d)
				return
			}
		}
		if cn.flush(s.d) != nil || cn.killed.Load() {
			return
		}
		cn.armIdle(c)
		// Let the other connections with work run before reading again.
		// The client is most likely still reading these replies, so a read
		// now finds nothing (EAGAIN) and parks: two reads a batch where
		// Redis, told by epoll what is readable, makes one. Read after the
		// others, the next batch is usually there. The read still always
		// happens (skipping it on the poller's word is unsound: see
		// docs/decisions/syscalls.md).
		runtime.Gosched()
		if err := rd.fill(); err != nil {
			if cn.idleExpired(err) {
				s.log.Debug().Str("addr", nc.RemoteAddr().String()).Msg("closing idle client")
			}
			return
		}
	}
}

// loggedReply marks the reply of a write in the output buffer: it may leave
// only once the log holds the write, and becomes an error if that failed.
type loggedReply struct {
	start, end int
	ticket     uint64
}

// conn is the socket of one client: the reader redcon reads from (with
// bytes the reader goroutine read while the client was blocked) and the
// reply buffer.
type conn struct {
	s       *Server
	nc      net.Conn
	w       *writer
	ob      *outbox       // pushes from other goroutines (push.go)
	killed  atomic.Bool   // CLIENT KILL, or too many pushes waiting
	writing atomic.Int64  // bytes of the replies in the Write in progress (CLIENT LIST omem=)
	pending []byte        // read by the reader goroutine, not yet parsed
	logged  []loggedReply // replies in w.buf that wait for the log

	closing *atomic.Bool // the server is stopping: finish replies, then close

	// The socket's reader goroutine, started at the connection's first
	// blocked pop: while a pop waits it reads the socket, to notice the
	// client leave (and keep what it sends meanwhile). It reads once per
	// request on want and answers on got. A read it was asked for stays
	// asked once the pop is served: the connection's next read takes its
	// answer instead of reading (Read). So a worker that blocks for each job
	// costs one read that finds nothing a job, not two, and no goroutine,
	// deadline change or wake to stop a watcher (docs/decisions/blocking.md).
	want    chan struct{}
	got     chan readResult // buffered: the reader never waits on it
	reading bool            // a read was asked for and its answer not taken (main goroutine only)
	readBuf []byte          // the reader's buffer, valid from an answer until the next request

	idleArmed bool // the read deadline is --timeout's (limits.go)
}

func (cn *conn) Read(p []byte) (int, error) {
	if len(cn.pending) > 0 {
		n := copy(p, cn.pending)
		cn.pending = cn.pending[n:]
		return n, nil
	}
	if cn.reading {
		// Straight into p, not through took: pending, emptied, has no
		// room left, and appending to it would allocate a parked pop.
		r := <-cn.got
		cn.reading = false
		n := copy(p, cn.readBuf[:r.n])
		cn.pending = append(cn.pending, cn.readBuf[n:r.n]...)
		return n, r.err
	}
	return cn.nc.Read(p)
}

// flush sends the buffered replies, then the pushes made while they were
// computed, and marks the connection idle. Replies of writes wait for the
// log first (one wait covers a whole pipelined batch: group commit), so a
// reply never says a write happened before the log holds it.
func (cn *conn) flush(d *commands.Dispatcher) error {
	defer cn.ob.end()
	if len(cn.logged) > 0 {
		last := cn.logged[len(cn.logged)-1].ticket
		if d.Durable(last) != nil || len(cn.logged) > 1 {
			cn.failLogged(d)
		}
		cn.logged = cn.logged[:0]
	}
	cn.w.buf = cn.ob.drainInto(cn.w.buf)
	if len(cn.w.buf) == 0 {
		return nil
	}
	err := cn.write(cn.w.buf)
	if cap(cn.w.buf) > 64<<10 {
		cn.w.buf = nil // do not keep a big reply's buffer for the life of the connection
	} else {
		cn.w.buf = cn.w.buf[:0]
	}
	return err
}

// failLogged replaces the reply of every write whose log write failed with
// the error: such a write was not applied.
func (cn *conn) failLogged(d *commands.Dispatcher) {
	var out []byte
	prev := 0
	for _, l := range cn.logged {
		err := d.Durable(l.ticket) // already decided: no wait
		if err == nil {
			continue
		}
		out = append(out, cn.w.buf[prev:l.start]...)
		out = append(out, '-')
		out = append(out, commands.ErrorLine(err)...)
		out = append(out, "\r\n"...)
		prev = l.end
	}
	if out != nil {
		cn.w.buf = append(out, cn.w.buf[prev:]...)
	}
}

// maxPending bounds what a blocked client may send before we stop reading
// from it (it gets the bytes processed after the pop resolves).
const maxPending = 1 << 20

// readResult is one answer of the reader goroutine: n bytes in readBuf.
type readResult struct {
	n   int
	err error
}

// readAhead has the reader goroutine read the socket, unless it already
// is; its answer comes on got.
func (cn *conn) readAhead() {
	if cn.reading {
		return
	}
	if cn.want == nil {
		cn.want = make(chan struct{}, 1)
		cn.got = make(chan readResult, 1)
		// On the heap and kept: a 4 KiB array on a goroutine's stack made
		// it grow (copy) its stack, 3% of the server's CPU when a watcher
		// was started for each job.
		cn.readBuf = make([]byte, 4096)
		go cn.reader()
	}
	cn.reading = true
	cn.want <- struct{}{}
}

// reader reads once per request until want is closed (stopReader).
func (cn *conn) reader() {
	for range cn.want {
		n, err := cn.nc.Read(cn.readBuf)
		cn.got <- readResult{n, err}
	}
}

// stopReader ends the reader goroutine once its read returns (the
// connection is closed after this).
func (cn *conn) stopReader() {
	if cn.want != nil {
		close(cn.want)
	}
}

// took keeps the bytes of the reader's answer r for the command reader and
// returns its error.
func (cn *conn) took(r readResult) error {
	cn.reading = false
	cn.pending = append(cn.pending, cn.readBuf[:r.n]...)
	return r.err
}

// leftBlocked reports whether the reader's answer err, got while a pop
// waited or was being served, says the client is gone; false for a
// deadline, which is Server.Close waking every connection (unless the
// client was killed): the client is still there.
func (cn *conn) leftBlocked(err error) bool {
	return err != nil && (!isTimeout(err) || cn.killed.Load())
}

// block waits for a blocked pop to resolve: served, timed out, or the client
// gone, whichever comes first. It returns false when the connection is done.
func (cn *conn) block(c *commands.Client, d *commands.Dispatcher) bool {
	b := c.Block
	c.Block = nil
	cn.disarmIdle()
	// Replies to commands before the pop go out now, in order.
	if cn.flush(d) != nil {
		b.Gone()
		return false
	}
	cn.readAhead()
	var timeout <-chan time.Time
	if b.Timeout > 0 {
		t := time.NewTimer(b.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	c.Ticket = 0
	keep := true
wait:
	for {
		select {
		case <-b.Ready():
			cn.ob.begin()
			b.Served(c)
		case <-timeout:
			cn.ob.begin()
			b.TimedOut(c)
		case msg := <-b.Unblocked():
			cn.ob.begin()
			b.Unblock(c, msg)
		case r := <-cn.got:
			err := cn.took(r)
			if err == nil {
				// The client sent more while it waits (pipelined
				// commands): keep it for after the pop, and go on
				// watching unless it floods.
				if len(cn.pending) < maxPending {
					cn.readAhead()
				}
				continue wait
			}
			if cn.leftBlocked(err) {
				b.Gone() // a job handed over meanwhile goes back to its queue
				return false
			}
			// Server.Close woke the reader: the client is still there and
			// the engine, stopped first, has released the waiter; answer it.
			cn.ob.begin()
			select {
			case <-b.Ready():
				b.Served(c)
			case <-time.After(time.Second):
				b.TimedOut(c)
			}
			keep = false
		}
		break
	}
	if b.Quiet() {
		cn.w.buf = cn.w.buf[:0] // the flush above left only the pop's reply
	}
	if keep && (cn.goneMeanwhile() || cn.peerGone()) {
		b.WriteFailed()
		return false
	}
	if c.Ticket != 0 && !b.Quiet() {
		cn.logged = append(cn.logged, loggedReply{0, len(cn.w.buf), c.Ticket})
	}
	if cn.flush(d) != nil {
		b.WriteFailed()
		return false
	}
	// The batch the pop was part of goes on: pushes wait for its replies.
	cn.ob.begin()
	return keep && !cn.closing.Load() && !cn.killed.Load()
}

// goneMeanwhile reports a hang-up the reader has already answered with
// while the pop was being served.
func (cn *conn) goneMeanwhile() bool {
	if !cn.reading {
		return false
	}
	select {
	case r := <-cn.got:
		return cn.leftBlocked(cn.took(r))
	default:
		return false
	}
}

// peerGone reports a hang-up the reader may not have read yet (see
// rawConn.peerGone); false where the socket cannot be asked (TLS, pipes),
// which rely on the reader alone.
func (cn *conn) peerGone() bool {
	rc, ok := cn.nc.(interface{ peerGone() bool })
	return ok && rc.peerGone()
}

func isTimeout(err error) bool {
	// The common case, a read deadline passing, is answered without
	// errors.As, whose reflection was 5% of the server's CPU in the rivals
	// race's spread case when a deadline stopped the watcher of every
	// served pop (now Server.Close, CLIENT KILL and --timeout set them).
	if oe, ok := err.(*net.OpError); ok && oe.Err == os.ErrDeadlineExceeded {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
