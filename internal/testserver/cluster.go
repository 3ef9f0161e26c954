package testserver

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// ElectionMs is the Raft election timeout the tests' clusters run with. Not
// much shorter: on a loaded 2-core machine a shorter one makes leadership
// flap in the middle of a test. The leader's lease is half of it.
const ElectionMs = 1000

// ClusterFlags are the flags that make a server a cluster node with its
// Raft bus on port bus of 127.0.0.1 and the tests' election timeout.
func ClusterFlags(bus int) []string {
	return []string{
		"--cluster-enabled", "yes",
		"--cluster-bus-addr", net.JoinHostPort("127.0.0.1", strconv.Itoa(bus)),
		"--cluster-election-timeout", strconv.Itoa(ElectionMs),
	}
}

// FormCluster forms a group of n nodes as an admin would: start(how) starts
// one node, the first with how = --cluster-bootstrap; once it says it leads
// (INFO replication role:master), the others one by one with
// --cluster-join and its address. It returns once the first lists n-1
// followers online, each wait bounded by within. The nodes started so far
// come back with an error too, for their output.
//
// A formed group is where the packages' own checks begin (a write taken,
// the followers caught up, every node naming the one master): they differ
// with what each package tests.
func FormCluster(n int, within time.Duration, start func(how ...string) (*Server, error)) ([]*Server, error) {
	first, err := start("--cluster-bootstrap")
	if first == nil {
		return nil, err
	}
	nodes := []*Server{first}
	if err != nil {
		return nodes, fmt.Errorf("node 0: %w", err)
	}
	if err := waitInfo(first, within, func(info string) error {
		if role, _ := InfoField(info, "role"); role != "master" {
			return fmt.Errorf("role %q", role)
		}
		return nil
	}); err != nil {
		return nodes, fmt.Errorf("the bootstrap node %s did not lead: %w", first.Addr(), err)
	}
	for i := 1; i < n; i++ {
		s, err := start("--cluster-join", first.Addr())
		if s != nil {
			nodes = append(nodes, s)
		}
		if err != nil {
			return nodes, fmt.Errorf("node %d: %w", i, err)
		}
	}
	err = waitInfo(first, within, func(info string) error {
		role, _ := InfoField(info, "role")
		if online := strings.Count(info, "state=online"); role != "master" || online != n-1 {
			return fmt.Errorf("role %q with %d of %d followers online", role, online, n-1)
		}
		return nil
	})
	if err != nil {
		return nodes, fmt.Errorf("the group of %d did not form on %s: %w", n, first.Addr(), err)
	}
	return nodes, nil
}

// waitInfo polls s's INFO replication every 50 ms until ok accepts it, or
// returns ok's last error after within.
func waitInfo(s *Server, within time.Duration, ok func(info string) error) error {
	deadline := time.Now().Add(within)
	for {
		info, err := s.Do("INFO", "replication")
		if err == nil {
			err = ok(info)
		}
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v: %w", within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
