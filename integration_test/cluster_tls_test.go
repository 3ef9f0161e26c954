package integration

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

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
