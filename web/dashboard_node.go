package web

import (
	"context"
	"net"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A cluster follower's dashboard. Keyed commands on a follower answer
// MOVED, so every panel showed the redirection and counted nothing. The
// follower holds a full copy of the leader's data, applied from the Raft
// log, so its pages read that copy (READONLY, as a RESP client may) and
// say so in a banner that names the leader and links to its dashboard.
// They offer no action: a write must run on the leader, and a button that
// can only fail is not offered. The counters and rates that only the node
// handing out jobs counts (adds, deliveries, acks, lateness) are the
// leader's too: a follower's are zero, so they are not shown as figures.
//
// Members know each other's RESP address, not their HTTP one, so the
// follower asks the leader (CONFIG GET http-addr, with the server's
// requirepass) in the background and links to it once it knows; until
// then, or when the leader cannot be asked, the banner names the leader's
// RESP address.

// nodeView is this node's place in a cluster, as a page shows it.
type nodeView struct {
	Follower bool
	Leader   string // the leader's RESP address; "" when none is known
	LinkUp   bool   // this follower hears from the leader
	// LeaderURL is the leader's dashboard (scheme and host, the page's
	// path goes after it); LeaderHTTP says why there is none (its HTTP side is off, or listens on its own loopback only).
	LeaderURL, LeaderHTTP string
}

// node reads this node's role from INFO replication: a follower says
// role:slave and names the leader as master_host:master_port.
func (d *dashboard) node(ctx context.Context) nodeView {
	v, err := d.do(ctx, "INFO", "replication")
	if err != nil {
		return nodeView{}
	}
	rep := parseInfo(v)["replication"]
	if rep["role"] != "slave" {
		return nodeView{}
	}
	n := nodeView{Follower: true, LinkUp: rep["master_link_status"] == "up"}
	if h, p := rep["master_host"], rep["master_port"]; h != "" && p != "" && p != "0" {
		n.Leader = net.JoinHostPort(h, p)
		n.LeaderURL, n.LeaderHTTP = d.leaders.lookup(n.Leader, d.askHTTPAddr)
	}
	return n
}

// leaderBook remembers leaders' dashboard addresses, asked for in the
// background so that a page never waits on another node.
type leaderBook struct {
	mu      sync.Mutex
	entries map[string]*leaderEntry
}

type leaderEntry struct {
	url, why string
	at       time.Time
	asking   bool
}

// leaderFor is how long an answer is kept (a leader's HTTP address seldom
// changes; a new leader is a new entry).
const leaderFor = time.Minute

func (b *leaderBook) lookup(addr string, ask func(string) (string, string)) (string, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.entries == nil {
		b.entries = map[string]*leaderEntry{}
	}
	e := b.entries[addr]
	if e == nil {
		if len(b.entries) > 16 {
			clear(b.entries) // old leaders
		}
		e = &leaderEntry{}
		b.entries[addr] = e
	}
	if !e.asking && time.Since(e.at) > leaderFor {
		e.asking = true
		go func() {
			u, why := ask(addr)
			b.mu.Lock()
			e.url, e.why, e.at, e.asking = u, why, time.Now(), false
			b.mu.Unlock()
		}()
	}
	return e.url, e.why
}

// askHTTPAddr asks the leader at addr (RESP) where its HTTP side listens
// and makes a link of it: an unspecified host (0.0.0.0) is reached at the
// leader's RESP host; a loopback one only from the leader's machine.
func (d *dashboard) askHTTPAddr(addr string) (string, string) {
	cl := redis.NewClient(&redis.Options{
		Addr: addr, Password: d.s.opts.Password, Protocol: 2, DisableIdentity: true,
		MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second,
	})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	kv, err := cl.ConfigGet(ctx, "http-addr").Result()
	if err != nil {
		return "", "the leader did not say where its dashboard is (" + err.Error() + ")"
	}
	return leaderLink(kv["http-addr"], addr, d.s.opts.TLS != nil)
}

// leaderLink is the URL of a leader's dashboard from its http-addr and
// its RESP address, or why there is none.
func leaderLink(httpAddr, respAddr string, https bool) (string, string) {
	if httpAddr == "" {
		return "", "the leader's HTTP side is off (--http-addr \"\")"
	}
	host, port, err := net.SplitHostPort(httpAddr)
	if err != nil {
		return "", "the leader's http-addr " + strconv.Quote(httpAddr) + " is not host:port"
	}
	respHost, _, _ := net.SplitHostPort(respAddr)
	ip := net.ParseIP(host)
	switch {
	case host == "" || (ip != nil && ip.IsUnspecified()):
		host = respHost
	case ip != nil && ip.IsLoopback():
		if rip := net.ParseIP(respHost); rip == nil || !rip.IsLoopback() {
			return "", "the leader's dashboard listens on " + httpAddr + ", its own machine only"
		}
	}
	scheme := "http"
	if https {
		scheme = "https"
	}
	u := url.URL{Scheme: scheme, Host: net.JoinHostPort(host, port)}
	return u.String(), "" // the page's own path is added to it
}
