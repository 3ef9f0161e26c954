package cluster

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// streamLayer is NetworkTransport's TCP stream: it dials from the bus
// address's IP, so a node's traffic leaves from the interface it was given
// (and a fault proxy can tell nodes apart by their source address), and
// accepts the connections the tracker's accept loop hands it (those that
// do not open with frameMagic). Addr is the announced bus address, which
// is what Raft puts in its configuration for this node.
type streamLayer struct {
	ln       net.Listener // the bus's, TLS above TCP when secured
	announce net.Addr
	local    *net.TCPAddr // source address for dials; nil: any
	tls      *TLS         // nil: plain TCP

	conns chan net.Conn // accepted, for NetworkTransport
	done  chan struct{} // closed by Close
	once  sync.Once
}

func (s *streamLayer) Addr() net.Addr { return s.announce }

func (s *streamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.done:
		return nil, net.ErrClosed
	}
}

func (s *streamLayer) Close() error {
	var err error
	s.once.Do(func() {
		close(s.done)
		err = s.ln.Close()
	})
	return err
}

func (s *streamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	if s.local != nil {
		d.LocalAddr = s.local
	}
	if s.tls != nil {
		return dialTLS(&d, addr, timeout, s.tls.Client())
	}
	return d.Dial("tcp", string(addr))
}

// peekedConn gives back the first byte the accept loop read.
type peekedConn struct {
	net.Conn
	first []byte
}

func (c *peekedConn) Read(p []byte) (int, error) {
	if len(c.first) > 0 && len(p) > 0 {
		n := copy(p, c.first)
		c.first = c.first[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// tracker is Raft's transport: NetworkTransport, with AppendEntries in the
// bus's own frames once every member reads them (bus.go), and watching the
// leader's AppendEntries and InstallSnapshot replies to learn how far each
// follower's log matches (hashicorp/raft keeps that to itself). WAIT and
// INFO replication read it.
type tracker struct {
	*raft.NetworkTransport
	stream  *streamLayer
	timeout time.Duration
	logger  hclog.Logger
	// framing says whether AppendEntries go in frames (the group's format
	// version, set by New; nil: never).
	framing func() bool
	// member says whether id is in the group's latest configuration (set
	// by New; nil: every id is): a snapshot goes only to a member.
	member func(id raft.ServerID) bool
	// sends, when set (by New), is called as each snapshot send starts
	// (true) and ends (Cluster.keepLog).
	sends func(start bool)
	// self is this node's id (set by New): a snapshot meant for another
	// is refused.
	self string
	// beforeInstall and afterInstall, when set (tests, before Start), are
	// called as InstallSnapshot starts and with what it returns.
	beforeInstall func(id raft.ServerID)
	afterInstall  func(id raft.ServerID, err error)

	consume chan raft.RPC // Raft's, fed by both paths
	hbMu    sync.Mutex
	hbFn    func(raft.RPC) // guarded by hbMu

	pmu  sync.Mutex
	pool map[raft.ServerAddress][]*frameConn // guarded by pmu
	open map[net.Conn]struct{}               // accepted, not handed to NetworkTransport; guarded by pmu
	// msgpackUntil: peers that refused frames, sent msgpack until then.
	msgpackUntil map[raft.ServerAddress]time.Time // guarded by pmu
	now          func() time.Time                 // time.Now; tests set it
	closed       bool                             // guarded by pmu
	done         chan struct{}                    // closed by Close
	once         sync.Once
	serve        sync.WaitGroup // acceptLoop and the goroutines it starts

	mu    sync.Mutex
	cond  *sync.Cond
	match map[string]uint64    // follower id -> last index known to match
	heard map[string]time.Time // follower id -> last successful reply
}

// maxPool is how many idle connections to each peer either path keeps:
// Raft's heartbeats and appends run on goroutines of their own.
const maxPool = 3

func newTracker(bind, announce string, logger hclog.Logger, timeout time.Duration, sec *TLS) (*tracker, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	ann, err := net.ResolveTCPAddr("tcp", announce)
	if err != nil {
		ln.Close()
		return nil, err
	}
	sl := &streamLayer{ln: ln, announce: ann, tls: sec, conns: make(chan net.Conn), done: make(chan struct{})}
	if sec != nil {
		// The TLS layer sits above the TCP one: the source address a fault
		// proxy tells nodes apart by is the same.
		sl.ln = tlsListener{Listener: ln, cfg: sec.Server}
	}
	if la, ok := ln.Addr().(*net.TCPAddr); ok && !la.IP.IsUnspecified() {
		sl.local = &net.TCPAddr{IP: la.IP}
	}
	timeout = max(timeout, time.Second) * 2
	t := &tracker{
		NetworkTransport: raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
			Stream:  sl,
			MaxPool: maxPool,
			// No pipelining: every AppendEntries goes through the method
			// below, where its reply is seen (hashicorp measured little
			// gain from pipelining with batching; see MaxRPCsInFlight).
			MaxRPCsInFlight: 1,
			Timeout:         timeout,
			Logger:          logger,
		}),
		stream:       sl,
		timeout:      timeout,
		logger:       logger,
		consume:      make(chan raft.RPC),
		pool:         make(map[raft.ServerAddress][]*frameConn),
		open:         make(map[net.Conn]struct{}),
		now:          time.Now,
		msgpackUntil: make(map[raft.ServerAddress]time.Time),
		done:         make(chan struct{}),
		match:        make(map[string]uint64),
		heard:        make(map[string]time.Time),
	}
	t.cond = sync.NewCond(&t.mu)
	t.serve.Add(1)
	go t.acceptLoop()
	go t.forward()
	return t, nil
}

// Consumer is where Raft takes the RPCs of both paths.
func (t *tracker) Consumer() <-chan raft.RPC { return t.consume }

// SetHeartbeatHandler sets the handler both paths answer heartbeats with.
func (t *tracker) SetHeartbeatHandler(fn func(raft.RPC)) {
	t.hbMu.Lock()
	t.hbFn = fn
	t.hbMu.Unlock()
	t.NetworkTransport.SetHeartbeatHandler(fn)
}

// forward hands Raft the RPCs NetworkTransport decoded: votes, snapshots,
// and AppendEntries from a leader that does not frame them yet.
func (t *tracker) forward() {
	in := t.NetworkTransport.Consumer()
	for {
		select {
		case rpc := <-in:
			if req, ok := rpc.Command.(*raft.InstallSnapshotRequest); ok && t.self != "" {
				if to, ok := snapshotTarget(req); ok && to != t.self {
					go t.refuseSnapshot(rpc, to)
					continue
				}
			}
			select {
			case t.consume <- rpc:
			case <-t.done:
				return
			}
		case <-t.done:
			return
		}
	}
}

// The id a snapshot is sent to rides in InstallSnapshotRequest.Peers, after
// targetMark. hashicorp/raft's header names the sender only, and Peers is
// read only at snapshot version 0 (a leader of before 2017's raft 1.0):
// every receiver since, a delayd of the last release included, ignores
// it. A snapshot without the mark (an older delayd's) is taken as before.
const targetMark = "delayd-to:"

func snapshotTarget(req *raft.InstallSnapshotRequest) (string, bool) {
	if req.SnapshotVersion < 1 || !bytes.HasPrefix(req.Peers, []byte(targetMark)) {
		return "", false
	}
	return string(req.Peers[len(targetMark):]), true
}

// refuseSnapshot answers a snapshot meant for another id with an error,
// once its stream is read (NetworkTransport reads the next RPC of the
// connection after it): a node wiped and started again at its old bus
// address with a new id is sent its old id's, as soon as it listens, until
// its join removes that id; the sender then cuts the stream short
// (InstallSnapshot).
func (t *tracker) refuseSnapshot(rpc raft.RPC, to string) {
	_, _ = io.Copy(io.Discard, rpc.Reader)
	t.logger.Info("cluster bus: a snapshot refused: meant for the id this address had", "to", to)
	rpc.Respond(&raft.InstallSnapshotResponse{}, fmt.Errorf("%w (%s)", errNotForMe, to))
}

// errNotForMe: a snapshot sent to an id this node does not have.
var errNotForMe = errors.New("cluster bus: the snapshot is meant for another id")

// acceptLoop accepts the bus's connections and routes each by its first
// byte, read on a goroutine of its own (a TLS handshake, a slow peer):
// frames are served here, the rest go to NetworkTransport.
func (t *tracker) acceptLoop() {
	defer t.serve.Done()
	delay := time.Duration(0)
	for {
		conn, err := t.stream.ln.Accept()
		if err != nil {
			select {
			case <-t.stream.done:
				return
			default:
			}
			// As NetworkTransport: out of descriptors and the like pass.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			t.logger.Error("failed to accept connection", "error", err)
			select {
			case <-t.stream.done:
				return
			case <-time.After(delay):
			}
			continue
		}
		delay = 0
		t.pmu.Lock()
		if t.closed {
			t.pmu.Unlock()
			conn.Close()
			return
		}
		t.open[conn] = struct{}{}
		t.serve.Add(1)
		t.pmu.Unlock()
		go t.route(conn)
	}
}

func (t *tracker) route(conn net.Conn) {
	defer t.serve.Done()
	first := make([]byte, 1)
	_, err := io.ReadFull(conn, first)
	if err == nil && first[0] == frameMagic {
		t.serveFrames(conn)
	}
	t.pmu.Lock()
	delete(t.open, conn)
	t.pmu.Unlock()
	if err != nil || first[0] == frameMagic {
		conn.Close()
		return
	}
	select {
	case t.stream.conns <- &peekedConn{Conn: conn, first: first}:
	case <-t.stream.done:
		conn.Close()
	}
}

// serveFrames answers the AppendEntries of one leader's connection, in
// order, until it closes.
func (t *tracker) serveFrames(conn net.Conn) {
	r := bufio.NewReaderSize(conn, 256<<10)
	w := bufio.NewWriterSize(conn, 4<<10)
	respCh := make(chan raft.RPCResponse, 1) // one RPC at a time: reused
	var out []byte
	for {
		body, err := readFrame(r, nil)
		if err != nil {
			if err != io.EOF && !t.isClosed() {
				t.logger.Error("failed to read incoming frame", "error", err)
			}
			return
		}
		req, err := decodeEntriesFrame(body)
		if err != nil {
			t.logger.Error("failed to decode incoming frame", "error", err)
			return
		}
		rpc := raft.RPC{Command: req, RespChan: respCh}
		t.hbMu.Lock()
		fn := t.hbFn
		t.hbMu.Unlock()
		if fn != nil && heartbeat(req) {
			fn(rpc)
		} else {
			select {
			case t.consume <- rpc:
			case <-t.done:
				return
			}
		}
		var resp raft.RPCResponse
		select {
		case resp = <-respCh:
		case <-t.done:
			return
		}
		errText := ""
		if resp.Error != nil {
			errText = resp.Error.Error()
		}
		ae, _ := resp.Response.(*raft.AppendEntriesResponse)
		out = appendReplyFrame(out[:0], errText, ae)
		if err := writeFrame(w, out); err != nil {
			t.logger.Error("failed to write reply frame", "error", err)
			return
		}
	}
}

func (t *tracker) isClosed() bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// AppendEntries sends the RPC and records what a successful reply says.
func (t *tracker) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	var err error
	if t.framing != nil && t.framing() && !t.msgpackOnly(target) {
		var refused bool
		if refused, err = t.appendFramed(target, args, resp); refused {
			// A node that closes a new connection of frames unanswered
			// is most likely of an older release, started again on a
			// member after the version rose: it stores entries it
			// cannot apply (the gate loop names it), but refusing them
			// would pile up Raft's failure backoff, up to 10 s an
			// attempt, which it still pays once back on this release.
			t.fallBack(target)
			t.logger.Warn("cluster bus: a peer closed a connection of frames unanswered (an older delayd?): msgpack to it for a while", "peer", target)
			err = t.NetworkTransport.AppendEntries(id, target, args, resp)
		} else if errors.Is(err, errFrameTooLarge) {
			err = t.NetworkTransport.AppendEntries(id, target, args, resp)
		}
	} else {
		err = t.NetworkTransport.AppendEntries(id, target, args, resp)
	}
	if err == nil {
		t.mu.Lock()
		t.heard[string(id)] = time.Now()
		if resp.Success && (len(args.Entries) > 0 || args.PrevLogEntry > 0) {
			m := args.PrevLogEntry + uint64(len(args.Entries))
			if m > t.match[string(id)] {
				t.match[string(id)] = m
				t.cond.Broadcast()
			}
		}
		t.mu.Unlock()
	}
	return err
}

// appendFramed is AppendEntries over a connection of frames. refused says
// the peer closed a connection dialed for this RPC without a reply.
func (t *tracker) appendFramed(target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (refused bool, err error) {
	c, err := t.frameConn(target)
	if err != nil {
		return false, err
	}
	c.conn.SetDeadline(time.Now().Add(t.timeout))
	c.buf = appendEntriesFrame(c.buf[:0], args)
	if uint64(len(c.buf)) > frameMax {
		c.buf = nil
		t.putFrameConn(target, c)
		return false, errFrameTooLarge
	}
	if err = writeFrame(c.w, c.buf); err == nil {
		c.buf, err = readFrame(c.r, c.buf)
	}
	if err != nil {
		c.conn.Close()
		return !c.answered && closedByPeer(err), err
	}
	c.answered = true
	errText, err := decodeReplyFrame(c.buf, resp)
	if err != nil {
		c.conn.Close()
		return false, err
	}
	t.putFrameConn(target, c)
	if errText != "" {
		return false, errors.New(errText)
	}
	return false, nil
}

// closedByPeer says err is the peer closing the connection (not a
// timeout, not a dial).
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// fallbackFor is how long AppendEntries to a peer that refused frames go
// in msgpack before frames are tried again: long enough that an old node
// costs one refused connection a minute, short enough that a node back on
// this release gets frames soon.
const fallbackFor = time.Minute

func (t *tracker) fallBack(target raft.ServerAddress) {
	t.pmu.Lock()
	t.msgpackUntil[target] = t.now().Add(fallbackFor)
	t.pmu.Unlock()
}

func (t *tracker) msgpackOnly(target raft.ServerAddress) bool {
	t.pmu.Lock()
	defer t.pmu.Unlock()
	until, ok := t.msgpackUntil[target]
	if ok && !t.now().Before(until) {
		delete(t.msgpackUntil, target)
		return false
	}
	return ok
}

// frameConn takes an idle connection of frames to target, or dials one.
func (t *tracker) frameConn(target raft.ServerAddress) (*frameConn, error) {
	t.pmu.Lock()
	if t.closed {
		t.pmu.Unlock()
		return nil, raft.ErrTransportShutdown
	}
	if cs := t.pool[target]; len(cs) > 0 {
		c := cs[len(cs)-1]
		cs[len(cs)-1] = nil
		t.pool[target] = cs[:len(cs)-1]
		t.pmu.Unlock()
		return c, nil
	}
	t.pmu.Unlock()
	conn, err := t.stream.Dial(target, t.timeout)
	if err != nil {
		return nil, err
	}
	c := &frameConn{conn: conn, r: bufio.NewReaderSize(conn, 4<<10), w: bufio.NewWriterSize(conn, 256<<10)}
	c.w.WriteByte(frameMagic) // goes with the first frame
	return c, nil
}

func (t *tracker) putFrameConn(target raft.ServerAddress, c *frameConn) {
	if cap(c.buf) > frameKeep {
		c.buf = nil
	}
	t.pmu.Lock()
	defer t.pmu.Unlock()
	if t.closed || len(t.pool[target]) >= maxPool {
		c.conn.Close()
		return
	}
	t.pool[target] = append(t.pool[target], c)
}

// Close stops both paths and closes their connections (but those
// NetworkTransport serves, which it leaves to their peers), and returns
// once none is being served. Raft closes its
// transport at shutdown and the cluster again after it: the second does
// nothing.
func (t *tracker) Close() error {
	t.once.Do(func() {
		close(t.done)
		t.pmu.Lock()
		t.closed = true
		for _, cs := range t.pool {
			for _, c := range cs {
				c.conn.Close()
			}
		}
		t.pool = nil
		for conn := range t.open {
			conn.Close()
		}
		t.pmu.Unlock()
		t.NetworkTransport.Close() // closes the listener: acceptLoop returns
		t.serve.Wait()
	})
	return nil
}

// AppendEntriesPipeline is refused, so that every append goes through
// AppendEntries (Raft then falls back to it).
func (t *tracker) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

// InstallSnapshot sends a snapshot, while id is a member, and records the
// index it covers.
//
// A node whose data dir was wiped comes back at its old bus address with a
// new id, and joining removes the old id (Join). hashicorp/raft stops a
// removed member's replication only after one last attempt to bring it up
// to date, and does not cut short an RPC in flight: the old id's snapshot
// went to the address too, and the node installed it as well as the one
// sent to its new id (seconds each at millions of jobs). The RPC's header
// names the sender only: the request names the receiver too (in Peers,
// snapshotTarget), and a node refuses one meant for another id. Here a
// snapshot to an id no longer in the configuration is not sent, and one
// being sent stops at its next read; the leader keeps its whole log while
// it sends (sends, Cluster.keepLog).
func (t *tracker) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) (err error) {
	if t.sends != nil {
		t.sends(true)
		defer t.sends(false)
	}
	if t.beforeInstall != nil {
		t.beforeInstall(id)
	}
	if t.afterInstall != nil {
		defer func() { t.afterInstall(id, err) }()
	}
	if t.member != nil {
		if !t.member(id) {
			t.logger.Info("cluster bus: no snapshot sent to a removed member", "id", id, "peer", target)
			return errNotMember
		}
		data = &memberReader{r: data, ok: func() bool { return t.member(id) }}
	}
	a := *args // Raft's own, not changed
	a.Peers = append([]byte(targetMark), id...)
	args = &a
	err = t.NetworkTransport.InstallSnapshot(id, target, args, resp, data)
	if errors.Is(err, errNotMember) {
		t.logger.Info("cluster bus: a snapshot to a member removed meanwhile cut short", "id", id, "peer", target)
	}
	if err == nil && resp.Success {
		t.mu.Lock()
		t.heard[string(id)] = time.Now()
		if args.LastLogIndex > t.match[string(id)] {
			t.match[string(id)] = args.LastLogIndex
			t.cond.Broadcast()
		}
		t.mu.Unlock()
	}
	return err
}

// errNotMember: a snapshot's receiver left the configuration.
var errNotMember = errors.New("cluster bus: the snapshot's receiver is no longer a member")

// memberReader reads a snapshot for as long as ok holds, asked before the
// first read and then once a memberCheck bytes: Raft's configuration is
// copied at each ask, and the stream is read 32 KiB at a time.
type memberReader struct {
	r    io.Reader
	ok   func() bool
	left int // bytes to read before ok is asked again
}

const memberCheck = 1 << 20

func (m *memberReader) Read(p []byte) (int, error) {
	if m.left <= 0 {
		if !m.ok() {
			return 0, errNotMember
		}
		m.left = memberCheck
	}
	n, err := m.r.Read(p)
	m.left -= n
	return n, err
}

// peer is what the leader knows of a follower.
func (t *tracker) peer(id string, timeout time.Duration) (match uint64, since time.Duration, connected bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h, ok := t.heard[id]
	if !ok {
		return t.match[id], 0, false
	}
	since = time.Since(h)
	return t.match[id], since, since < 2*timeout
}

// waitReplicas blocks until n followers (not self) match index, the
// timeout passes (0: none), or quit closes, and returns how many match.
func (t *tracker) waitReplicas(self string, index uint64, n int, timeout time.Duration, quit <-chan struct{}) int {
	count := func() int {
		k := 0
		for id, m := range t.match {
			if id != self && m >= index {
				k++
			}
		}
		return k
	}
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	// A timer wakes the wait at its deadline; replies wake it sooner.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		var tc <-chan time.Time
		if timeout > 0 {
			tm := time.NewTimer(timeout)
			defer tm.Stop()
			tc = tm.C
		}
		select {
		case <-tc:
		case <-quit:
		case <-stop:
			return
		}
		t.mu.Lock()
		t.cond.Broadcast()
		t.mu.Unlock()
	}()
	t.mu.Lock()
	defer t.mu.Unlock()
	for {
		k := count()
		if k >= n || (timeout > 0 && !time.Now().Before(deadline)) {
			return k
		}
		select {
		case <-quit:
			return k
		default:
		}
		t.cond.Wait()
	}
}
