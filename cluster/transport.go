package cluster

import (
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// streamLayer is Raft's TCP stream: it listens on the bus address and
// dials from the bus address's IP, so a node's traffic leaves from the
// interface it was given (and a fault proxy can tell nodes apart by their
// source address). Addr is the announced bus address, which is what Raft
// puts in its configuration for this node.
type streamLayer struct {
	net.Listener
	announce net.Addr
	local    *net.TCPAddr // source address for dials; nil: any
	tls      *TLS         // nil: plain TCP
}

func (s *streamLayer) Addr() net.Addr { return s.announce }

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

// tracker is Raft's network transport, watching the leader's AppendEntries
// and InstallSnapshot replies to learn how far each follower's log matches
// (hashicorp/raft keeps that to itself). WAIT and INFO replication read it.
type tracker struct {
	*raft.NetworkTransport

	mu    sync.Mutex
	cond  *sync.Cond
	match map[string]uint64    // follower id -> last index known to match
	heard map[string]time.Time // follower id -> last successful reply
}

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
	sl := &streamLayer{Listener: ln, announce: ann, tls: sec}
	if sec != nil {
		// The TLS layer sits above the TCP one: the source address a fault
		// proxy tells nodes apart by is the same.
		sl.Listener = tlsListener{Listener: ln, cfg: sec.Server}
	}
	if la, ok := ln.Addr().(*net.TCPAddr); ok && !la.IP.IsUnspecified() {
		sl.local = &net.TCPAddr{IP: la.IP}
	}
	t := &tracker{
		NetworkTransport: raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
			Stream:  sl,
			MaxPool: 3,
			// No pipelining: every AppendEntries goes through the method
			// below, where its reply is seen (hashicorp measured little
			// gain from pipelining with batching; see MaxRPCsInFlight).
			MaxRPCsInFlight: 1,
			Timeout:         max(timeout, time.Second) * 2,
			Logger:          logger,
		}),
		match: make(map[string]uint64),
		heard: make(map[string]time.Time),
	}
	t.cond = sync.NewCond(&t.mu)
	return t, nil
}

// AppendEntries sends the RPC and records what a successful reply says.
func (t *tracker) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	err := t.NetworkTransport.AppendEntries(id, target, args, resp)
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

// AppendEntriesPipeline is refused, so that every append goes through
// AppendEntries (Raft then falls back to it).
func (t *tracker) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

// InstallSnapshot sends a snapshot and records the index it covers.
func (t *tracker) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	err := t.NetworkTransport.InstallSnapshot(id, target, args, resp, data)
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
