package testserver

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
)

// Range is the ports from First to Last, both included.
type Range struct{ First, Last int }

// The port ranges of the packages that use this one; each takes its ports
// from its own (see the package comment).
var (
	E2EPorts         = Range{16384, 19999}
	CompatPorts      = Range{20000, 26383}
	IntegrationPorts = Range{26384, 32767}
)

// Ports hands out free ports of one range, each at most once in the life
// of the process.
//
// The range lies below Linux's ephemeral range (32768-60999). A port the
// kernel hands out for ":0" comes from that range, which is also where every
// outgoing connection takes its local port: once a test kills a server, a
// client's (or a Raft peer's) outgoing connection could take the dead
// server's port before the test restarts it there, and the restart failed
// with "address already in use" (seen in CI on cluster failover tests).
// Ports below it are never taken that way; a random one is tried until one
// binds.
//
// No port is handed out twice: tests run in parallel, and a killed server's
// port, free until its restart, could be given to another test. compat saw
// it happen: another check's cluster was given a killed leader's bus port,
// the restart failed, and the other cluster's node took Raft requests from
// the first cluster's.
type Ports struct {
	first, last int

	mu     sync.Mutex
	handed map[int]bool
}

// NewPorts returns the ports of r.
func NewPorts(r Range) *Ports {
	return &Ports{first: r.First, last: r.Last, handed: map[int]bool{}}
}

// Take returns a port of the range that is free on ip now and was never
// handed out before, on any ip.
func (p *Ports) Take(ip string) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for range 200 {
		port := p.first + rand.IntN(p.last-p.first+1)
		if p.handed[port] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
		if err != nil {
			continue
		}
		l.Close()
		p.handed[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("no free port on %s between %d and %d", ip, p.first, p.last)
}

// Local is Take on 127.0.0.1, where the servers listen.
func (p *Ports) Local() (int, error) { return p.Take("127.0.0.1") }

// TakeRun returns a port p such that p, p+step, ... (n ports) are all free
// on ip and never handed out before, and hands them all out: a node of a
// cluster of several groups listens on its port + g*step for each group g.
func (p *Ports) TakeRun(ip string, n, step int) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for range 200 {
		first := p.first + rand.IntN(p.last-p.first+1-(n-1)*step)
		ok := true
		for i := 0; ok && i < n; i++ {
			port := first + i*step
			if p.handed[port] {
				ok = false
				break
			}
			l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if !ok {
			continue
		}
		for i := 0; i < n; i++ {
			p.handed[first+i*step] = true
		}
		return first, nil
	}
	return 0, fmt.Errorf("no %d free ports %d apart on %s between %d and %d", n, step, ip, p.first, p.last)
}
