package compat

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

func rueidisCells() map[string]cell {
	return map[string]cell{
		"handshake":   {run: rueidisHandshake},
		"resp3":       {run: rueidisRESP3},
		"auth":        {run: rueidisAuth},
		"delay":       {run: rueidisDelay},
		"schedule":    {run: rueidisSchedule},
		"pipeline":    {run: rueidisPipeline},
		"transaction": {run: rueidisTransaction},
		"blpop":       {run: rueidisBLPOP},
		"popack":      {run: rueidisPopAck},
		"lmove":       {run: rueidisLMove},
		"scan":        {run: rueidisScan},
		"clientinfo":  {run: rueidisClientInfo},
		"cache":       {run: rueidisCache},
		"reconnect":   {run: rueidisReconnect},
		"tls":         {run: rueidisTLS},
		"cluster":     {run: rueidisCluster},
		"failover":    {run: rueidisFailover},
	}
}

// newRueidis connects with the library's defaults (RESP3, and CLIENT
// TRACKING ON OPTIN in the handshake for its client-side cache, which
// NewClient refuses to go without) changed by opts.
func newRueidis(e *env, opts ...func(*rueidis.ClientOption)) (rueidis.Client, error) {
	o := rueidis.ClientOption{InitAddress: []string{e.addr}}
	for _, f := range opts {
		f(&o)
	}
	c, err := rueidis.NewClient(o)
	if err != nil {
		return nil, fmt.Errorf("rueidis.NewClient: %w", err)
	}
	return c, nil
}

// newRueidisNoCache is newRueidis without the client-side cache (no
// CLIENT TRACKING in the handshake), for the checks of other features, so
// that each cell of the matrix shows its own feature: the handshake and
// cache cells check the defaults.
func newRueidisNoCache(e *env, opts ...func(*rueidis.ClientOption)) (rueidis.Client, error) {
	o := rueidis.ClientOption{InitAddress: []string{e.addr}, DisableCache: true}
	for _, f := range opts {
		f(&o)
	}
	c, err := rueidis.NewClient(o)
	if err != nil {
		return nil, fmt.Errorf("rueidis.NewClient with DisableCache: %w", err)
	}
	return c, nil
}

// ready is readyCmd for rueidis.
func ready(c rueidis.Client, queue, payload string) rueidis.Completed {
	a := readyCmd(queue, payload)
	args := make([]string, 0, len(a)-2)
	for _, x := range a[2:] {
		args = append(args, x.(string))
	}
	return c.B().Arbitrary(a[0].(string)).Keys(queue).Args(args...).Build()
}

func rueidisHandshake(e *env) error {
	ctx, cancel := ctx10()
	defer cancel()
	c, err := newRueidis(e)
	if err != nil {
		return err
	}
	defer c.Close()
	pong, err := c.Do(ctx, c.B().Ping().Build()).ToString()
	if err := first(noErr("PING", err), eq("PING", pong, "PONG")); err != nil {
		return err
	}
	if err := c.Do(ctx, ready(c, "q", "job")).Error(); err != nil {
		return noErr("add", err)
	}
	n, err := c.Do(ctx, c.B().Llen().Key("q").Build()).AsInt64()
	return first(noErr("LLEN", err), eq("LLEN", n, int64(1)))
}

func rueidisRESP3(e *env) error {
	ctx, cancel := ctx10()
	defer cancel()
	c, err := newRueidisNoCache(e)
	if err != nil {
		return err
	}
	defer c.Close()
	hello, err := c.Do(ctx, c.B().Hello().Protover(3).Build()).AsMap()
	if err != nil {
		return noErr("HELLO 3", err)
	}
	protoMsg, serverMsg := hello["proto"], hello["server"]
	proto, _ := protoMsg.AsInt64()
	server, _ := serverMsg.ToString()
	if err := first(eq("HELLO proto", proto, int64(3)), eq("HELLO server", server, "redis")); err != nil {
		return err
	}
	if againstRedis {
		return nil
	}
	if err := c.Do(ctx, c.B().Arbitrary("DELAY.ADD").Keys("q").Args("60000", "p", "ID", "j1").Build()).Error(); err != nil {
		return noErr("DELAY.ADD", err)
	}
	job, err := c.Do(ctx, c.B().Arbitrary("DELAY.GET").Keys("q").Args("j1").Build()).ToMap()
	if err != nil {
		return fmt.Errorf("DELAY.GET under RESP3, want a map: %w", err)
	}
	stateMsg := job["state"]
	state, _ := stateMsg.ToString()
	return eq("DELAY.GET state", state, "delayed")
}

func rueidisAuth(e *env) error {
	ctx, cancel := ctx10()
	defer cancel()
	_, err := newRueidisNoCache(e)
	if err := errStarts("connect without a password", err, "NOAUTH"); err != nil {
		return err
	}
	_, err = newRueidisNoCache(e, func(o *rueidis.ClientOption) { o.Password = "wrong" })
	if err := errStarts("connect with a wrong password", err, "WRONGPASS"); err != nil {
		return err
	}
	c, err := newRueidisNoCache(e, func(o *rueidis.ClientOption) { o.Password = e.password })
	if err != nil {
		return err
	}
	defer c.Close()
	return noErr("PING with the password", c.Do(ctx, c.B().Ping().Build()).Error())
}

func rueidisDelay(e *env) error {
	ctx, cancel := ctx10()
	defer cancel()
	c, err := newRueidisNoCache(e)
	if err != nil {
		return err
	}
	defer c.Close()
	add := func(payload string) rueidis.RedisResult {
		return c.Do(ctx, c.B().Arbitrary("DELAY.ADD").Keys("emails").Args("60000", payload, "ID", "welcome-42").Build())
	}
	id, err := add("welcome").ToString()
	if err := first(noErr("DELAY.ADD", err), eq("DELAY.ADD id", id, "welcome-42")); err != nil {
		return err
	}
	if err := add("again").Error(); !rueidis.IsRedisNil(err) {
		return fmt.Errorf("DELAY.ADD retry with the same ID: got %v, want a nil reply", err)
	}
	job, err := c.Do(ctx, c.B().Arbitrary("DELAY.GET").Keys("emails").Args("welcome-42").Build()).ToMap()
	if err != nil {
		return noErr("DELAY.GET", err)
	}
	stateMsg, payloadMsg := job["state"], job["payload"]
	state, _ := stateMsg.ToString()
	payload, _ := payloadMsg.ToString()
	if err := first(eq("state", state, "delayed"), eq("payload", payload, "welcome")); err != nil {
		return err
	}
	n, err := c.Do(ctx, c.B().Arbitrary("DELAY.CANCEL").Keys("emails").Args("welcome-42").Build()).AsInt64()
	if err := first(noErr("DELAY.CANCEL", err), eq("DELAY.CANCEL", n, int64(1))); err != nil {
		return err
	}
	if err := c.Do(ctx, c.B().Arbitrary("DELAY.GET").Keys("emails").Args("welcome-42").Build()).Error(); !rueidis.IsRedisNil(err) {
		return fmt.Errorf("DELAY.GET after CANCEL: got %v, want nil", err)
	}
	return nil
}

func rueidisPipeline(e *env) error {
	ctx, cancel := ctx10()
	defer cancel()
	c, err := newRueidisNoCache(e)
	if err != nil {
		return err
	}
	defer c.Close()
	cmds := make(rueidis.Commands, 0, 100)
	for i := 0; i < 100; i++ {
		cmds = append(cmds, ready(c, "q", fmt.Sprint("job-", i)))
	}
	for i, r := range c.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			return fmt.Errorf("DoMulti reply %d: %w", i, err)
		}
	}
	n, err := c.Do(ctx, c.B().Llen().Key("q").Build()).AsInt64()
	return first(noErr("LLEN", err), eq("LLEN after DoMulti", n, int64(100)))
}

// rueidisTransaction sends MULTI ... EXEC on a dedicated connection, as
// rueidis's docs say to.
func rueidisTransaction(e *env) error {
	ctx, cancel := ctx10()
	defer cancel()
	c, err := newRueidisNoCache(e)
	if err != nil {
		return err
	}
	defer c.Close()
	tx := func(body ...rueidis.Completed) []rueidis.RedisResult {
		var out []rueidis.RedisResult
		_ = c.Dedicated(func(d rueidis.DedicatedClient) error {
			cmds := append(append(rueidis.Commands{d.B().Multi().Build()}, body...), d.B().Exec().Build())
			out = d.DoMulti(ctx, cmds...)
			return nil
		})
		return out
	}
	var adds rueidis.Commands
	for i := 0; i < 100; i++ {
		adds = append(adds, ready(c, "q", fmt.Sprint("job-", i)))
	}
	res := tx(adds...)
	replies, err := res[len(res)-1].ToArray()
	if err := first(noErr("EXEC of 100 adds", err), eq("EXEC replies", len(replies), 100)); err != nil {
		return err
	}
	n, err := c.Do(ctx, c.B().Llen().Key("q").Build()).AsInt64()
	if err := first(noErr("LLEN", err), eq("LLEN after EXEC", n, int64(100))); err != nil {
		return err
	}
	res = tx(ready(c, "aborted", "job"), c.B().Arbitrary("RPUSH").Keys("aborted").Build())
	if err := errStarts("EXEC after a wrong-arity command", res[len(res)-1].Error(), "EXECABORT"); err != nil {
		return err
	}
	n, err = c.Do(ctx, c.B().Llen().Key("aborted").Build()).AsInt64()
	return first(noErr("LLEN", err), eq("LLEN after EXECABORT (nothing may run)", n, int64(0)))
}

func rueidisBLPOP(e *env) error {
	ctx, cancel := ctx10()
	defer cancel()
	c, err := newRueidisNoCache(e)
	if err != nil {
		return err
	}
	defer c.Close()
	start := time.Now()
	go func() {
		time.Sleep(300 * time.Millisecond)
		_ = c.Do(ctx, ready(c, "q", "job")).Error()
	}()
	got, err := c.Do(ctx, c.B().Blpop().Key("q").Timeout(5).Build()).AsStrSlice()
	if err := first(noErr("BLPOP", err), eq("BLPOP", got, []string{"q", "job"})); err != nil {
		return err
	}
	if took := time.Since(start); took < 250*time.Millisecond {
		return fmt.Errorf("BLPOP returned after %v, before the job was added", took)
	}
	err = c.Do(ctx, c.B().Blpop().Key("empty").Timeout(0.2).Build()).Error()
	if !rueidis.IsRedisNil(err) {
		return fmt.Errorf("BLPOP of an empty queue: got %v, want nil after the timeout", err)
	}
	return nil
}

// rueidisPopAck marks DELAY.POP as blocking, so rueidis sends it on a
// connection of its blocking pool instead of the shared pipeline, where it
// would hold up every other command.
func rueidisPopAck(e *env) error {
	ctx, cancel := ctx10()
	defer cancel()
	c, err := newRueidisNoCache(e)
	if err != nil {
		return err
	}
	defer c.Close()
	start := time.Now()
	id, err := c.Do(ctx, c.B().Arbitrary("DELAY.ADD").Keys("q").Args("1500", "job", "ACKTIMEOUT", "30000").Build()).ToString()
	if err != nil {
		return noErr("DELAY.ADD", err)
	}
	var job []string
	empty := 0
	for job == nil {
		got, err := c.Do(ctx, c.B().Arbitrary("DELAY.POP").Keys("q").Args("1").Blocking()).AsStrSlice()
		switch {
		case rueidis.IsRedisNil(err):
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
	n, err := c.Do(ctx, c.B().Arbitrary("DELAY.ACK").Keys("q").Args(id).Build()).AsInt64()
	if err := first(noErr("DELAY.ACK", err), eq("DELAY.ACK", n, int64(1))); err != nil {
		return err
	}
	if err := c.Do(ctx, c.B().Arbitrary("DELAY.GET").Keys("q").Args(id).Build()).Error(); !rueidis.IsRedisNil(err) {
		return fmt.Errorf("DELAY.GET after ACK: got %v, want nil", err)
	}
	return nil
}

func rueidisLMove(e *env) error {
	ctx, cancel := ctx10()
	defer cancel()
	c, err := newRueidisNoCache(e)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Do(ctx, ready(c, "q", "job-1")).Error(); err != nil {
		return noErr("add", err)
	}
	got, err := c.Do(ctx, c.B().Blmove().Source("q").Destination("q:processing").Left().Right().Timeout(1).Build()).ToString()
	if err := first(noErr("BLMOVE", err), eq("BLMOVE", got, "job-1")); err != nil {
		return err
	}
	n, err := c.Do(ctx, c.B().Lrem().Key("q:processing").Count(1).Element("job-1").Build()).AsInt64()
	return first(noErr("LREM", err), eq("LREM", n, int64(1)))
}

func rueidisScan(e *env) error {
	ctx, cancel := ctx10()
	defer cancel()
	c, err := newRueidisNoCache(e)
	if err != nil {
		return err
	}
	defer c.Close()
	for _, q := range []string{"jobs:a", "jobs:b", "other"} {
		if err := c.Do(ctx, ready(c, q, "job")).Error(); err != nil {
			return noErr("add", err)
		}
	}
	var scanned []string
	for cursor, n := uint64(0), 0; ; n++ {
		if n > 100 {
			return fmt.Errorf("SCAN did not end its iteration in 100 calls")
		}
		page, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Match("jobs:*").Count(1).Build()).AsScanEntry()
		if err != nil {
			return noErr("SCAN", err)
		}
		scanned = append(scanned, page.Elements...)
		if cursor = page.Cursor; cursor == 0 {
			break
		}
	}
	return eq("SCAN MATCH jobs:*", sorted(scanned), []string{"jobs:a", "jobs:b"})
}

func rueidisClientInfo(e *env) error {
	ctx, cancel := ctx10()
	defer cancel()
	c, err := newRueidisNoCache(e)
	if err != nil {
		return err
	}
	defer c.Close()
	info, err := c.Do(ctx, c.B().ClientInfo().Build()).ToString()
	if err != nil {
		return noErr("CLIENT INFO", err)
	}
	// Under RESP3 Redis replies a verbatim string, which rueidis gives
	// with its format prefix.
	text, ok := strings.CutPrefix(info, "txt:")
	if !ok {
		return fmt.Errorf("CLIENT INFO under RESP3: got %q, want a verbatim string (txt:...) as Redis replies", info)
	}
	fields := map[string]string{}
	for _, kv := range strings.Fields(text) {
		k, v, _ := strings.Cut(kv, "=")
		fields[k] = v
	}
	for _, k := range []string{"id", "addr", "laddr", "fd", "name", "age", "idle", "flags", "db", "qbuf", "qbuf-free", "obl", "oll", "omem", "tot-mem", "cmd", "user", "resp", "redir"} {
		if _, ok := fields[k]; !ok {
			return fmt.Errorf("CLIENT INFO lacks Redis's field %q: %q", k, info)
		}
	}
	return eq("CLIENT INFO resp", fields["resp"], "3")
}

// rueidisCache is rueidis's DoCache: on a miss it sends CLIENT CACHING YES,
// MULTI, PTTL key, the command, EXEC; the server must then push an
// invalidation when the key changes.
func rueidisCache(e *env) error {
	ctx, cancel := ctx10()
	defer cancel()
	c, err := newRueidis(e)
	if err != nil {
		return err
	}
	defer c.Close()
	other, err := newRueidis(e)
	if err != nil {
		return err
	}
	defer other.Close()
	llen := func() (int64, bool, error) {
		r := c.DoCache(ctx, c.B().Llen().Key("q").Cache(), time.Minute)
		n, err := r.AsInt64()
		return n, r.IsCacheHit(), err
	}
	if n, _, err := llen(); err != nil || n != 0 {
		return fmt.Errorf("DoCache LLEN: got %d, %v; want 0", n, err)
	}
	n, hit, err := llen()
	if err := first(noErr("DoCache LLEN", err), eq("second DoCache LLEN is a cache hit", hit, true), eq("cached LLEN", n, int64(0))); err != nil {
		return err
	}
	if err := other.Do(ctx, ready(other, "q", "job")).Error(); err != nil {
		return noErr("add from another client", err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		n, hit, err := llen()
		if err != nil {
			return noErr("DoCache LLEN after the add", err)
		}
		if n == 1 {
			return eq("the read after the invalidation is a miss", hit, false)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("DoCache LLEN still %d (cache hit %v) 3 s after another client added a job: no invalidation", n, hit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func rueidisReconnect(e *env) error {
	ctx, cancel := ctx10()
	defer cancel()
	c, err := newRueidisNoCache(e)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Do(ctx, ready(c, "q", "job")).Error(); err != nil {
		return noErr("add", err)
	}
	if err := e.restart(); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	n, err := c.Do(ctx, c.B().Llen().Key("q").Build()).AsInt64()
	return first(noErr("LLEN after the restart", err), eq("LLEN after the restart", n, int64(1)))
}

// newRueidisCluster connects to a cluster with rueidis's defaults (the
// client-side cache on, CLIENT TRACKING in every connection's handshake):
// rueidis.NewClient asks the InitAddress nodes for the slot map and, finding
// a cluster, returns its cluster client. Its own retries are for commands
// marked retryable (read-only ones, or ToRetryable): on MOVED it follows,
// on CLUSTERDOWN, TRYAGAIN, LOADING or a broken connection it refreshes
// the slot map and retries with its default backoff (RetryDelay).
func newRueidisCluster(addrs []string) (rueidis.Client, error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs})
	if err != nil {
		return nil, fmt.Errorf("rueidis.NewClient: %w", err)
	}
	return c, nil
}

func rueidisCluster(e *env) error {
	ctx, cancel := ctx10()
	defer cancel()
	seed, err := follower(e)
	if err != nil {
		return err
	}
	c, err := newRueidisCluster([]string{seed})
	if err != nil {
		return err
	}
	defer c.Close()
	if n := len(c.Nodes()); n != clusterSize*clusterGroups {
		return fmt.Errorf("the client knows %d nodes, want %d (is it a cluster client?)", n, clusterSize*clusterGroups)
	}
	arb := func(cmd, key string, args ...string) rueidis.Completed {
		return c.B().Arbitrary(cmd).Keys(key).Args(args...).Build()
	}
	id, err := c.Do(ctx, arb("DELAY.ADD", "orders", "0", "hello", "ID", "order-1", "ACKTIMEOUT", "30000")).ToString()
	if err := first(noErr("DELAY.ADD through "+seed, err), eq("DELAY.ADD", id, "order-1")); err != nil {
		return err
	}
	job, err := c.Do(ctx, arb("DELAY.GET", "orders", "order-1")).AsStrMap()
	if err := first(noErr("DELAY.GET", err), eq("DELAY.GET state", job["state"], "ready")); err != nil {
		return err
	}
	popped, err := c.Do(ctx, c.B().Arbitrary("DELAY.POP").Keys("orders").Args("1").Blocking()).AsStrSlice()
	if err := first(noErr("DELAY.POP", err), eq("DELAY.POP", popped, []string{"orders", "order-1", "hello"})); err != nil {
		return err
	}
	n, err := c.Do(ctx, arb("DELAY.ACK", "orders", "order-1")).AsInt64()
	if err := first(noErr("DELAY.ACK", err), eq("DELAY.ACK", n, int64(1))); err != nil {
		return err
	}
	// DoMulti groups the commands by slot and node: 20 queues are 20 slots.
	var adds rueidis.Commands
	for i := 0; i < 20; i++ {
		adds = append(adds, arb("DELAY.ADD", fmt.Sprint("queue-", i), "0", "job"))
	}
	for i, r := range c.DoMulti(ctx, adds...) {
		if err := r.Error(); err != nil {
			return fmt.Errorf("DoMulti add %d: %w", i, err)
		}
	}
	for i := 0; i < 20; i++ {
		n, err := c.Do(ctx, c.B().Llen().Key(fmt.Sprint("queue-", i)).Build()).AsInt64()
		if err := first(noErr("LLEN", err), eq(fmt.Sprint("LLEN queue-", i), n, int64(1))); err != nil {
			return err
		}
	}
	// A cached read goes through the cluster client's cache too.
	n, err = c.DoCache(ctx, c.B().Llen().Key("queue-0").Cache(), time.Minute).AsInt64()
	return first(noErr("cached LLEN", err), eq("cached LLEN", n, int64(1)))
}

// rueidisJobs is the failover workload's calls through rueidis's cluster
// client. DELAY.ADD with an ID, and DELAY.ACK, are idempotent, so they are
// marked ToRetryable, as rueidis asks of a write it may retry; DELAY.POP is
// not (a retried pop may reserve a second job) and is Blocking, so that it
// waits on a connection of its own and not in the shared pipeline.
type rueidisJobs struct{ c rueidis.Client }

func (j rueidisJobs) add(ctx context.Context, queue, id string, delayMs int) error {
	err := j.c.Do(ctx, j.c.B().Arbitrary("DELAY.ADD").Keys(queue).
		Args(fmt.Sprint(delayMs), id, "ID", id, "ACKTIMEOUT", "5000").Build().ToRetryable()).Error()
	if rueidis.IsRedisNil(err) {
		return nil // an earlier try of this add went through
	}
	return err
}

func (j rueidisJobs) pop(ctx context.Context, queue string) (string, error) {
	job, err := j.c.Do(ctx, j.c.B().Arbitrary("DELAY.POP").Keys(queue).Args("1").Blocking()).AsStrSlice()
	switch {
	case rueidis.IsRedisNil(err):
		return "", nil
	case err != nil:
		return "", err
	case len(job) != 3:
		return "", fmt.Errorf("DELAY.POP: got %q, want [key id payload]", job)
	}
	return job[1], nil
}

func (j rueidisJobs) ack(ctx context.Context, queue, id string) error {
	return j.c.Do(ctx, j.c.B().Arbitrary("DELAY.ACK").Keys(queue).Args(id).Build().ToRetryable()).Error()
}

func rueidisFailover(e *env) error {
	c, err := newRueidisCluster(e.addrs)
	if err != nil {
		return err
	}
	defer c.Close()
	return runFailover(e, rueidisJobs{c})
}
