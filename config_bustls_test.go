package main

import (
	"io"
	"strings"
	"testing"
)

// With port 0 the cluster's announced client address and default bus port
// go by tls-port, and a TLS cluster needs a CA for the bus's mutual TLS.
func TestClusterTLSConfig(t *testing.T) {
	tlsArgs := []string{"--cluster-enabled", "yes", "--tls-port", "6390", "--tls-cert-file", "c", "--tls-key-file", "k"}
	c, err := loadConfig(append([]string{"--port", "0", "--tls-ca-cert-file", "ca"}, tlsArgs...), nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.ClusterAnnounceAddr != "127.0.0.1:6390" || !strings.HasSuffix(c.ClusterBusAddr, ":16390") {
		t.Fatalf("announce %s, bus %s: want the TLS port's", c.ClusterAnnounceAddr, c.ClusterBusAddr)
	}
	_, err = loadConfig(append([]string{"--tls-auth-clients", "no"}, tlsArgs...), nil, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "cluster bus") {
		t.Fatalf("a TLS cluster without a CA: %v, want refused for the bus", err)
	}
}
