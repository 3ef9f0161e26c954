package integration

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayd/delayd/tlsconf/tlstest"
)

// TestClusterTLSBus: with tls-port set, the Raft bus is mutual TLS with the
// same files. Three nodes with certificates the CA signed form a group and
// replicate; a peer without one (a certificate of another CA, none at all,
// or plain TCP) is refused at the handshake and never speaks Raft.
func TestClusterTLSBus(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "delayd cluster CA")
	caFile := ca.WriteCA(t, dir, "ca")
	cert, key := ca.Node(t, 10).Write(t, dir, "node")
	cc := &clCluster{t: t,
		extra: []string{"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", caFile,
			// Clients need no certificate: the bus asks for one regardless.
			"--tls-auth-clients", "no"},
		perNode: func() []string { return []string{"--tls-port", strconv.Itoa(freePort(t))} },
	}
	first := cc.add(t, "--cluster-bootstrap")
	cc.waitLeader(t, 15*time.Second, first)
	for i := 1; i < 3; i++ {
		cc.add(t, "--cluster-join", first.Addr())
	}
	leader := cc.waitFormed(t, 20*time.Second)

	if _, err := leader.do(leader.client(), "DELAY.ADD", "{tls}q", 60000, "over tls", "ID", "j1"); err != nil {
		t.Fatalf("%v: DELAY.ADD: %v", leader, err)
	}
	for _, f := range cc.followers(leader) {
		clWait(t, 5*time.Second, fmt.Sprintf("%v: the job replicated", f), func() (bool, string) {
			got, err := clGet(f, f.roClient(), "{tls}q", "j1")
			if err != nil || got["payload"] != "over tls" {
				return false, fmt.Sprintf("DELAY.GET: %v %v", got, err)
			}
			return true, ""
		})
	}

	bus := net.JoinHostPort("127.0.0.1", strconv.Itoa(leader.bus))
	other := tlstest.NewCA(t, "another CA")
	for _, tc := range []struct {
		name   string
		client *tls.Config // nil: plain TCP
	}{
		{"a node certificate of another CA", &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{other.Node(t, 11).TLS}}},
		{"no client certificate", &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1"}},
		{"plain TCP", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := busRefuses(bus, tc.client); err != nil {
				t.Fatal(err)
			}
		})
	}
	// The control: the same dial with the CA's node certificate is held
	// open, waiting for a Raft RPC.
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", bus,
		&tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{ca.Node(t, 12).TLS}})
	if err != nil {
		t.Fatalf("a node certificate the CA signed: %v", err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a node certificate the CA signed: the bus answered %v, want it waiting for an RPC", err)
	}
}

// busRefuses dials the bus as a peer would (cfg nil: plain TCP) and says
// what is wrong unless the bus refuses it: a TLS peer with a TLS alert,
// since Raft alone would also drop a peer whose first bytes it cannot
// decode and only the alert shows the refusal is the handshake's.
func busRefuses(addr string, cfg *tls.Config) error {
	nc, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(3 * time.Second))
	if cfg == nil {
		// A Raft RPC's first bytes: crypto/tls closes a connection whose
		// first record is no handshake without a word (Raft alone would
		// drop these bytes too: the TLS cases above are the proof).
		nc.Write(make([]byte, 8))
		if n, err := nc.Read(make([]byte, 64)); err != io.EOF {
			return fmt.Errorf("plain bytes: the bus answered %d bytes, %v; want it closed", n, err)
		}
		return nil
	}
	tc := tls.Client(nc, cfg)
	err = tc.Handshake()
	if err == nil {
		// TLS 1.3 completes the client's side first; the server's verdict
		// on the certificate comes as an alert on the first read.
		_, err = tc.Read(make([]byte, 1))
	}
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) || !strings.Contains(err.Error(), "remote error: tls") {
		return fmt.Errorf("want a TLS alert from the bus, got %v", err)
	}
	return nil
}

// TestClusterTLSOnly: three nodes with only a TLS port (--port 0
// --tls-port N), as a managed Redis runs. CLUSTER SLOTS, SHARDS, NODES and
// MOVED send clients to the TLS ports, and go-redis's ClusterClient over
// TLS (mutual: tls-auth-clients yes) adds and pops through them.
func TestClusterTLSOnly(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "delayd cluster CA")
	caFile := ca.WriteCA(t, dir, "ca")
	cert, key := ca.Node(t, 10).Write(t, dir, "node")
	clientTLS := &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{ca.Client(t, 20).TLS}}
	cc := &clCluster{t: t, tls: clientTLS,
		extra: []string{"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", caFile, "--tls-auth-clients", "yes"},
	}
	first := cc.add(t, "--cluster-bootstrap")
	cc.waitLeader(t, 15*time.Second, first)
	for i := 1; i < 3; i++ {
		cc.add(t, "--cluster-join", first.Addr())
	}
	leader := cc.waitFormed(t, 20*time.Second)
	tlsPorts := map[int]bool{}
	for _, n := range cc.nodes {
		tlsPorts[n.Port()] = true
	}

	// The map every node gives: the TLS ports, the only ones there are.
	for _, n := range cc.nodes {
		slots, err := n.client().ClusterSlots(ctxT(t, clOp)).Result()
		if err != nil || len(slots) != 1 || len(slots[0].Nodes) != 3 {
			t.Fatalf("%v: CLUSTER SLOTS: %v %v", n, slots, err)
		}
		if got := slots[0].Nodes[0].Addr; got != leader.Addr() {
			t.Errorf("%v: CLUSTER SLOTS master %s, want the leader's TLS address %s", n, got, leader.Addr())
		}
		for _, sn := range slots[0].Nodes {
			_, p, _ := net.SplitHostPort(sn.Addr)
			if port, _ := strconv.Atoi(p); !tlsPorts[port] {
				t.Errorf("%v: CLUSTER SLOTS node %s is not on a TLS port %v", n, sn.Addr, tlsPorts)
			}
		}
		shards, err := n.client().ClusterShards(ctxT(t, clOp)).Result()
		if err != nil || len(shards) != 1 || len(shards[0].Nodes) != 3 {
			t.Fatalf("%v: CLUSTER SHARDS: %v %v", n, shards, err)
		}
		for _, sn := range shards[0].Nodes {
			if sn.Port != 0 || !tlsPorts[int(sn.TLSPort)] {
				t.Errorf("%v: CLUSTER SHARDS node %s: port %d tls-port %d; want only a tls-port, one of %v", n, sn.ID, sn.Port, sn.TLSPort, tlsPorts)
			}
		}
		lines, err := n.nodesView()
		if err != nil || len(lines) != 3 {
			t.Fatalf("%v: CLUSTER NODES: %v %v", n, lines, err)
		}
		for _, l := range lines {
			_, p, _ := net.SplitHostPort(l.addr)
			if port, _ := strconv.Atoi(p); !tlsPorts[port] {
				t.Errorf("%v: CLUSTER NODES %q is not on a TLS port %v", n, l.raw, tlsPorts)
			}
		}
	}
	// A write sent to a follower is MOVED to the leader's TLS port.
	f := cc.followers(leader)[0]
	_, err := f.do(f.client(), "DELAY.ADD", "jobs:moved", 0, "x")
	if err == nil || !strings.HasPrefix(err.Error(), "MOVED ") || !strings.HasSuffix(err.Error(), " "+leader.Addr()) {
		t.Fatalf("%v: DELAY.ADD on a follower: %v, want MOVED to %s", f, err, leader.Addr())
	}

	// A producer and a worker through go-redis's ClusterClient over TLS,
	// seeded with a follower only: it must find the leader from the map.
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{f.Addr()}, Protocol: 2, TLSConfig: clientTLS,
		DialTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second})
	defer rc.Close()
	const queues, perQueue = 8, 5
	added := map[string]bool{}
	for q := range queues {
		for j := range perQueue {
			key, id := fmt.Sprintf("jobs:%d", q), fmt.Sprintf("j%d-%d", q, j)
			if err := rc.Do(ctxT(t, 10*time.Second), "DELAY.ADD", key, 0, "payload "+id, "ID", id, "ACKTIMEOUT", 30000).Err(); err != nil {
				t.Fatalf("ClusterClient DELAY.ADD %s %s: %v", key, id, err)
			}
			added[key+" "+id] = true
		}
	}
	popped := 0
	for q := range queues {
		key := fmt.Sprintf("jobs:%d", q)
		for range perQueue {
			v, err := rc.Do(ctxT(t, 10*time.Second), "DELAY.POP", key, 1).StringSlice()
			if err != nil || len(v) != 3 || v[0] != key || !added[key+" "+v[1]] || v[2] != "payload "+v[1] {
				t.Fatalf("ClusterClient DELAY.POP %s: %q %v", key, v, err)
			}
			delete(added, key+" "+v[1])
			if n, err := rc.Do(ctxT(t, 10*time.Second), "DELAY.ACK", key, v[1]).Int(); err != nil || n != 1 {
				t.Fatalf("ClusterClient DELAY.ACK %s %s: %d %v", key, v[1], n, err)
			}
			popped++
		}
	}
	if popped != queues*perQueue || len(added) != 0 {
		t.Fatalf("popped %d of %d; never popped: %v", popped, queues*perQueue, added)
	}

	// redis-cli -c --tls, asked on a follower, follows the MOVED to the
	// leader's TLS port.
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Log("redis-cli not installed: its -c --tls check is skipped")
		return
	}
	cliCert, cliKey := ca.Client(t, 21).Write(t, dir, "cli")
	tlsArgs := []string{"--tls", "--cacert", caFile, "--cert", cliCert, "--key", cliKey, "-c"}
	if got := cli(t, f.server, append(tlsArgs, "DELAY.ADD", "jobs:cli", "0", "from-cli", "ID", "c1")...); got != "c1\n" {
		t.Fatalf("redis-cli -c --tls DELAY.ADD on a follower: %q, want c1", got)
	}
	if got := cli(t, f.server, append(tlsArgs, "DELAY.POP", "jobs:cli", "1")...); got != "jobs:cli\nc1\nfrom-cli\n" {
		t.Fatalf("redis-cli -c --tls DELAY.POP on a follower: %q", got)
	}
}
