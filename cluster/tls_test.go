package cluster

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/delayd/delayd/tlsconf/tlstest"
)

// nodeTLS is what main makes from tlsconf for a node with pair: mutual TLS
// on the bus against ca.
func nodeTLS(ca *tlstest.CA, pair tlstest.Pair, resp bool) *TLS {
	return &TLS{
		Server: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair.TLS},
			ClientCAs: ca.Pool, ClientAuth: tls.RequireAndVerifyClientCert},
		Client: func() *tls.Config {
			return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair.TLS}, RootCAs: ca.Pool}
		},
		RESP: resp,
	}
}

// TestBusTLSReplicates: a group whose bus is mutual TLS forms and
// replicates; a node whose certificate another CA signed is added to the
// configuration but gets nothing, since neither side's handshake passes.
func TestBusTLSReplicates(t *testing.T) {
	ca := tlstest.NewCA(t, "bus CA")
	first := startNode(t, Config{Bootstrap: true, TLS: nodeTLS(ca, ca.Node(t, 2), false)})
	nodes := []*testNode{first}
	leaderOf(t, nodes)
	for i := range 2 {
		n := startNode(t, Config{TLS: nodeTLS(ca, ca.Node(t, int64(3+i)), false)})
		if err := first.c.Join(n.c.ID(), n.cfg.BusAddr, n.cfg.AnnounceAddr); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	other := tlstest.NewCA(t, "another CA")
	rogue := startNode(t, Config{TLS: nodeTLS(other, other.Node(t, 9), false)})
	// Added as a non-voter: a voter that can never answer would only
	// raise the quorum, which is not what this checks.
	if err := leaderOf(t, nodes).c.r().AddNonvoter(raft.ServerID(rogue.c.ID()), raft.ServerAddress(rogue.cfg.BusAddr), 0, 5*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		add(t, nodes, "q", string(rune('a'+i)), 0)
	}
	for _, n := range nodes {
		waitFor(t, 5*time.Second, "the jobs on every node", func() bool { return n.eng.QueueStats([]byte("q")).Ready == 10 })
	}
	time.Sleep(time.Second) // as long again as the followers took: the rogue gets nothing
	if st := rogue.eng.QueueStats([]byte("q")); st.Ready != 0 {
		t.Fatalf("a node with another CA's certificate got %d jobs over the bus", st.Ready)
	}
}

// TestRESPOverTLSToOtherNodes: with RESP set (the nodes' plain port is
// off), the connection a node makes to another's client port for CLUSTER
// JOIN or a forwarded command is TLS, with its node certificate, and
// checks the other's certificate against the CA for the address it dials.
func TestRESPOverTLSToOtherNodes(t *testing.T) {
	ca := tlstest.NewCA(t, "resp CA")
	peer := ca.Node(t, 2)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{peer.TLS},
		ClientCAs: ca.Pool, ClientAuth: tls.RequireAndVerifyClientCert})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		r := bufio.NewReader(c)
		for {
			var n int
			if _, err := fmt.Fscanf(r, "*%d\r\n", &n); err != nil {
				got <- err.Error()
				return
			}
			var args []string
			for range n {
				var l int
				if _, err := fmt.Fscanf(r, "$%d\r\n", &l); err != nil {
					got <- err.Error()
					return
				}
				b := make([]byte, l+2)
				if _, err := io.ReadFull(r, b); err != nil {
					got <- err.Error()
					return
				}
				args = append(args, string(b[:l]))
			}
			if strings.EqualFold(args[0], "HELLO") { // go-redis tries RESP3 first; a Redis 5 answer
				c.Write([]byte("-ERR unknown command 'HELLO'\r\n"))
				continue
			}
			got <- strings.Join(args, " ")
			c.Write([]byte("+OK\r\n"))
			return
		}
	}()
	c := &Cluster{cfg: Config{TLS: nodeTLS(ca, ca.Node(t, 3), true)}}
	cl := c.client(ln.Addr().String())
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := cl.Do(ctx, "CLUSTER", "JOIN", "id", "bus", "addr").Err(); err != nil {
		t.Fatalf("CLUSTER JOIN over TLS: %v", err)
	}
	if cmd := <-got; cmd != "CLUSTER JOIN id bus addr" {
		t.Fatalf("the peer read %q", cmd)
	}
	// Without RESP the same client is plain: the TLS peer refuses it.
	c.cfg.TLS.RESP = false
	if cfg := c.respTLS(ln.Addr().String()); cfg != nil {
		t.Fatal("RESP false still dials TLS")
	}
}
