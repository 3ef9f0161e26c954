package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// A system is one way to run delayed jobs: the server it needs, how a
// producer adds a job due at a unix millisecond, and how its workers take
// jobs. Every producer and worker owns one connection for the whole case
// (clients reuse connections, as real ones do), and every worker does the
// same work per job: take it, parse its due time from the payload, finish
// it the system's way (ACK, or nothing for list pops), and read the clock.
type system struct {
	name   string // file-name form: delayd-ack
	label  string // table form
	server string // "delayd" or "redis"
	node   bool   // BullMQ, delayd-node: the whole case runs in a node script
	script string // node: the script, relative to bench/rivals (default: bullmq/race.js)
	// newProducer opens one producer's connection.
	newProducer func(addr string) (producer, error)
	// startWorkers starts n workers (and whatever mover the system needs);
	// stop returns once they have all stopped.
	startWorkers func(addr string, n int, rec *recorder) (stop func(), err error)
}

type producer interface {
	add(ctx context.Context, id int, dueMs int64) error
	io.Closer
}

const (
	queue    = "rivals"
	zsetKey  = "rivals:delayed"
	readyKey = "rivals:ready"
	// popTimeout bounds each blocking pop, so a worker notices the end of
	// a case within a second; a pop that times out costs nothing measured.
	popTimeout = time.Second
	// ackTimeout is long enough that no reservation expires during a case:
	// a redelivery would be a harness artefact, not the system's speed.
	ackTimeout = "30000"
)

// payload carries the job's id and due time; it is also the ZSET member,
// so it must be unique.
func payload(id int, dueMs int64) string {
	return strconv.Itoa(id) + ":" + strconv.FormatInt(dueMs, 10)
}

func parsePayload(p string) (id int, dueMs int64, ok bool) {
	a, b, found := strings.Cut(p, ":")
	if !found {
		return 0, 0, false
	}
	i, err1 := strconv.Atoi(a)
	d, err2 := strconv.ParseInt(b, 10, 64)
	return i, d, err1 == nil && err2 == nil
}

// conn is one client connection, as each producer and worker holds.
func conn(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:     addr,
		PoolSize: 1,
		// DELAY.POP goes through Do, which go-redis bounds by ReadTimeout
		// (BLPOP gets timeout+10 s on its own); the pop itself waits 1 s.
		ReadTimeout: popTimeout + 10*time.Second,
	})
}

type redisProducer struct {
	c  *redis.Client
	fn func(ctx context.Context, c *redis.Client, id int, dueMs int64) error
}

func (p *redisProducer) add(ctx context.Context, id int, dueMs int64) error {
	return p.fn(ctx, p.c, id, dueMs)
}
func (p *redisProducer) Close() error { return p.c.Close() }

func redisProducerOf(fn func(ctx context.Context, c *redis.Client, id int, dueMs int64) error) func(string) (producer, error) {
	return func(addr string) (producer, error) {
		c := conn(addr)
		if err := c.Ping(context.Background()).Err(); err != nil {
			c.Close()
			return nil, err
		}
		return &redisProducer{c: c, fn: fn}, nil
	}
}

// workerLoop runs n workers, each with its own connection, calling take
// until stop; take returns the finished job's payload ("" for a pop that
// timed out).
func workerLoop(addr string, n int, rec *recorder, take func(ctx context.Context, c *redis.Client) (string, error)) (func(), error) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		c := conn(addr)
		if err := c.Ping(ctx).Err(); err != nil {
			cancel()
			wg.Wait()
			return nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			for ctx.Err() == nil {
				p, err := take(ctx, c)
				if err != nil {
					if ctx.Err() == nil {
						rec.fail(err)
						time.Sleep(10 * time.Millisecond)
					}
					continue
				}
				if p != "" {
					rec.done(p)
				}
			}
		}()
	}
	return func() { cancel(); wg.Wait() }, nil
}

func blpop(key string) func(ctx context.Context, c *redis.Client) (string, error) {
	return func(ctx context.Context, c *redis.Client) (string, error) {
		v, err := c.BLPop(ctx, popTimeout, key).Result()
		if err == redis.Nil {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		return v[1], nil
	}
}

// moverScript is the hand-rolled scheduler many teams write: due members
// of the sorted set (score: due unix ms, by the server's own clock) move to
// the tail of a list in one atomic step, a bounded batch at a time.
var moverScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
if #due == 0 then return 0 end
redis.call('ZREM', KEYS[1], unpack(due))
redis.call('RPUSH', KEYS[2], unpack(due))
return #due
`)

// moverBatch bounds one script run (and Lua's unpack); a full batch runs
// the script again at once instead of waiting for the next tick.
const moverBatch = 1000

func startMover(addr string, every time.Duration, rec *recorder) (func(), error) {
	c := conn(addr)
	ctx, cancel := context.WithCancel(context.Background())
	if err := moverScript.Load(ctx, c).Err(); err != nil {
		cancel()
		c.Close()
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer c.Close()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			for {
				n, err := moverScript.Run(ctx, c, []string{zsetKey, readyKey}, moverBatch).Int()
				if err != nil {
					if ctx.Err() == nil {
						rec.fail(err)
					}
					break
				}
				if n < moverBatch {
					break
				}
			}
		}
	}()
	return func() { cancel(); <-done }, nil
}

func asynqSystem(name, label string, interval time.Duration) system {
	return system{
		name: name, label: label, server: "redis",
		newProducer: func(addr string) (producer, error) {
			return &asynqProducer{c: asynq.NewClient(asynq.RedisClientOpt{Addr: addr})}, nil
		},
		startWorkers: func(addr string, n int, rec *recorder) (func(), error) {
			cfg := asynq.Config{Concurrency: n, LogLevel: asynq.ErrorLevel, Logger: quietLogger{}}
			if interval > 0 {
				cfg.TaskCheckInterval = interval
				cfg.DelayedTaskCheckInterval = interval
			}
			srv := asynq.NewServer(asynq.RedisClientOpt{Addr: addr}, cfg)
			// asynq has no hook after it marks a task done, so completion is
			// read when the handler returns: one round trip before its ack.
			err := srv.Start(asynq.HandlerFunc(func(_ context.Context, t *asynq.Task) error {
				rec.done(string(t.Payload()))
				return nil
			}))
			if err != nil {
				return nil, err
			}
			return srv.Shutdown, nil
		},
	}
}

type asynqProducer struct{ c *asynq.Client }

func (p *asynqProducer) add(ctx context.Context, id int, dueMs int64) error {
	_, err := p.c.EnqueueContext(ctx, asynq.NewTask("race", []byte(payload(id, dueMs))), asynq.ProcessAt(time.UnixMilli(dueMs)))
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		// The task's id is a fresh UUID: a conflict means go-redis retried
		// an enqueue whose reply was late, and the first attempt landed.
		return nil
	}
	return err
}
func (p *asynqProducer) Close() error { return p.c.Close() }

type quietLogger struct{}

func (quietLogger) Debug(...interface{}) {}
func (quietLogger) Info(...interface{})  {}
func (quietLogger) Warn(...interface{})  {}
func (quietLogger) Error(a ...interface{}) {
	log.Print(append([]interface{}{"asynq: "}, a...)...)
}
func (quietLogger) Fatal(a ...interface{}) { log.Fatal(a...) }

// delaydAckProducer adds jobs that are reserved when popped: the workers
// must ACK them.
var delaydAckProducer = redisProducerOf(func(ctx context.Context, c *redis.Client, id int, dueMs int64) error {
	return c.Do(ctx, "DELAY.ADDAT", queue, dueMs, payload(id, dueMs), "ACKTIMEOUT", ackTimeout).Err()
})

// mpopCount is the delayd-mpop worker's batch (-mpop-count).
var mpopCount = 16

var allSystems = []system{
	{
		name: "delayd-ack", label: "delayd, DELAY.POP then ACK, one job at a time", server: "delayd",
		newProducer: delaydAckProducer,
		startWorkers: func(addr string, n int, rec *recorder) (func(), error) {
			secs := strconv.FormatFloat(popTimeout.Seconds(), 'f', -1, 64)
			return workerLoop(addr, n, rec, func(ctx context.Context, c *redis.Client) (string, error) {
				v, err := c.Do(ctx, "DELAY.POP", queue, secs).Slice()
				if err == redis.Nil {
					return "", nil
				}
				if err != nil {
					return "", err
				}
				if len(v) != 3 {
					return "", fmt.Errorf("DELAY.POP replied %v", v)
				}
				id, _ := v[1].(string)
				p, _ := v[2].(string)
				if err := c.Do(ctx, "DELAY.ACK", queue, id).Err(); err != nil {
					return "", err
				}
				return p, nil
			})
		},
	},
	{
		name: "delayd-pipe", label: "delayd, DELAY.POP + ACK sent with the next POP", server: "delayd",
		newProducer: delaydAckProducer,
		startWorkers: func(addr string, n int, rec *recorder) (func(), error) {
			return batchWorkers(addr, n, 1, rec)
		},
	},
	{
		name: "delayd-mpop", label: "delayd, DELAY.MPOP COUNT {mpop} + one ACK of the batch sent with the next MPOP", server: "delayd",
		newProducer: delaydAckProducer,
		startWorkers: func(addr string, n int, rec *recorder) (func(), error) {
			return batchWorkers(addr, n, mpopCount, rec)
		},
	},
	{
		name: "delayd-blpop", label: "delayd, BLPOP (no ack)", server: "delayd",
		newProducer: redisProducerOf(func(ctx context.Context, c *redis.Client, id int, dueMs int64) error {
			return c.Do(ctx, "DELAY.ADDAT", queue, dueMs, payload(id, dueMs)).Err()
		}),
		startWorkers: func(addr string, n int, rec *recorder) (func(), error) {
			return workerLoop(addr, n, rec, blpop(queue))
		},
	},
	{
		name: "redis-zset", label: "Redis ZSET + Lua mover (1 ms) + BLPOP", server: "redis",
		newProducer: zsetProducer,
		startWorkers: withMover(func(addr string, n int, rec *recorder) (func(), error) {
			return workerLoop(addr, n, rec, blpop(readyKey))
		}),
	},
	{
		name: "redis-zset-blmpop", label: "Redis ZSET + Lua mover (1 ms) + BLMPOP COUNT 16", server: "redis",
		newProducer: zsetProducer,
		startWorkers: withMover(func(addr string, n int, rec *recorder) (func(), error) {
			return batchLoop(addr, n, rec, blmpop(readyKey))
		}),
	},
	{
		name: "delayd-lib", label: "delayd, the worker library (package worker), default settings", server: "delayd",
		newProducer:  delaydAckProducer,
		startWorkers: libraryWorkers(0, false),
	},
	{
		name: "delayd-lib-batch", label: "delayd, the worker library, HandleBatch, default settings (64 a batch)", server: "delayd",
		newProducer:  delaydAckProducer,
		startWorkers: libraryWorkers(0, true),
	},
	{
		name: "delayd-lib-batch16", label: "delayd, the worker library, HandleBatch of up to 16", server: "delayd",
		newProducer:  delaydAckProducer,
		startWorkers: libraryWorkers(16, true),
	},
	asynqSystem("asynq", "asynq {asynq} defaults", 0),
	asynqSystem("asynq-10ms", "asynq, 10 ms check intervals", 10*time.Millisecond),
	{name: "bullmq", label: "BullMQ {bullmq} delayed jobs", server: "redis", node: true},
	{name: "delayd-node", label: "delayd's Node library (clients/node), Worker of concurrency 8", server: "delayd", node: true, script: "nodeworker/race.js"},
}

// recorder collects completions from every worker of one case.
type recorder struct {
	n      int
	mu     sync.Mutex
	recs   []completion
	seen   []uint32
	unique atomic.Int64
	all    chan struct{} // closed when every job completed at least once
	errs   atomic.Int64
	last   atomic.Int64 // unix µs of the latest completion: the drain's sign of progress
	first  atomic.Value // first error, for the report
}

type completion struct {
	id    int32
	dueMs int64
	done  int64 // unix µs, read right after the job was finished
}

func newRecorder(n int) *recorder {
	return &recorder{n: n, recs: make([]completion, 0, n), seen: make([]uint32, n), all: make(chan struct{})}
}

// done notes a finished job. The clock is read first, so the harness's
// own bookkeeping is not counted as the system's lateness.
func (r *recorder) done(p string) {
	now := time.Now().UnixMicro()
	id, due, ok := parsePayload(p)
	if !ok || id < 0 || id >= r.n {
		r.fail(fmt.Errorf("bad payload %q", p))
		return
	}
	r.note(id, due, now)
}

func (r *recorder) note(id int, due, now int64) {
	r.mu.Lock()
	r.recs = append(r.recs, completion{int32(id), due, now})
	r.mu.Unlock()
	r.last.Store(now)
	if atomic.AddUint32(&r.seen[id], 1) == 1 && r.unique.Add(1) == int64(r.n) {
		close(r.all)
	}
}

func (r *recorder) fail(err error) {
	if r.errs.Add(1) == 1 {
		r.first.Store(err.Error())
	}
}

// zsetProducer adds a job to the Redis rival's sorted set, scored by its
// due time.
var zsetProducer = redisProducerOf(func(ctx context.Context, c *redis.Client, id int, dueMs int64) error {
	return c.ZAdd(ctx, zsetKey, redis.Z{Score: float64(dueMs), Member: payload(id, dueMs)}).Err()
})

// withMover starts the Redis rival's Lua mover (every 1 ms, due members to
// the ready list) beside its workers, and stops both.
func withMover(workers func(addr string, n int, rec *recorder) (func(), error)) func(addr string, n int, rec *recorder) (func(), error) {
	return func(addr string, n int, rec *recorder) (func(), error) {
		stopMover, err := startMover(addr, time.Millisecond, rec)
		if err != nil {
			return nil, err
		}
		stopWorkers, err := workers(addr, n, rec)
		if err != nil {
			stopMover()
			return nil, err
		}
		return func() { stopWorkers(); stopMover() }, nil
	}
}
