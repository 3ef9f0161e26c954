package compat

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

func goRedisCells() map[string]cell {
	return map[string]cell{
		"handshake":   {run: goRedisHandshake},
		"resp3":       {run: goRedisRESP3},
		"auth":        {run: goRedisAuth},
		"delay":       {run: goRedisDelay},
		"schedule":    {run: goRedisSchedule},
		"pipeline":    {run: goRedisPipeline},
		"transaction": {run: goRedisTransaction},
		"blpop":       {run: goRedisBLPOP},
		"popack":      {run: goRedisPopAck},
		"lmove":       {run: goRedisLMove},
		"scan":        {run: goRedisScan},
		"clientinfo":  {run: goRedisClientInfo},
		"cache":       {na: "go-redis v9 has no client-side cache"},
		"reconnect":   {run: goRedisReconnect},
		"tls":         {run: goRedisTLS},
		"cluster":     {run: goRedisCluster},
		"failover":    {run: goRedisFailover},
	}
}

// goRedis is a client with the library's defaults (RESP3, 5 s read
// timeout, 3 retries), changed only by opts.
func goRedis(e *env, opts ...func(*redis.Options)) *redis.Client {
	o := &redis.Options{Addr: e.addr}
	for _, f := range opts {
		f(o)
	}
	return redis.NewClient(o)
}

func ctx10() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}

func goRedisHandshake(e *env) error {
	ctx, cancel := ctx10()
	defer cancel()
	c := goRedis(e)
	defer c.Close()
	if err := eq("PING", c.Ping(ctx).Val(), "PONG"); err != nil {
		return fmt.Errorf("%w (error: %v)", err, c.Ping(ctx).Err())
	}
	if err := noErr("add", c.Do(ctx, readyCmd("q", "job")...).Err()); err != nil {
		return err
	}
	n, err := c.LLen(ctx, "q").Result()
	return first(noErr("LLEN", err), eq("LLEN", n, int64(1)))
}

func goRedisRESP3(e *env) error {
	ctx, cancel := ctx10()
	defer cancel()
	c := goRedis(e, func(o *redis.Options) { o.Protocol = 3 })
	defer c.Close()
	hello, err := c.Do(ctx, "HELLO", "3").Result()
	if err != nil {
		return noErr("HELLO 3", err)
	}
	m, ok := hello.(map[any]any)
	if !ok {
		return fmt.Errorf("HELLO 3: got %T %v, want a map", hello, hello)
	}
	if err := first(eq("HELLO proto", m["proto"], int64(3)), eq("HELLO server", m["server"], "redis")); err != nil {
		return err
	}
	if againstRedis {
		return nil
	}
	if err := noErr("DELAY.ADD", c.Do(ctx, "DELAY.ADD", "q", "60000", "p", "ID", "j1").Err()); err != nil {
		return err
	}
	got, err := c.Do(ctx, "DELAY.GET", "q", "j1").Result()
	if err != nil {
		return noErr("DELAY.GET", err)
	}
	job, ok := got.(map[any]any)
	if !ok {
		return fmt.Errorf("DELAY.GET under RESP3: got %T, want a map", got)
	}
	return first(eq("DELAY.GET state", job["state"], "delayed"), eq("DELAY.GET payload", job["payload"], "p"))
}

func goRedisAuth(e *env) error {
	ctx, cancel := ctx10()
	defer cancel()
	none := goRedis(e, func(o *redis.Options) { o.MaxRetries = -1 })
	defer none.Close()
	if err := errStarts("PING without a password", none.Ping(ctx).Err(), "NOAUTH"); err != nil {
		return err
	}
	wrong := goRedis(e, func(o *redis.Options) { o.Password = "wrong"; o.MaxRetries = -1 })
	defer wrong.Close()
	if err := errStarts("PING with a wrong password", wrong.Ping(ctx).Err(), "WRONGPASS"); err != nil {
		return err
	}
	for _, proto := range []int{2, 3} {
		c := goRedis(e, func(o *redis.Options) { o.Password = e.password; o.Protocol = proto })
		err := c.Ping(ctx).Err()
		_ = c.Close()
		if err != nil {
			return fmt.Errorf("PING with the password, RESP%d: %w", proto, err)
		}
	}
	return nil
}

func goRedisDelay(e *env) error {
	ctx, cancel := ctx10()
	defer cancel()
	c := goRedis(e)
	defer c.Close()
	id, err := c.Do(ctx, "DELAY.ADD", "emails", "60000", "welcome", "ID", "welcome-42").Text()
	if err := first(noErr("DELAY.ADD", err), eq("DELAY.ADD id", id, "welcome-42")); err != nil {
		return err
	}
	err = c.Do(ctx, "DELAY.ADD", "emails", "60000", "again", "ID", "welcome-42").Err()
	if !errors.Is(err, redis.Nil) {
		return fmt.Errorf("DELAY.ADD retry with the same ID: got %v, want a nil reply", err)
	}
	job, err := c.Do(ctx, "DELAY.GET", "emails", "welcome-42").Result()
	if err != nil {
		return noErr("DELAY.GET", err)
	}
	m, ok := job.(map[any]any) // go-redis speaks RESP3 by default
	if !ok {
		return fmt.Errorf("DELAY.GET: got %T, want a map", job)
	}
	if err := first(eq("state", m["state"], "delayed"), eq("payload", m["payload"], "welcome"),
		eq("deliveries", m["deliveries"], int64(0))); err != nil {
		return err
	}
	stats, err := c.Do(ctx, "DELAY.STATS", "emails").Result()
	if err != nil {
		return noErr("DELAY.STATS", err)
	}
	if sm, ok := stats.(map[any]any); !ok || sm["delayed"] != int64(1) {
		return fmt.Errorf("DELAY.STATS: got %v, want delayed 1", stats)
	}
	n, err := c.Do(ctx, "DELAY.CANCEL", "emails", "welcome-42").Int()
	if err := first(noErr("DELAY.CANCEL", err), eq("DELAY.CANCEL", n, 1)); err != nil {
		return err
	}
	if err := c.Do(ctx, "DELAY.GET", "emails", "welcome-42").Err(); !errors.Is(err, redis.Nil) {
		return fmt.Errorf("DELAY.GET after CANCEL: got %v, want nil", err)
	}
	binary := "\x00\xff\r\nbytes"
	if err := c.Do(ctx, "DELAY.ADD", "bin", "0", binary).Err(); err != nil {
		return noErr("DELAY.ADD binary", err)
	}
	popped, err := c.Do(ctx, "DELAY.POP", "bin", "1").StringSlice()
	if err != nil {
		return noErr("DELAY.POP", err)
	}
	if len(popped) != 3 {
		return fmt.Errorf("DELAY.POP: got %q, want [key id payload]", popped)
	}
	return eq("DELAY.POP payload", popped[2], binary)
}

func goRedisPipeline(e *env) error {
	ctx, cancel := ctx10()
	defer cancel()
	c := goRedis(e)
	defer c.Close()
	cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := 0; i < 100; i++ {
			p.Do(ctx, readyCmd("q", fmt.Sprint("job-", i))...)
		}
		return nil
	})
	if err := first(noErr("Pipelined", err), eq("replies", len(cmds), 100)); err != nil {
		return err
	}
	n, err := c.LLen(ctx, "q").Result()
	return first(noErr("LLEN", err), eq("LLEN after the pipeline", n, int64(100)))
}

func goRedisTransaction(e *env) error {
	ctx, cancel := ctx10()
	defer cancel()
	c := goRedis(e)
	defer c.Close()
	cmds, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for i := 0; i < 100; i++ {
			p.Do(ctx, readyCmd("q", fmt.Sprint("job-", i))...)
		}
		return nil
	})
	if err := first(noErr("TxPipelined of 100 adds", err), eq("replies", len(cmds), 100)); err != nil {
		return err
	}
	n, err := c.LLen(ctx, "q").Result()
	if err := first(noErr("LLEN", err), eq("LLEN after the transaction", n, int64(100))); err != nil {
		return err
	}

	// A command refused while queuing (wrong arity) aborts the whole
	// transaction: the add queued before it must not run.
	_, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Do(ctx, readyCmd("aborted", "job")...)
		p.Do(ctx, "RPUSH", "aborted")
		return nil
	})
	if err := errStarts("TxPipelined with a wrong-arity command", err, "EXECABORT"); err != nil {
		return err
	}
	n, err = c.LLen(ctx, "aborted").Result()
	if err := first(noErr("LLEN", err), eq("LLEN after EXECABORT (nothing may run)", n, int64(0))); err != nil {
		return err
	}

	// WATCH: a queue changed by another client between WATCH and EXEC makes
	// the transaction fail, and nothing of it runs.
	other := goRedis(e)
	defer other.Close()
	err = c.Watch(ctx, func(tx *redis.Tx) error {
		if err := other.Do(ctx, readyCmd("watched", "theirs")...).Err(); err != nil {
			return err
		}
		_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Do(ctx, readyCmd("watched", "mine")...)
			return nil
		})
		return err
	}, "watched")
	if !errors.Is(err, redis.TxFailedErr) {
		return fmt.Errorf("WATCH of a queue changed before EXEC: got %v, want redis.TxFailedErr", err)
	}
	n, err = c.LLen(ctx, "watched").Result()
	return first(noErr("LLEN", err), eq("LLEN after the failed EXEC", n, int64(1)))
}

func goRedisBLPOP(e *env) error {
	ctx, cancel := ctx10()
	defer cancel()
	worker, producer := goRedis(e), goRedis(e)
	defer worker.Close()
	defer producer.Close()
	start := time.Now()
	go func() {
		time.Sleep(300 * time.Millisecond)
		_ = producer.Do(ctx, readyCmd("q", "job")...).Err()
	}()
	got, err := worker.BLPop(ctx, 5*time.Second, "q").Result()
	if err := first(noErr("BLPOP", err), eq("BLPOP", got, []string{"q", "job"})); err != nil {
		return err
	}
	if took := time.Since(start); took < 250*time.Millisecond {
		return fmt.Errorf("BLPOP returned after %v, before the job was added", took)
	}
	_, err = worker.BLPop(ctx, time.Second, "empty").Result()
	if !errors.Is(err, redis.Nil) {
		return fmt.Errorf("BLPOP of an empty queue: got %v, want nil after the timeout", err)
	}
	return nil
}

// goRedisPopAck is the worker of examples/go: DELAY.POP through Do is cut
// by the client's read timeout (go-redis stretches it only for its own
// blocking helpers), so the worker pops with 1 s, below its read timeout.
func goRedisPopAck(e *env) error {
	ctx, cancel := ctx10()
	defer cancel()
	c := goRedis(e, func(o *redis.Options) { o.ReadTimeout = 3 * time.Second })
	defer c.Close()
	start := time.Now()
	id, err := c.Do(ctx, "DELAY.ADD", "q", "1500", "job", "ACKTIMEOUT", "30000").Text()
	if err != nil {
		return noErr("DELAY.ADD", err)
	}
	var job []string
	empty := 0
	for job == nil {
		got, err := c.Do(ctx, "DELAY.POP", "q", "1").StringSlice()
		switch {
		case errors.Is(err, redis.Nil):
			empty++
		case err != nil:
			return noErr("DELAY.POP", err)
		default:
			job = got
		}
	}
	if took := time.Since(start); took < 1500*time.Millisecond {
		return fmt.Errorf("the job came after %v, before its delay of 1.5 s", took)
	}
	if err := first(eq("empty pops before the job", empty > 0, true), eq("DELAY.POP", job, []string{"q", id, "job"})); err != nil {
		return err
	}
	got, err := c.Do(ctx, "DELAY.GET", "q", id).Result()
	if m, ok := got.(map[any]any); err != nil || !ok || m["state"] != "reserved" {
		return fmt.Errorf("DELAY.GET after the pop: got %v (%v), want state reserved", got, err)
	}
	n, err := c.Do(ctx, "DELAY.ACK", "q", id).Int()
	if err := first(noErr("DELAY.ACK", err), eq("DELAY.ACK", n, 1)); err != nil {
		return err
	}
	if err := c.Do(ctx, "DELAY.GET", "q", id).Err(); !errors.Is(err, redis.Nil) {
		return fmt.Errorf("DELAY.GET after ACK: got %v, want nil", err)
	}
	return nil
}

func goRedisLMove(e *env) error {
	ctx, cancel := ctx10()
	defer cancel()
	c := goRedis(e)
	defer c.Close()
	for _, p := range []string{"job-1", "job-2"} {
		if err := c.Do(ctx, readyCmd("q", p)...).Err(); err != nil {
			return noErr("add", err)
		}
	}
	got, err := c.BLMove(ctx, "q", "q:processing", "LEFT", "RIGHT", time.Second).Result()
	if err := first(noErr("BLMOVE", err), eq("BLMOVE", got, "job-1")); err != nil {
		return err
	}
	got, err = c.RPopLPush(ctx, "q", "q:processing").Result()
	if err := first(noErr("RPOPLPUSH", err), eq("RPOPLPUSH", got, "job-2")); err != nil {
		return err
	}
	n, err := c.LLen(ctx, "q:processing").Result()
	if err := first(noErr("LLEN", err), eq("LLEN q:processing", n, int64(2))); err != nil {
		return err
	}
	for _, p := range []string{"job-1", "job-2"} {
		n, err := c.LRem(ctx, "q:processing", 1, p).Result()
		if err := first(noErr("LREM", err), eq("LREM "+p, n, int64(1))); err != nil {
			return err
		}
	}
	n, err = c.Exists(ctx, "q", "q:processing").Result()
	return first(noErr("EXISTS", err), eq("EXISTS q q:processing when done", n, int64(0)))
}

func goRedisScan(e *env) error {
	ctx, cancel := ctx10()
	defer cancel()
	c := goRedis(e)
	defer c.Close()
	for _, q := range []string{"jobs:a", "jobs:b", "other"} {
		if err := c.Do(ctx, readyCmd(q, "job")...).Err(); err != nil {
			return noErr("add", err)
		}
	}
	var scanned []string
	it := c.Scan(ctx, 0, "jobs:*", 1).Iterator()
	for it.Next(ctx) {
		scanned = append(scanned, it.Val())
	}
	if err := first(noErr("SCAN", it.Err()), eq("SCAN MATCH jobs:*", sorted(scanned), []string{"jobs:a", "jobs:b"})); err != nil {
		return err
	}
	keys, err := c.Keys(ctx, "jobs:*").Result()
	if err := first(noErr("KEYS", err), eq("KEYS jobs:*", sorted(keys), []string{"jobs:a", "jobs:b"})); err != nil {
		return err
	}
	n, err := c.DBSize(ctx).Result()
	return first(noErr("DBSIZE", err), eq("DBSIZE", n, int64(3)))
}

func goRedisClientInfo(e *env) error {
	ctx, cancel := ctx10()
	defer cancel()
	c := goRedis(e, func(o *redis.Options) { o.ClientName = "compat-worker" })
	defer c.Close()
	info, err := c.ClientInfo(ctx).Result()
	if err != nil {
		return noErr("CLIENT INFO", err)
	}
	return first(eq("id > 0", info.ID > 0, true), eq("name", info.Name, "compat-worker"),
		eq("addr set", info.Addr != "", true), eq("resp", info.Resp, 3))
}

func goRedisReconnect(e *env) error {
	ctx, cancel := ctx10()
	defer cancel()
	c := goRedis(e)
	defer c.Close()
	if err := c.Do(ctx, readyCmd("q", "job")...).Err(); err != nil {
		return noErr("add", err)
	}
	if err := e.restart(); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	n, err := c.LLen(ctx, "q").Result()
	return first(noErr("LLEN after the restart", err), eq("LLEN after the restart", n, int64(1)))
}

// goRedisClusterClient is redis.NewClusterClient with its defaults and the
// one setting the README names: ClusterStateReloadInterval 1 s (default
// 60 s). go-redis reloads its slot map on MOVED, and otherwise only when
// the map is older than this; a dead master refuses connections and never
// says MOVED, so with the default the client dials the dead leader for up
// to a minute (measured: 52 to 58 s, TestFailoverResume; go-redis issue
// #3979, "Cluster state is not reloaded on connection refused": the same
// with Redis Cluster). No server can help there: the client asks no other
// node.
func goRedisClusterClient(addrs []string) *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                      addrs,
		ClusterStateReloadInterval: time.Second,
	})
}

// follower is the address of a node that is not the leader.
func follower(e *env) (string, error) {
	l, err := e.cluster.leader()
	if err != nil {
		return "", err
	}
	for _, a := range e.addrs {
		if a == l.addr() {
			continue
		}
		if clusterGroups > 1 {
			// Nor group 0's leader: orders (slot 105), the cluster checks'
			// queue, is in group 0, and the failover checks' leader leads
			// another group.
			if r, err := ask(a, "INFO", "replication"); err != nil || strings.Contains(fmt.Sprint(r), "role:master\r\n") {
				continue
			}
		}
		return a, nil
	}
	return "", fmt.Errorf("no follower")
}

func goRedisCluster(e *env) error {
	ctx, cancel := ctx10()
	defer cancel()
	seed, err := follower(e)
	if err != nil {
		return err
	}
	c := goRedisClusterClient([]string{seed})
	defer c.Close()
	id, err := c.Do(ctx, "DELAY.ADD", "orders", "0", "hello", "ID", "order-1", "ACKTIMEOUT", "30000").Text()
	if err := first(noErr("DELAY.ADD through "+seed, err), eq("DELAY.ADD", id, "order-1")); err != nil {
		return err
	}
	job, err := c.Do(ctx, "DELAY.GET", "orders", "order-1").Result()
	if err != nil {
		return noErr("DELAY.GET", err)
	}
	if m, ok := job.(map[any]any); !ok || m["state"] != "ready" {
		return fmt.Errorf("DELAY.GET: got %v, want a map with state ready", job)
	}
	popped, err := c.Do(ctx, "DELAY.POP", "orders", "1").StringSlice()
	if err := first(noErr("DELAY.POP", err), eq("DELAY.POP", popped, []string{"orders", "order-1", "hello"})); err != nil {
		return err
	}
	n, err := c.Do(ctx, "DELAY.ACK", "orders", "order-1").Int()
	if err := first(noErr("DELAY.ACK", err), eq("DELAY.ACK", n, 1)); err != nil {
		return err
	}
	// The cluster pipeline splits the commands by slot and node: 20 queues
	// are 20 slots, all on the one master.
	cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := 0; i < 20; i++ {
			p.Do(ctx, "DELAY.ADD", fmt.Sprint("queue-", i), "0", "job")
		}
		return nil
	})
	if err := first(noErr("Pipelined", err), eq("pipeline replies", len(cmds), 20)); err != nil {
		return err
	}
	for i := 0; i < 20; i++ {
		n, err := c.LLen(ctx, fmt.Sprint("queue-", i)).Result()
		if err := first(noErr("LLEN", err), eq(fmt.Sprint("LLEN queue-", i), n, int64(1))); err != nil {
			return err
		}
	}
	return nil
}

// goRedisJobs is the failover workload's calls through a ClusterClient.
type goRedisJobs struct{ c *redis.ClusterClient }

func (j goRedisJobs) add(ctx context.Context, queue, id string, delayMs int) error {
	err := j.c.Do(ctx, "DELAY.ADD", queue, delayMs, id, "ID", id, "ACKTIMEOUT", 5000).Err()
	if errors.Is(err, redis.Nil) {
		return nil // an earlier try of this add went through
	}
	return err
}

func (j goRedisJobs) pop(ctx context.Context, queue string) (string, error) {
	job, err := j.c.Do(ctx, "DELAY.POP", queue, 1).StringSlice()
	switch {
	case errors.Is(err, redis.Nil):
		return "", nil
	case err != nil:
		return "", err
	case len(job) != 3:
		return "", fmt.Errorf("DELAY.POP: got %q, want [key id payload]", job)
	}
	return job[1], nil
}

func (j goRedisJobs) ack(ctx context.Context, queue, id string) error {
	return j.c.Do(ctx, "DELAY.ACK", queue, id).Err()
}

func goRedisFailover(e *env) error {
	c := goRedisClusterClient(e.addrs)
	defer c.Close()
	return runFailover(e, goRedisJobs{c})
}
