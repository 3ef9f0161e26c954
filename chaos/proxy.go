package chaos

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ProxyOptions configure a Proxy. The zero value is usable.
type ProxyOptions struct {
	// MaxConns caps the connections the proxy holds at once (default 256).
	// A partitioned Raft node redials every few hundred milliseconds and
	// each held connection costs five goroutines, so the cap is what keeps
	// a long partition from growing the proxy without bound. A connection
	// over the cap is closed at once.
	MaxConns int
	// ChunkSize is the read size of one forwarded chunk (default 32 KiB);
	// a delay applies per chunk.
	ChunkSize int
	// DialTimeout bounds the dial to a node's real bus address (default
	// 2 s). A node that is down refuses at once; the timeout is for a
	// node that is stopped (SIGSTOP) with a full accept backlog.
	DialTimeout time.Duration
	// Logf, when set, receives one line per fault change and per refused
	// or failed connection.
	Logf func(format string, args ...any)
}

func (o ProxyOptions) withDefaults() ProxyOptions {
	if o.MaxConns <= 0 {
		o.MaxConns = 256
	}
	if o.ChunkSize <= 0 {
		o.ChunkSize = 32 << 10
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 2 * time.Second
	}
	return o
}

// errProxyClosed ends the waits of a connection that is being torn down.
var errProxyClosed = errors.New("chaos: connection closed")

// Proxy is a TCP fault proxy for a cluster's bus: one listener per node,
// where the other nodes dial it (its announced bus address), forwarding to
// the node's real bus address. It knows which node dialed a connection by
// the connection's source IP (MapIP), so every connection is a pair of
// flows, src -> dst and dst -> src, and faults are set per flow at runtime.
//
// All methods are safe for concurrent use.
type Proxy struct {
	opts ProxyOptions

	wg sync.WaitGroup // accept loops and connections

	mu        sync.Mutex // guards the fields below
	closed    bool
	listeners map[string]*endpoint // by node name
	byIP      map[string]string    // source IP -> node name
	flows     map[flow]flowState   // faults; a flow absent here passes freely
	changed   chan struct{}        // closed and replaced on every fault change
	conns     map[*proxyConn]struct{}

	accepted, refused atomic.Int64
	bytes             atomic.Int64
}

type endpoint struct {
	name   string
	ln     net.Listener
	target string
}

// flow is one direction of traffic: bytes sent by src to dst.
type flow struct{ src, dst string }

func (f flow) String() string { return f.src + "->" + f.dst }

type flowState struct {
	stalled bool          // bytes wait in the proxy until healed
	delay   time.Duration // added to every chunk
}

// NewProxy returns a proxy with no listeners.
func NewProxy(opts ProxyOptions) *Proxy {
	return &Proxy{
		opts:      opts.withDefaults(),
		listeners: make(map[string]*endpoint),
		byIP:      make(map[string]string),
		flows:     make(map[flow]flowState),
		changed:   make(chan struct{}),
		conns:     make(map[*proxyConn]struct{}),
	}
}

// Listen opens the listener for node on listenAddr (port 0 picks one) and
// forwards what it accepts to target, the node's real bus address. It
// returns the address listened on: the node's announced bus address.
func (p *Proxy) Listen(node, listenAddr, target string) (string, error) {
	ln, err := net.Listen("tcp", listenAddr)
	if err != nil {
		return "", err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		ln.Close()
		return "", net.ErrClosed
	}
	if _, dup := p.listeners[node]; dup {
		ln.Close()
		return "", fmt.Errorf("chaos: node %q already has a listener", node)
	}
	ep := &endpoint{name: node, ln: ln, target: target}
	p.listeners[node] = ep
	p.wg.Add(1)
	go p.accept(ep)
	return ln.Addr().String(), nil
}

// MapIP says that connections from ip come from node.
func (p *Proxy) MapIP(ip, node string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.byIP[ip] = node
}

// Drop partitions a and b: no byte goes either way between them, on the
// connections they hold and on new ones. O(1).
func (p *Proxy) Drop(a, b string) {
	p.update(fmt.Sprintf("drop %s <-> %s", a, b), func() {
		p.stall(flow{a, b})
		p.stall(flow{b, a})
	})
}

// OneWay stops the bytes src sends to dst; dst's bytes still reach src.
// Connections cannot be opened between them meanwhile (a handshake needs
// both ways). O(1).
func (p *Proxy) OneWay(src, dst string) {
	p.update(fmt.Sprintf("one-way %s -/-> %s", src, dst), func() { p.stall(flow{src, dst}) })
}

// Delay adds d to every chunk src sends to dst (0 removes the delay). O(1).
func (p *Proxy) Delay(src, dst string, d time.Duration) {
	p.update(fmt.Sprintf("delay %s -> %s by %v", src, dst, d), func() {
		f := flow{src, dst}
		st := p.flows[f]
		st.delay = d
		p.set(f, st)
	})
}

// Heal removes every fault between a and b, both ways. Held bytes are
// delivered in order. O(1).
func (p *Proxy) Heal(a, b string) {
	p.update(fmt.Sprintf("heal %s <-> %s", a, b), func() {
		delete(p.flows, flow{a, b})
		delete(p.flows, flow{b, a})
	})
}

// HealAll removes every fault. O(faults).
func (p *Proxy) HealAll() {
	p.update("heal all", func() { clear(p.flows) })
}

// Isolate drops every pair of node with another known node (one with a
// listener or a mapped IP). O(nodes).
func (p *Proxy) Isolate(node string) {
	p.update("isolate "+node, func() {
		for _, n := range p.namesLocked() {
			if n != node {
				p.stall(flow{node, n})
				p.stall(flow{n, node})
			}
		}
	})
}

// Partition drops every pair (a, b) with a in as and b in bs. O(|as|·|bs|).
func (p *Proxy) Partition(as, bs []string) {
	p.update(fmt.Sprintf("partition %v | %v", as, bs), func() {
		for _, a := range as {
			for _, b := range bs {
				p.stall(flow{a, b})
				p.stall(flow{b, a})
			}
		}
	})
}

// Sever closes every connection between a and b at once, as a reset would
// (a rebooted middlebox, an RST): both ends see an error now rather than a
// timeout later. Faults are unchanged. O(connections).
func (p *Proxy) Sever(a, b string) {
	p.mu.Lock()
	var cut []*proxyConn
	for c := range p.conns {
		if (c.src == a && c.dst == b) || (c.src == b && c.dst == a) {
			cut = append(cut, c)
		}
	}
	p.mu.Unlock()
	for _, c := range cut {
		c.close()
	}
	p.logf("chaos proxy: severed %d connections between %s and %s", len(cut), a, b)
}

// Blocked reports whether bytes from src to dst are stalled now.
func (p *Proxy) Blocked(src, dst string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.flows[flow{src, dst}].stalled
}

// Faults describes the faults in force, one flow per entry, sorted.
func (p *Proxy) Faults() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for f, st := range p.flows {
		switch {
		case st.stalled && st.delay > 0:
			out = append(out, fmt.Sprintf("%s stalled (delay %v)", f, st.delay))
		case st.stalled:
			out = append(out, f.String()+" stalled")
		case st.delay > 0:
			out = append(out, fmt.Sprintf("%s delay %v", f, st.delay))
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// ProxyStats are counters since the proxy was made.
type ProxyStats struct {
	Conns    int   // connections held now
	Accepted int64 // connections accepted and forwarded (or held)
	Refused  int64 // connections closed at once: over MaxConns, or the node's bus did not answer
	Bytes    int64 // bytes written to either side
}

// Stats returns the proxy's counters.
func (p *Proxy) Stats() ProxyStats {
	p.mu.Lock()
	n := len(p.conns)
	p.mu.Unlock()
	return ProxyStats{Conns: n, Accepted: p.accepted.Load(), Refused: p.refused.Load(), Bytes: p.bytes.Load()}
}

// Close stops every listener, closes every connection and waits until
// every goroutine of the proxy has returned.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	for _, ep := range p.listeners {
		ep.ln.Close()
	}
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
	p.wg.Wait()
	return nil
}

// update runs change under the lock and wakes every connection waiting on
// a fault, so each re-reads the state of its flows.
func (p *Proxy) update(what string, change func()) {
	p.mu.Lock()
	change()
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
	p.logf("chaos proxy: %s", what)
}

// stall and set keep p.flows holding only flows with a fault. Callers hold p.mu.
func (p *Proxy) stall(f flow) {
	st := p.flows[f]
	st.stalled = true
	p.set(f, st)
}

func (p *Proxy) set(f flow, st flowState) {
	if st == (flowState{}) {
		delete(p.flows, f)
		return
	}
	p.flows[f] = st
}

func (p *Proxy) namesLocked() []string {
	seen := make(map[string]bool)
	var names []string
	add := func(n string) {
		if !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	for n := range p.listeners {
		add(n)
	}
	for _, n := range p.byIP {
		add(n)
	}
	return names
}

func (p *Proxy) logf(format string, args ...any) {
	if p.opts.Logf != nil {
		p.opts.Logf(format, args...)
	}
}

// wait blocks while f is stalled and returns its delay, or errProxyClosed
// once the connection closes. It never holds p.mu while it waits.
func (p *Proxy) wait(c *proxyConn, fs ...flow) (time.Duration, error) {
	for {
		p.mu.Lock()
		stalled := false
		var delay time.Duration
		for _, f := range fs {
			st := p.flows[f]
			stalled = stalled || st.stalled
			delay = max(delay, st.delay)
		}
		changed := p.changed
		p.mu.Unlock()
		if !stalled {
			return delay, nil
		}
		select {
		case <-changed:
		case <-c.done:
			return 0, errProxyClosed
		}
	}
}

func (p *Proxy) accept(ep *endpoint) {
	defer p.wg.Done()
	for {
		nc, err := ep.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// EMFILE and the like: back off rather than spin.
			p.logf("chaos proxy: accept on %s (%s): %v", ep.ln.Addr(), ep.name, err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		src := remoteIP(nc)
		p.mu.Lock()
		if name, ok := p.byIP[src]; ok {
			src = name
		}
		if p.closed || len(p.conns) >= p.opts.MaxConns {
			full := !p.closed
			p.mu.Unlock()
			nc.Close()
			if full {
				p.refused.Add(1)
				p.logf("chaos proxy: %s -> %s refused: %d connections held", src, ep.name, p.opts.MaxConns)
			}
			continue
		}
		c := &proxyConn{p: p, src: src, dst: ep.name, target: ep.target, client: nc, done: make(chan struct{})}
		p.conns[c] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		p.accepted.Add(1)
		go c.serve()
	}
}

func remoteIP(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	return host
}

// proxyConn is one accepted connection from src to dst's listener and,
// once the fault state lets it, its upstream connection to dst's bus.
type proxyConn struct {
	p        *Proxy
	src, dst string
	target   string
	client   net.Conn

	mu       sync.Mutex
	upstream net.Conn

	once sync.Once
	done chan struct{} // closed by close
}

// close tears the connection down; every goroutine of it returns soon
// after (closing the sockets unblocks their reads and writes).
func (c *proxyConn) close() {
	c.once.Do(func() {
		close(c.done)
		c.client.Close()
		c.mu.Lock()
		if c.upstream != nil {
			c.upstream.Close()
		}
		c.mu.Unlock()
	})
}

// serve holds a new connection until a handshake could pass, dials the
// node, and pumps both directions until both end or one fails.
//
// A connection made during a partition is accepted (the kernel completed
// the handshake before Accept anyway) and then blackholed: nothing is
// read from it and the node is not dialed until both flows pass. That is
// what a real partition does to a connect: the dialer does not learn it
// failed, it times out, as Raft's transport must, instead of getting a
// quick refusal that a crashed host gives. On heal the node is dialed and
// the bytes the dialer wrote meanwhile are delivered, as TCP's
// retransmissions would deliver them once the path is back.
func (c *proxyConn) serve() {
	p := c.p
	defer func() {
		c.close()
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
		p.wg.Done()
	}()
	fwd, back := flow{c.src, c.dst}, flow{c.dst, c.src}
	if _, err := p.wait(c, fwd, back); err != nil {
		return
	}
	d := net.Dialer{Timeout: p.opts.DialTimeout}
	up, err := d.Dial("tcp", c.target)
	if err != nil {
		// The node is down: closing is what its kernel's RST would do.
		p.refused.Add(1)
		p.logf("chaos proxy: %s -> %s: dial %s: %v", c.src, c.dst, c.target, err)
		return
	}
	c.mu.Lock()
	c.upstream = up
	c.mu.Unlock()
	select {
	case <-c.done: // closed while dialing: close saw no upstream yet
		up.Close()
		return
	default:
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); c.pump(fwd, c.client, up) }()
	go func() { defer wg.Done(); c.pump(back, up, c.client) }()
	wg.Wait()
}

type chunk struct {
	buf  *[]byte
	n    int
	read time.Time
}

var chunkPool sync.Pool

func (p *Proxy) getBuf() *[]byte {
	if b, ok := chunkPool.Get().(*[]byte); ok && len(*b) == p.opts.ChunkSize {
		return b
	}
	b := make([]byte, p.opts.ChunkSize)
	return &b
}

// pump copies one direction, in to out, obeying f's faults. A reader and a
// writer joined by a short queue, so a delay is latency, not a throughput
// cap: chunks read during one chunk's delay are each sent at their own
// read time plus the delay. While f is stalled the reader stops reading
// (so the sender's socket buffer fills, as with a path that drops
// everything) and the writer holds what it has; the stream is delayed,
// never cut or reordered. At EOF the write side of out is shut, so a
// half-close passes through; an error on either side closes the
// connection.
func (c *proxyConn) pump(f flow, in, out net.Conn) {
	p := c.p
	q := make(chan chunk, 16)
	go func() {
		defer close(q)
		for {
			if _, err := p.wait(c, f); err != nil {
				return
			}
			b := p.getBuf()
			n, err := in.Read(*b)
			if n > 0 {
				select {
				case q <- chunk{buf: b, n: n, read: time.Now()}:
				case <-c.done:
					return
				}
			} else {
				chunkPool.Put(b)
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					c.close()
				}
				return
			}
		}
	}()
	failed := false
	for ck := range q {
		if failed {
			chunkPool.Put(ck.buf)
			continue // drain so the reader never blocks on a full queue
		}
		delay, err := p.wait(c, f)
		if err == nil && delay > 0 {
			err = c.sleepUntil(ck.read.Add(delay))
		}
		if err == nil {
			_, err = out.Write((*ck.buf)[:ck.n])
		}
		if err != nil {
			failed = true
			c.close()
		} else {
			p.bytes.Add(int64(ck.n))
		}
		chunkPool.Put(ck.buf)
	}
	if !failed {
		if tc, ok := out.(interface{ CloseWrite() error }); ok {
			_ = tc.CloseWrite()
		} else {
			c.close()
		}
	}
}

func (c *proxyConn) sleepUntil(t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-c.done:
		return errProxyClosed
	}
}
