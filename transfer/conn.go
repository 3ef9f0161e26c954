package transfer

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server says how to reach a delayd server: one node's address, and the
// AUTH and TLS it takes.
type Server struct {
	Addr     string // host:port of any node
	User     string // "" with a password: the default user
	Password string
	TLS      *tls.Config // nil: plain TCP
}

// Dial connects to a server. A cluster node (INFO's cluster_enabled:1)
// gives a cluster client, which routes each command by its key's slot and
// follows MOVED to the leader, so a job reaches the node that may write it
// whichever node Addr names.
func Dial(ctx context.Context, s Server) (redis.UniversalClient, error) {
	one := redis.NewClient(&redis.Options{Addr: s.Addr, Username: s.User, Password: s.Password, TLSConfig: s.TLS,
		ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, PoolSize: 4 * workers, Protocol: 2})
	info, err := one.Info(ctx, "cluster").Result()
	if err != nil {
		one.Close()
		return nil, fmt.Errorf("%s: %w", s.Addr, err)
	}
	if !strings.Contains(info, "cluster_enabled:1") {
		return one, nil
	}
	one.Close()
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{s.Addr}, Username: s.User, Password: s.Password,
		TLSConfig: s.TLS, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, PoolSize: 4 * workers,
		MaxRedirects: 8, Protocol: 2}), nil
}

// eachNode calls fn with a client of every node that holds keys: the one
// server, or every master of a cluster.
func eachNode(ctx context.Context, c redis.UniversalClient, fn func(ctx context.Context, n *redis.Client) error) error {
	if cc, ok := c.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, fn)
	}
	return fn(ctx, c.(*redis.Client))
}

// Queues lists every queue that holds a job, sorted, by SCAN on every node.
func Queues(ctx context.Context, c redis.UniversalClient) ([]string, error) {
	seen := map[string]bool{}
	err := eachNode(ctx, c, func(ctx context.Context, n *redis.Client) error {
		it := n.Scan(ctx, 0, "", 1000).Iterator()
		for it.Next(ctx) {
			seen[it.Val()] = true
		}
		return it.Err()
	})
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(seen))
	for q := range seen {
		names = append(names, q)
	}
	slices.Sort(names)
	return names, nil
}

// CountJobs adds up the jobs of the queues, as DELAY.STATS counts them
// (delayed, ready, reserved): an export's total, for its progress bar.
func CountJobs(ctx context.Context, c redis.UniversalClient, queues []string) (int64, error) {
	pipe := c.Pipeline()
	cmds := make([]*redis.Cmd, len(queues))
	for i, q := range queues {
		cmds[i] = pipe.Do(ctx, "DELAY.STATS", q)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, err
	}
	var n int64
	for _, cmd := range cmds {
		v, _ := cmd.Slice()
		for i := 0; i+1 < len(v); i += 2 {
			switch v[i] {
			case "delayed", "ready", "reserved":
				k, _ := v[i+1].(int64)
				n += k
			}
		}
	}
	return n, nil
}
