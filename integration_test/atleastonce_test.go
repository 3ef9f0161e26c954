package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SPEC "Commands of the delay queue" (ACKTIMEOUT, RETRY, DEADLETTER,
// DELAY.ACK, DELAY.NACK, DELAY.TOUCH) and "Redis list commands on ready
// lists": at-least-once delivery and stock list workers.

// ---- helpers (dur*) ----

// durNewClient is a one-connection client that the caller closes (for
// workers that crash and reconnect many times).
func durNewClient(s *server) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:                  s.Addr(),
		Protocol:              2,
		PoolSize:              1,
		MaxRetries:            -1,
		DialTimeout:           2 * time.Second,
		ReadTimeout:           10 * time.Second,
		WriteTimeout:          5 * time.Second,
		ContextTimeoutEnabled: true,
	})
}

// durPop sends DELAY.POP key timeout and returns [key, id, payload] and the
// client time the reply came.
func durPop(t testing.TB, c *redis.Client, key, timeout string) ([]any, time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	v, err := c.Do(ctx, "DELAY.POP", key, timeout).Result()
	at := time.Now()
	if err != nil {
		t.Fatalf("DELAY.POP %s %s: %v", key, timeout, err)
	}
	r, ok := v.([]any)
	if !ok || len(r) != 3 {
		t.Fatalf("DELAY.POP %s %s: want [key, id, payload], got %s", key, timeout, showValue(v))
	}
	return r, at
}

// durMs reads an integer field of a DELAY.GET reply.
func durMs(t testing.TB, m map[string]any, f string) int64 {
	t.Helper()
	v, ok := m[f]
	if !ok {
		t.Fatalf("DELAY.GET: no field %q (fields %v)", f, sortedKeys(m))
	}
	return asInt(t, f, v)
}

// durWaitGone polls DELAY.GET key id until it is null.
func durWaitGone(t testing.TB, c *redis.Client, key, id string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		_, err := c.Do(ctx, "DELAY.GET", key, id).Result()
		cancel()
		if errors.Is(err, redis.Nil) {
			return
		}
		if err != nil {
			t.Fatalf("DELAY.GET %s %s: %v", key, id, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("DELAY.GET %s %s: the job is still there after %v", key, id, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ---- tests ----

// TestAtLeastOnceCrashedWorkerRedelivers: a worker pops with an ack timeout
// and its connection goes away without an ACK; another worker gets the same
// job once the timeout has passed, not before.
func TestAtLeastOnceCrashedWorkerRedelivers(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()
	id := add(t, c, "q", 0, "p", "ACKTIMEOUT", 300)

	w1 := durNewClient(s)
	sent := time.Now()
	r, _ := durPop(t, w1, "q", "1")
	if r[1] != id || r[2] != "p" {
		t.Fatalf("first worker: got %s, want [q, %s, p]", showValue(r), id)
	}
	_ = w1.Close() // the worker dies without DELAY.ACK

	w2 := s.Client()
	r, at := durPop(t, w2, "q", "5")
	if r[1] != id || r[2] != "p" {
		t.Fatalf("second worker: got %s, want [q, %s, p]", showValue(r), id)
	}
	// due times and deadlines are whole unix milliseconds: compare in ms
	if el := at.Sub(sent); at.UnixMilli() < sent.UnixMilli()+300 {
		t.Errorf("redelivered %v after the first pop was sent; the ack timeout is 300 ms", el)
	} else if el > 1300*time.Millisecond {
		t.Errorf("redelivered %v after the first pop; want about 300 ms", el)
	}
	m := job(t, c, "q", id)
	if d := durMs(t, m, "deliveries"); d != 2 {
		t.Errorf("DELAY.GET after the redelivery: deliveries %d, want 2", d)
	}
	if m["state"] != "reserved" {
		t.Errorf("DELAY.GET after the redelivery: state %v, want reserved", m["state"])
	}
	expect(t, w2, int64(1), "DELAY.ACK", "q", id)
	expectStats(t, c, "q", 0, 0, 0)
}

// TestAtLeastOnceAckNackTouch covers DELAY.ACK, DELAY.NACK, DELAY.TOUCH and
// RETRY/DEADLETTER.
func TestAtLeastOnceAckNackTouch(t *testing.T) {
	t.Parallel()

	t.Run("ack", func(t *testing.T) {
		t.Parallel()
		s := startServer(t)
		c := s.Client()
		id := add(t, c, "q", 0, "p", "ACKTIMEOUT", 5000)
		expect(t, c, int64(0), "DELAY.ACK", "q", id) // ready, not reserved
		expect(t, c, []any{"q", id, "p"}, "DELAY.POP", "q", "1")
		chain(t, c,
			cmd(int64(1), "DELAY.ACK", "q", id),
			cmd(int64(0), "DELAY.ACK", "q", id),
			cmd(nil, "DELAY.GET", "q", id),
			cmd(int64(0), "DELAY.ACK", "q", "no-such-id"),
			cmd(int64(0), "DELAY.ACK", "other", id),
		)
		expectStats(t, c, "q", 0, 0, 0)
		a := add(t, c, "q", 0, "a", "ACKTIMEOUT", 5000)
		b := add(t, c, "q", 0, "b", "ACKTIMEOUT", 5000)
		expect(t, c, []any{"q", a, "a"}, "DELAY.POP", "q", "1")
		expect(t, c, []any{"q", b, "b"}, "DELAY.POP", "q", "1")
		expect(t, c, int64(2), "DELAY.ACK", "q", a, "nope", b)
		expect(t, c, int64(0), "DBSIZE")
		// a job without an ack timeout is gone after the pop: nothing to ack
		z := add(t, c, "q", 0, "z")
		expect(t, c, []any{"q", z, "z"}, "DELAY.POP", "q", "1")
		expect(t, c, int64(0), "DELAY.ACK", "q", z)
		expect(t, c, nil, "DELAY.GET", "q", z)
	})

	t.Run("nack", func(t *testing.T) {
		t.Parallel()
		s := startServer(t)
		c := s.Client()
		id := add(t, c, "q", 0, "p", "ACKTIMEOUT", 5000)
		expect(t, c, int64(0), "DELAY.NACK", "q", id) // not reserved
		expect(t, c, []any{"q", id, "p"}, "DELAY.POP", "q", "1")
		before := durNowMs()
		expect(t, c, int64(1), "DELAY.NACK", "q", id, 200)
		after := durNowMs()
		expect(t, c, int64(0), "DELAY.NACK", "q", id) // no longer reserved
		m := job(t, c, "q", id)
		if m["state"] != "delayed" {
			t.Errorf("after DELAY.NACK q id 200: state %v, want delayed", m["state"])
		}
		if due := durMs(t, m, "due"); due < before+200 || due > after+201 {
			t.Errorf("after DELAY.NACK q id 200: due %d, want now+200 within [%d, %d]", due, before+200, after+201)
		}
		if _, ok := m["ack_deadline"]; ok {
			t.Errorf("after DELAY.NACK: a delayed job shows ack_deadline")
		}
		expectStats(t, c, "q", 1, 0, 0)
		r, at := durPop(t, c, "q", "3")
		if r[1] != id {
			t.Fatalf("pop after the NACK delay: %s, want id %s", showValue(r), id)
		}
		if at.UnixMilli() < before+200 {
			t.Errorf("NACKed job handed out %d ms before its new due time", before+200-at.UnixMilli())
		}
		if d := durMs(t, job(t, c, "q", id), "deliveries"); d != 2 {
			t.Errorf("after NACK and a second pop: deliveries %d, want 2", d)
		}
		// NACK without a delay: ready now, at the tail
		other := add(t, c, "q", 0, "other", "ACKTIMEOUT", 5000)
		expect(t, c, int64(1), "DELAY.NACK", "q", id)
		if st := job(t, c, "q", id)["state"]; st != "ready" {
			t.Errorf("after DELAY.NACK q id: state %v, want ready", st)
		}
		expectStats(t, c, "q", 0, 2, 0)
		expect(t, c, []any{"q", other, "other"}, "DELAY.POP", "q", "1")
		expect(t, c, []any{"q", id, "p"}, "DELAY.POP", "q", "1")
		expect(t, c, int64(0), "DELAY.NACK", "q", "nope")
		expect(t, c, anyErr, "DELAY.NACK", "q", id, -5)
	})

	t.Run("touch", func(t *testing.T) {
		t.Parallel()
		s := startServer(t)
		c := s.Client()
		id := add(t, c, "q", 0, "p", "ACKTIMEOUT", 400)
		expect(t, c, int64(0), "DELAY.TOUCH", "q", id) // ready, not reserved
		sent := durNowMs()
		expect(t, c, []any{"q", id, "p"}, "DELAY.POP", "q", "1")
		time.Sleep(250 * time.Millisecond)
		before := durNowMs()
		expect(t, c, int64(1), "DELAY.TOUCH", "q", id)
		after := durNowMs()
		if dl := durMs(t, job(t, c, "q", id), "ack_deadline"); dl < before+400 || dl > after+401 {
			t.Errorf("after DELAY.TOUCH: ack_deadline %d, want now+400 within [%d, %d]", dl, before+400, after+401)
		}
		// past the first deadline (sent+400) it is still reserved
		time.Sleep(time.Duration(sent+550-durNowMs()) * time.Millisecond)
		if durNowMs() < before+390 {
			expectStats(t, c, "q", 0, 0, 1)
		}
		r, at := durPop(t, c, "q", "3")
		if r[1] != id {
			t.Fatalf("pop after the touched deadline: %s, want id %s", showValue(r), id)
		}
		if at.UnixMilli() < before+400 {
			t.Errorf("touched job redelivered %d ms before the new deadline", before+400-at.UnixMilli())
		}
		expect(t, c, int64(1), "DELAY.ACK", "q", id)
		expect(t, c, int64(0), "DELAY.TOUCH", "q", id)
		expect(t, c, int64(0), "DELAY.TOUCH", "q", "nope")
	})

	t.Run("retry with dead letter", func(t *testing.T) {
		t.Parallel()
		s := startServer(t)
		c := s.Client()
		id := add(t, c, "q", 0, "p", "ID", "j1", "ACKTIMEOUT", 200, "RETRY", 1, "DEADLETTER", "dlq")
		if id != "j1" {
			t.Fatalf("DELAY.ADD ... ID j1: replied %q", id)
		}
		expect(t, c, []any{"q", "j1", "p"}, "DELAY.POP", "q", "1") // delivery 1
		r, _ := durPop(t, c, "q", "3")                             // delivery 2 after it expired
		if r[1] != "j1" {
			t.Fatalf("second delivery: %s", showValue(r))
		}
		if d := durMs(t, job(t, c, "q", "j1"), "deliveries"); d != 2 {
			t.Errorf("deliveries %d, want 2", d)
		}
		// no third delivery: after the second expiry it moves to dlq
		expect(t, c, nil, "DELAY.POP", "q", "0.6")
		expect(t, c, nil, "DELAY.GET", "q", "j1")
		expectStats(t, c, "q", 0, 0, 0)
		m := job(t, c, "dlq", "j1")
		if m["state"] != "ready" || m["payload"] != "p" || m["queue"] != "dlq" {
			t.Errorf("dead-lettered job: %v, want state ready, payload p, queue dlq", m)
		}
		expect(t, c, []any{"dlq", "j1", "p"}, "DELAY.POP", "dlq", "1")
	})

	t.Run("retry without dead letter drops", func(t *testing.T) {
		t.Parallel()
		s := startServer(t)
		c := s.Client()
		id := add(t, c, "q", 0, "p", "ACKTIMEOUT", 200, "RETRY", 1)
		expect(t, c, []any{"q", id, "p"}, "DELAY.POP", "q", "1")
		r, _ := durPop(t, c, "q", "3")
		if r[1] != id {
			t.Fatalf("second delivery: %s", showValue(r))
		}
		expect(t, c, nil, "DELAY.POP", "q", "0.6")
		durWaitGone(t, c, "q", id, 2*time.Second)
		expectStats(t, c, "q", 0, 0, 0)
		expect(t, c, int64(0), "DBSIZE")
	})

	t.Run("retry 0 and a nack dead-letters at once", func(t *testing.T) {
		t.Parallel()
		s := startServer(t)
		c := s.Client()
		id := add(t, c, "q", 0, "p", "ACKTIMEOUT", 60000, "RETRY", 0, "DEADLETTER", "dlq")
		expect(t, c, []any{"q", id, "p"}, "DELAY.POP", "q", "1")
		expect(t, c, int64(1), "DELAY.NACK", "q", id)
		expect(t, c, nil, "DELAY.GET", "q", id)
		expectStats(t, c, "q", 0, 0, 0)
		expect(t, c, []any{"dlq", id, "p"}, "DELAY.POP", "dlq", "1")
	})

	t.Run("nack with retries left redelivers", func(t *testing.T) {
		t.Parallel()
		s := startServer(t)
		c := s.Client()
		// RETRY 1: two deliveries; a NACK ends the first, it is not one
		id := add(t, c, "q", 0, "p", "ACKTIMEOUT", 60000, "RETRY", 1)
		expect(t, c, []any{"q", id, "p"}, "DELAY.POP", "q", "1")
		expect(t, c, int64(1), "DELAY.NACK", "q", id)
		expect(t, c, []any{"q", id, "p"}, "DELAY.POP", "q", "1")
		expect(t, c, int64(1), "DELAY.NACK", "q", id)
		expect(t, c, nil, "DELAY.POP", "q", "0.2")
		expect(t, c, nil, "DELAY.GET", "q", id)
	})

	t.Run("dead letter id taken", func(t *testing.T) {
		t.Parallel()
		s := startServer(t)
		c := s.Client()
		add(t, c, "dlq", 600000, "occupant", "ID", "j2")
		add(t, c, "q", 0, "p", "ID", "j2", "ACKTIMEOUT", 150, "RETRY", 0, "DEADLETTER", "dlq")
		expect(t, c, []any{"q", "j2", "p"}, "DELAY.POP", "q", "1")
		r, _ := durPop(t, c, "dlq", "3")
		if r[1] == "j2" || r[2] != "p" {
			t.Errorf("dead letter into a queue where its id is taken: got %s, want a new server id with payload p", showValue(r))
		}
		if m := job(t, c, "dlq", "j2"); m["payload"] != "occupant" {
			t.Errorf("the job already holding the id in dlq changed: %v", m)
		}
	})
}

// TestAtLeastOnceReservedInGetAndStats: DELAY.GET of a reserved job shows
// ack_deadline; DELAY.STATS and INFO queues count reserved jobs.
func TestAtLeastOnceReservedInGetAndStats(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()
	add(t, c, "q", 60000, "later")
	r1 := add(t, c, "q", 0, "r1", "ACKTIMEOUT", 10000)
	r2 := add(t, c, "q", 0, "r2", "ACKTIMEOUT", 10000)
	before := durNowMs()
	expect(t, c, []any{"q", r1, "r1"}, "DELAY.POP", "q", "1")
	after := durNowMs()
	expectStats(t, c, "q", 1, 1, 1)
	m := job(t, c, "q", r1)
	if m["state"] != "reserved" {
		t.Errorf("popped job: state %v, want reserved", m["state"])
	}
	if dl := durMs(t, m, "ack_deadline"); dl < before+10000 || dl > after+10001 {
		t.Errorf("ack_deadline %d, want pop time + 10000 within [%d, %d]", dl, before+10000, after+10001)
	}
	if d := durMs(t, m, "deliveries"); d != 1 {
		t.Errorf("deliveries %d, want 1", d)
	}
	if _, ok := job(t, c, "q", r2)["ack_deadline"]; ok {
		t.Errorf("a ready job shows ack_deadline")
	}
	m3 := fields(t, "RESP3 DELAY.GET", do(t, s.Client3(), "DELAY.GET", "q", r1))
	if _, ok := m3["ack_deadline"]; !ok {
		t.Errorf("RESP3 DELAY.GET of a reserved job: no ack_deadline in %v", sortedKeys(m3))
	}
	if v, ok := s.info("queues", "reserved"); !ok || v != "1" {
		t.Errorf("INFO queues reserved = %q (reported %v), want 1", v, ok)
	}
	if v, ok := s.info("queues", "jobs"); !ok || v != "3" {
		t.Errorf("INFO queues jobs = %q (reported %v), want 3", v, ok)
	}
	expect(t, c, int64(1), "DELAY.ACK", "q", r1)
	expectStats(t, c, "q", 1, 1, 0)
}

// TestAtLeastOnceStockBLPOPWorker: go-redis BLPop and redis-cli BLPOP receive
// a delayed job on time with reply [key, payload].
func TestAtLeastOnceStockBLPOPWorker(t *testing.T) {
	t.Parallel()

	t.Run("go-redis", func(t *testing.T) {
		t.Parallel()
		s := startServer(t)
		c := s.Client()
		w := s.Client()
		type res struct {
			v   []string
			err error
			at  time.Time
		}
		ch := make(chan res, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			v, err := w.BLPop(ctx, 5*time.Second, "orders").Result()
			ch <- res{v, err, time.Now()}
		}()
		s.waitBlocked(t, 1)
		sent := time.Now()
		add(t, c, "orders", 300, "x")
		var r res
		select {
		case r = <-ch:
		case <-time.After(10 * time.Second):
			t.Fatal("BLPop gave no reply")
		}
		if r.err != nil {
			t.Fatalf("BLPop orders: %v", r.err)
		}
		if len(r.v) != 2 || r.v[0] != "orders" || r.v[1] != "x" {
			t.Fatalf("BLPop orders: %q, want [orders x]", r.v)
		}
		if el := r.at.Sub(sent); r.at.UnixMilli() < sent.UnixMilli()+300 || el > 1300*time.Millisecond {
			t.Errorf("BLPop got the 300 ms job after %v", el)
		}
		expectStats(t, c, "orders", 0, 0, 0)
	})

	t.Run("redis-cli", func(t *testing.T) {
		t.Parallel()
		bin := cliPath(t)
		s := startServer(t)
		c := s.Client()
		type res struct {
			out string
			err error
			at  time.Time
		}
		ch := make(chan res, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, bin, "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port()), "BLPOP", "orders", "5").Output()
			ch <- res{string(out), err, time.Now()}
		}()
		s.waitBlocked(t, 1)
		sent := time.Now()
		add(t, c, "orders", 300, "x")
		var r res
		select {
		case r = <-ch:
		case <-time.After(10 * time.Second):
			t.Fatal("redis-cli BLPOP gave no reply")
		}
		if r.err != nil {
			t.Fatalf("redis-cli BLPOP orders 5: %v (output %q)", r.err, r.out)
		}
		if r.out != "orders\nx\n" {
			t.Errorf("redis-cli BLPOP orders 5: output %q, want \"orders\\nx\\n\"", r.out)
		}
		if el := r.at.Sub(sent); r.at.UnixMilli() < sent.UnixMilli()+300 || el > 1500*time.Millisecond {
			t.Errorf("redis-cli BLPOP got the 300 ms job after %v", el)
		}
	})
}

// TestAtLeastOnceListCommands: the ready list answers the Redis list
// commands with Redis 7's reply shapes.
func TestAtLeastOnceListCommands(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()
	serverID := regexp.MustCompile(`^[0-9a-f]{16}$`)

	// RPUSH then DELAY.POP: the pushed payload with a server id
	expect(t, c, int64(1), "RPUSH", "P", "hello")
	r, _ := durPop(t, c, "P", "1")
	if r[0] != "P" || r[2] != "hello" || !serverID.MatchString(fmt.Sprint(r[1])) {
		t.Errorf("DELAY.POP after RPUSH: %s, want [P, <16 hex digits>, hello]", showValue(r))
	}
	expect(t, c, nil, "DELAY.GET", "P", r[1])

	chain(t, c,
		cmd(int64(2), "RPUSH", "L", "a", "b"),
		cmd(int64(3), "LPUSH", "L", "c"),
		cmd(int64(5), "LPUSH", "L", "d", "e"), // as Redis: e ends at the head
		cmd([]any{"e", "d", "c", "a", "b"}, "LRANGE", "L", 0, -1),
		cmd(int64(5), "LLEN", "L"),
		cmd([]any{"d", "c"}, "LRANGE", "L", 1, 2),
		cmd([]any{"a", "b"}, "LRANGE", "L", -2, -1),
		cmd([]any{}, "LRANGE", "L", 7, 10),
		cmd([]any{}, "LRANGE", "nope", 0, -1),
		cmd(int64(0), "LLEN", "nope"),
		cmd([]any{"L", anyReply{}, "e"}, "DELAY.POP", "L", "1"),
		cmd("d", "LPOP", "L"),
		cmd("b", "RPOP", "L"),
		cmd([]any{"c", "a"}, "LPOP", "L", 2),
		cmd(nil, "LPOP", "L"),
		cmd(nil, "LPOP", "L", 2),
		cmd(nil, "RPOP", "L"),
		cmd(nil, "RPOP", "L", 2),
		cmd(int64(3), "RPUSH", "L", "x", "y", "z"),
		cmd([]any{"z", "y"}, "RPOP", "L", 2),
		cmd([]any{"x"}, "LPOP", "L", 5),
		cmd(int64(0), "LLEN", "L"),
		cmd(int64(0), "EXISTS", "L"),
		cmd("none", "TYPE", "L"),
	)

	// delayed jobs are not in the ready list, but the queue exists
	add(t, c, "M", 600000, "hidden")
	chain(t, c,
		cmd(int64(0), "LLEN", "M"),
		cmd("list", "TYPE", "M"),
		cmd(int64(1), "EXISTS", "M"),
		cmd(int64(2), "RPUSH", "M", "1", "2"),
		cmd([]any{"1", "2"}, "LRANGE", "M", 0, -1),
		cmd(int64(2), "EXISTS", "M", "nope", "M"),
	)

	// a list pop removes a job whatever its ack timeout
	a := add(t, c, "A", 0, "acked-never", "ACKTIMEOUT", 200)
	expect(t, c, "acked-never", "LPOP", "A")
	expect(t, c, nil, "DELAY.GET", "A", a)
	expectStats(t, c, "A", 0, 0, 0)
	b := add(t, c, "A", 0, "b", "ACKTIMEOUT", 200)
	expect(t, c, []any{"A", "b"}, "BLPOP", "A", "1")
	expect(t, c, nil, "DELAY.GET", "A", b)
	add(t, c, "A", 0, "c", "ACKTIMEOUT", 200)
	expect(t, c, []any{"A", "c"}, "BRPOP", "A", "1")
	time.Sleep(300 * time.Millisecond)
	expectStats(t, c, "A", 0, 0, 0)
	expect(t, c, int64(0), "EXISTS", "A")

	// DEL removes jobs in every state and counts the queues that held one
	dd := add(t, c, "D1", 600000, "delayed")
	rr := add(t, c, "R1", 0, "ready")
	vv := add(t, c, "V1", 0, "reserved", "ACKTIMEOUT", 300)
	expect(t, c, []any{"V1", vv, "reserved"}, "DELAY.POP", "V1", "1")
	add(t, c, "X1", 600000, "x-delayed")
	add(t, c, "X1", 0, "x-ready")
	xv := add(t, c, "X1", 0, "x-reserved", "ACKTIMEOUT", 300)
	add(t, c, "X1", 0, "x-ready2")
	expect(t, c, "x-ready", "LPOP", "X1")
	expect(t, c, []any{"X1", xv, "x-reserved"}, "DELAY.POP", "X1", "1")
	expectStats(t, c, "X1", 1, 1, 1)
	chain(t, c,
		cmd("list", "TYPE", "V1"),
		cmd(int64(1), "EXISTS", "V1"),
		cmd(int64(4), "EXISTS", "D1", "R1", "V1", "X1"),
		cmd(int64(4), "DEL", "D1", "R1", "V1", "X1", "nope"),
		cmd(int64(0), "DEL", "D1"),
		cmd(int64(0), "EXISTS", "D1", "R1", "V1", "X1"),
		cmd("none", "TYPE", "V1"),
		cmd(nil, "DELAY.GET", "D1", dd),
		cmd(nil, "DELAY.GET", "R1", rr),
		cmd(nil, "DELAY.GET", "V1", vv),
		cmd(int64(0), "DELAY.ACK", "V1", vv),
		cmd(int64(0), "DELAY.ACK", "X1", xv),
	)
	// the ack deadlines of deleted reserved jobs bring nothing back
	time.Sleep(400 * time.Millisecond)
	for _, k := range []string{"D1", "R1", "V1", "X1"} {
		expectStats(t, c, k, 0, 0, 0)
	}
	expect(t, c, int64(1), "DBSIZE") // M
	expect(t, c, int64(1), "DEL", "M")
	expect(t, c, int64(0), "DBSIZE")
}

// TestAtLeastOnceMixedWaitersFIFO: BLPOP and DELAY.POP waiters on one queue
// are served oldest first.
func TestAtLeastOnceMixedWaitersFIFO(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.Client()
	const n = 6
	type res struct {
		v   any
		err error
	}
	for round, feed := range []string{"RPUSH", "DELAY.ADD"} {
		chans := make([]chan res, n)
		for i := 0; i < n; i++ {
			w := s.Client()
			ch := make(chan res, 1)
			chans[i] = ch
			cmdName := "BLPOP"
			if i%2 == 1 {
				cmdName = "DELAY.POP"
			}
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				v, err := w.Do(ctx, cmdName, "q", "8").Result()
				ch <- res{v, err}
			}()
			s.waitBlocked(t, i+1)
		}
		if feed == "RPUSH" {
			args := []any{"RPUSH", "q"}
			for i := 0; i < n; i++ {
				args = append(args, "p"+strconv.Itoa(i))
			}
			expect(t, c, anyReply{}, args...)
		} else {
			for i := 0; i < n; i++ {
				add(t, c, "q", 0, "p"+strconv.Itoa(i))
			}
		}
		for i, ch := range chans {
			var r res
			select {
			case r = <-ch:
			case <-time.After(10 * time.Second):
				t.Fatalf("round %d: waiter %d got nothing", round, i)
			}
			want := []any{"q", "p" + strconv.Itoa(i)}
			if i%2 == 1 {
				want = []any{"q", anyReply{}, "p" + strconv.Itoa(i)}
			}
			if msg := match(want, r.v, r.err); msg != "" {
				t.Errorf("round %d (%s): waiter %d (blocked %d-th): %s", round, feed, i, i+1, msg)
			}
		}
		s.waitBlocked(t, 0)
	}
}

// TestAtLeastOnceWorkerFleet: 20 workers with ACKTIMEOUT 500 over many jobs,
// a third of them crashing mid-job now and then; every job is acknowledged
// exactly once and none is lost.
func TestAtLeastOnceWorkerFleet(t *testing.T) {
	t.Parallel()
	n := 50000
	if testing.Short() || os.Getenv("DELAYD_IT_RACE") == "1" {
		n = 10000
	}
	const workers = 20
	s := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var (
		mu        sync.Mutex
		acks      = make(map[string]int, n)
		dups      []string
		added     = make([]string, 0, n)
		total     atomic.Int64
		crashes   atomic.Int64
		lateAcks  atomic.Int64
		errCount  atomic.Int64
		firstErr  atomic.Value
		addedDone = make(chan struct{})
	)
	fail := func(err error) {
		errCount.Add(1)
		firstErr.CompareAndSwap(nil, err.Error())
	}

	// the producer: pipelined adds while the workers already run
	go func() {
		defer close(addedDone)
		pc := durNewClient(s)
		defer pc.Close()
		for start := 0; start < n; start += 1000 {
			m := min(1000, n-start)
			pipe := pc.Pipeline()
			cmds := make([]*redis.Cmd, m)
			for i := 0; i < m; i++ {
				cmds[i] = pipe.Do(ctx, "DELAY.ADD", "fleet", 0, "job-"+strconv.Itoa(start+i), "ACKTIMEOUT", 500)
			}
			_, _ = pipe.Exec(ctx)
			for _, cmd := range cmds {
				v, err := cmd.Result()
				if err != nil {
					fail(fmt.Errorf("add: %w", err))
					return
				}
				mu.Lock()
				added = append(added, fmt.Sprint(v))
				mu.Unlock()
			}
		}
	}()

	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		crasher := w%3 == 0
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			c := durNewClient(s)
			defer func() { c.Close() }()
			for ctx.Err() == nil && total.Load() < int64(n) {
				v, err := c.Do(ctx, "DELAY.POP", "fleet", "0.2").Result()
				if errors.Is(err, redis.Nil) {
					continue
				}
				if err != nil {
					if ctx.Err() == nil {
						fail(fmt.Errorf("pop: %w", err))
					}
					return
				}
				r, _ := v.([]any)
				if len(r) != 3 {
					fail(fmt.Errorf("pop replied %s", showValue(v)))
					return
				}
				id := fmt.Sprint(r[1])
				if crasher && rng.IntN(40) == 0 {
					// crash mid-job: the connection goes, no ACK; a new
					// worker takes this one's place
					crashes.Add(1)
					c.Close()
					c = durNewClient(s)
					continue
				}
				got, err := c.Do(ctx, "DELAY.ACK", "fleet", id).Int64()
				if err != nil {
					if ctx.Err() == nil {
						fail(fmt.Errorf("ack: %w", err))
					}
					return
				}
				if got == 0 {
					lateAcks.Add(1) // its deadline passed and another worker took it
					continue
				}
				mu.Lock()
				acks[id]++
				if acks[id] == 2 {
					dups = append(dups, id)
				}
				mu.Unlock()
				total.Add(1)
			}
		}()
	}
	start := time.Now()
	wg.Wait()
	select {
	case <-addedDone:
	case <-time.After(5 * time.Second):
		t.Fatal("the producer did not finish")
	}
	t.Logf("%d jobs, %d workers: %d acks in %v, %d crashes, %d late acks (replied 0)",
		n, workers, total.Load(), time.Since(start).Round(time.Millisecond), crashes.Load(), lateAcks.Load())
	if errCount.Load() > 0 {
		t.Fatalf("%d worker errors, first: %v", errCount.Load(), firstErr.Load())
	}
	if ctx.Err() != nil {
		t.Errorf("the fleet did not finish within 60 s: %d of %d acknowledged", total.Load(), n)
	}
	if len(dups) > 0 {
		t.Errorf("%d jobs acknowledged more than once (DELAY.ACK replied 1 twice), e.g. %q", len(dups), dups[:min(5, len(dups))])
	}
	if crashes.Load() == 0 {
		t.Errorf("no worker crashed: the test did not test redelivery")
	}
	var missing []string
	for _, id := range added {
		if acks[id] == 0 {
			missing = append(missing, id)
		}
	}
	if len(added) != n || len(missing) > 0 {
		t.Errorf("%d jobs added, %d of them never acknowledged (e.g. %q)", len(added), len(missing), missing[:min(5, len(missing))])
	}
	c := s.Client()
	expectStats(t, c, "fleet", 0, 0, 0)
	if v, ok := s.info("queues", "jobs"); !ok || v != "0" {
		t.Errorf("INFO queues jobs = %q (reported %v), want 0", v, ok)
	}
	expect(t, c, int64(0), "DBSIZE")
}
