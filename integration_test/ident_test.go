package integration

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SPEC "Recurring schedules and job identity": UNIQUE, DEBOUNCE,
// DELAY.RESCHEDULE(AT), DELAY.PROMOTE; and DELAY.MPOP of "Commands of the
// delay queue".
//
//	DELAYD_IT_IDENT_JOBS=100000 go test -run TestIdentReschedule ./integration_test/   # the 100k
//
// The reschedule test runs 20000 jobs by default (a few seconds).

// identJobs is the size of the reschedule test: 20000, or DELAYD_IT_IDENT_JOBS.
func identJobs(t *testing.T) int {
	if v := os.Getenv("DELAYD_IT_IDENT_JOBS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("DELAYD_IT_IDENT_JOBS=%q: want a positive count", v)
		}
		return n
	}
	return 20000
}

// identSleepUntil sleeps until the client's clock reads ms (unix ms).
func identSleepUntil(ms int64) {
	if d := time.Until(time.UnixMilli(ms)); d > 0 {
		time.Sleep(d)
	}
}

// A UNIQUE id stays taken for ttl after its ACK, through a restart, a
// BGREWRITEAOF (whose log no longer holds the job) and another restart;
// then it is accepted again.
func TestIdentUniqueSurvivesRestartAndRewrite(t *testing.T) {
	s := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
	c := s.Client()
	const ttl = 6000
	add := []any{"DELAY.ADD", "q", 0, "unique-payload", "ID", "order-1", "UNIQUE", ttl, "ACKTIMEOUT", 30000}
	expect(t, c, "order-1", add...)
	expect(t, c, []any{"q", "order-1", "unique-payload"}, "DELAY.POP", "q", 1)
	before := time.Now().UnixMilli()
	expect(t, c, int64(1), "DELAY.ACK", "q", "order-1")
	// The tombstone started at the ACK, somewhere in [before, after].
	after := time.Now().UnixMilli()

	identSleepUntil(before + 1)
	expect(t, c, nil, add...)
	expect(t, c, nil, "DELAY.ADDAT", "q", 1, "x", "ID", "order-1", "REPLACE")
	expect(t, c, "order-1", "DELAY.ADD", "other", 0, "x", "ID", "order-1") // another queue's id

	s.Restart()
	c = s.Client()
	expect(t, c, nil, add...)
	expect(t, c, int64(1), "DEL", "other")
	expect(t, c, anyReply{}, "BGREWRITEAOF")
	durWaitRewriteDone(t, s, 10*time.Second)
	log := readLog(t, s.dir(t))
	if bytes.Contains(log, []byte("unique-payload")) {
		t.Fatal("the rewritten log still holds the acknowledged job")
	}
	s.Restart()
	c = s.Client()
	if now := time.Now().UnixMilli(); now >= before+ttl-200 {
		t.Fatalf("restarts took too long (%d ms of the %d ms ttl): nothing left to test", now-before, ttl)
	}
	expect(t, c, nil, add...)
	identSleepUntil(before + ttl - 200)
	expect(t, c, nil, add...)
	identSleepUntil(after + ttl + 1)
	expect(t, c, "order-1", add...)
}

// dir is the server's data dir (the value of --dir).
func (s *server) dir(t *testing.T) string {
	for i, a := range s.Args {
		if a == "--dir" && i+1 < len(s.Args) {
			return s.Args[i+1]
		}
	}
	t.Fatal("no --dir")
	return ""
}

// DEBOUNCE pushes a delayed job out, up to the first add plus max-wait.
func TestIdentDebounce(t *testing.T) {
	s := startServer(t)
	c := s.Client()
	t0 := time.Now().UnixMilli()
	expect(t, c, "d", "DELAY.ADD", "q", 400, "v1", "ID", "d", "DEBOUNCE", 1000)
	first := asInt(t, "due", job(t, c, "q", "d")["due"])
	if first < t0+400 || first > time.Now().UnixMilli()+401 {
		t.Fatalf("first due %d, want about %d", first, t0+400)
	}
	limit := first - 400 + 1000
	time.Sleep(100 * time.Millisecond)
	expect(t, c, "d", "DELAY.ADD", "q", 400, "v2", "ID", "d", "DEBOUNCE", 1000)
	if due := asInt(t, "due", job(t, c, "q", "d")["due"]); due <= first {
		t.Fatalf("not pushed out: %d after %d", due, first)
	}
	expect(t, c, "d", "DELAY.ADD", "q", 60000, "v3", "ID", "d", "DEBOUNCE", 1000)
	expectJob(t, c, "q", "d", map[string]string{"due": strconv.FormatInt(limit, 10), "payload": "v3", "state": "delayed"}, 0, 0)
	got := popAsync(c, 5*time.Second, "DELAY.POP", "q", 3)
	r := waitPop(t, got, 5*time.Second)
	if at := time.Now().UnixMilli(); at < limit {
		t.Fatalf("handed out at %d, before its limit %d", at, limit)
	}
	popTriple(t, r, "q", "d", "v3")
	expect(t, c, "d", "DELAY.ADD", "q", 400, "v4", "ID", "d", "DEBOUNCE", 1000) // a new window
}

// RESCHEDULE of many delayed jobs while producers add and workers pop: no
// job is lost or handed out twice, and none before its final due time.
func TestIdentRescheduleUnderLoad(t *testing.T) {
	n := identJobs(t)
	s := startServer(t, "--appendonly", "yes")
	pool := func(o *redis.Options) { o.PoolSize = 4 }
	const producers, reschedulers, workers = 2, 2, 8
	ctx := ctxT(t, 5*time.Minute)

	// Producers add jobs due now to 1.5 s out and hand their ids to the
	// reschedulers; the adds' due times are the jobs' first due times.
	start := time.Now().UnixMilli()
	firstDue := make([]int64, n)
	added := make(chan []int, 64)
	var wg sync.WaitGroup
	var errs sync.Map
	fail := func(what string, err error) { errs.LoadOrStore(what, err) }
	for p := range producers {
		wg.Go(func() {
			c := s.Client(pool)
			rng := rand.New(rand.NewPCG(uint64(p), 1))
			const batch = 500
			for lo := p * batch; lo < n; lo += producers * batch {
				hi := min(lo+batch, n)
				ids := make([]int, 0, hi-lo)
				_, err := c.Pipelined(ctx, func(pl redis.Pipeliner) error {
					for i := lo; i < hi; i++ {
						firstDue[i] = time.Now().UnixMilli() + rng.Int64N(1500)
						pl.Do(ctx, "DELAY.ADDAT", "q", firstDue[i], "j"+strconv.Itoa(i), "ID", "j"+strconv.Itoa(i))
						ids = append(ids, i)
					}
					return nil
				})
				if err != nil {
					fail("add", err)
					return
				}
				added <- ids
			}
		})
	}
	go func() { wg.Wait(); close(added) }()

	// Reschedulers move every job once, to now up to 2.5 s from now: earlier
	// or later than it was, ready or delayed, while workers take the jobs
	// that are due (some before their reschedule comes).
	finalDue := make([]int64, n) // 0: the reschedule found no job (popped first)
	var rwg sync.WaitGroup
	var moved, missed int64
	var mu sync.Mutex
	for r := range reschedulers {
		rwg.Go(func() {
			c := s.Client(pool)
			rng := rand.New(rand.NewPCG(uint64(r), 2))
			for ids := range added {
				dues := make([]int64, len(ids))
				cmds, err := c.Pipelined(ctx, func(pl redis.Pipeliner) error {
					for k, i := range ids {
						dues[k] = time.Now().UnixMilli() + rng.Int64N(2500)
						pl.Do(ctx, "DELAY.RESCHEDULEAT", "q", "j"+strconv.Itoa(i), dues[k])
					}
					return nil
				})
				if err != nil {
					fail("reschedule", err)
					return
				}
				mu.Lock()
				for k, cmd := range cmds {
					v, err := cmd.(*redis.Cmd).Int64()
					switch {
					case err != nil:
						fail("reschedule reply", err)
					case v == 1:
						finalDue[ids[k]] = dues[k]
						moved++
					default:
						missed++
					}
				}
				mu.Unlock()
			}
		})
	}

	// Workers pop until every job has been handed out (or the time is up).
	got := make([][]int64, n) // the client's clock at each delivery of job i
	var gmu sync.Mutex
	var delivered sync.WaitGroup
	var total int64
	done := make(chan struct{})
	for range workers {
		delivered.Go(func() {
			c := s.Client()
			for {
				select {
				case <-done:
					return
				default:
				}
				v, err := c.Do(ctx, "DELAY.POP", "q", 0.2).Result()
				at := time.Now().UnixMilli()
				if err == redis.Nil {
					continue
				}
				if err != nil {
					fail("pop", err)
					return
				}
				a := v.([]any)
				i, _ := strconv.Atoi(strings.TrimPrefix(a[1].(string), "j"))
				gmu.Lock()
				got[i] = append(got[i], at)
				total++
				if total == int64(n) {
					close(done)
				}
				gmu.Unlock()
			}
		})
	}
	rwg.Wait()
	select {
	case <-done:
	case <-time.After(time.Duration(30+n/2000) * time.Second):
		gmu.Lock()
		t.Errorf("only %d of %d jobs handed out in time", total, n)
		gmu.Unlock()
		close(done)
	}
	delivered.Wait()
	errs.Range(func(k, v any) bool { t.Errorf("%s: %v", k, v); return true })

	early, lost, twice := 0, 0, 0
	for i := range n {
		switch len(got[i]) {
		case 0:
			lost++
			continue
		case 1:
		default:
			twice++
		}
		want := firstDue[i]
		if finalDue[i] != 0 {
			want = finalDue[i]
		}
		if got[i][0] < want {
			if early < 5 {
				t.Errorf("j%d handed out at %d, %d ms before its due time %d", i, got[i][0], want-got[i][0], want)
			}
			early++
		}
	}
	t.Logf("%d jobs, %d rescheduled, %d already handed out when rescheduled, in %v", n, moved, missed,
		time.Duration(time.Now().UnixMilli()-start)*time.Millisecond)
	if lost+twice+early > 0 {
		t.Fatalf("%d lost, %d handed out more than once, %d early", lost, twice, early)
	}
	if moved < int64(n)/2 {
		t.Fatalf("only %d of %d reschedules found their job delayed or ready: the test did not test", moved, n)
	}
	expectStats(t, s.Client(), "q", 0, 0, 0)
}

// PROMOTE makes delayed jobs ready now; RESCHEDULE of a reserved job is 0.
func TestIdentPromoteAndReschedule(t *testing.T) {
	s := startServer(t)
	c := s.Client()
	chain(t, c,
		cmd("a", "DELAY.ADD", "q", 60000, "pa", "ID", "a", "ACKTIMEOUT", 30000),
		cmd("b", "DELAY.ADD", "q", 60000, "pb", "ID", "b"),
		cmd(int64(2), "DELAY.PROMOTE", "q", "b", "a", "nosuch"),
		cmd([]any{"pb", "pa"}, "LRANGE", "q", 0, -1),
		cmd([]any{"q", "b", "pb"}, "DELAY.POP", "q", 1),
		cmd([]any{"q", "a", "pa"}, "DELAY.POP", "q", 1),
		cmd(int64(0), "DELAY.RESCHEDULE", "q", "a", 10),
		cmd(int64(0), "DELAY.PROMOTE", "q", "a"),
		cmd(int64(1), "DELAY.NACK", "q", "a", 60000),
		cmd(int64(1), "DELAY.RESCHEDULE", "q", "a", 0),
		cmd([]any{"q", "a", "pa"}, "DELAY.POP", "q", 1),
		cmd(errIs("ERR value is not an integer or out of range"), "DELAY.RESCHEDULE", "q", "a", -1),
		cmd(errIs("ERR wrong number of arguments for 'delay.promote' command"), "DELAY.PROMOTE", "q"),
	)
	if j := job(t, c, "q", "a"); fmt.Sprint(j["deliveries"]) != "2" {
		t.Fatalf("deliveries after NACK and RESCHEDULE: %v", j["deliveries"])
	}
}

// DELAY.MPOP from go-redis (raw Do, as its BLMPop is for lists) and
// redis-cli: batches, blocking, a client that leaves, errors.
func TestIdentMPop(t *testing.T) {
	s := startServer(t)
	c := s.Client()
	chain(t, c,
		cmd(int64(3), "RPUSH", "b", "1", "2", "3"),
		cmd(nil, "DELAY.MPOP", 0.05, 1, "a"),
		cmd(check(func(v any) string {
			a, ok := v.([]any)
			if !ok || len(a) != 2 || a[0] != "b" {
				return "want [b, [...]]"
			}
			jobs, ok := a[1].([]any)
			if !ok || len(jobs) != 2 {
				return "want 2 jobs"
			}
			for k, j := range jobs {
				p, ok := j.([]any)
				if !ok || len(p) != 2 || p[1] != strconv.Itoa(k+1) {
					return fmt.Sprintf("job %d: want [id, %d]", k, k+1)
				}
			}
			return ""
		}), "DELAY.MPOP", 1, 2, "a", "b", "COUNT", 2),
		cmd(errIs("ERR numkeys should be greater than 0"), "DELAY.MPOP", 0, 0, "a"),
		cmd(errIs("ERR count should be greater than 0"), "DELAY.MPOP", 0, 1, "a", "COUNT", 0),
		cmd(errIs("ERR syntax error: numkeys is more than the keys given"), "DELAY.MPOP", 0, 3, "a", "b"),
		cmd(errIs("ERR timeout is negative"), "DELAY.MPOP", -1, 1, "a"),
		cmd([]any{"a", "b"}, "COMMAND", "GETKEYS", "DELAY.MPOP", 0, 2, "a", "b", "COUNT", 2),
	)

	// Blocked, then served with up to COUNT of what a push brings.
	w := s.Client()
	res := make(chan any, 1)
	go func() {
		v, err := w.Do(ctxT(t, 10*time.Second), "DELAY.MPOP", 5, 2, "x", "y", "COUNT", 3).Result()
		if err != nil {
			v = err
		}
		res <- v
	}()
	s.waitBlocked(t, 1)
	expect(t, c, int64(4), "RPUSH", "y", "p1", "p2", "p3", "p4")
	select {
	case v := <-res:
		a, ok := v.([]any)
		if !ok || a[0] != "y" || len(a[1].([]any)) != 3 {
			t.Fatalf("blocked MPOP got %v", v)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("blocked MPOP not served")
	}
	expect(t, c, []any{"p4"}, "LRANGE", "y", 0, -1)

	// A client that leaves while blocked never gets jobs: served just as
	// it left, its jobs go back in order.
	rc := s.dialRaw(t)
	rc.send("DELAY.MPOP", "0", "1", "z", "COUNT", "2")
	s.waitBlocked(t, 1)
	rc.c.Close()
	time.Sleep(50 * time.Millisecond)
	expect(t, c, int64(3), "RPUSH", "z", "z1", "z2", "z3")
	time.Sleep(100 * time.Millisecond)
	expect(t, c, []any{"z1", "z2", "z3"}, "LRANGE", "z", 0, -1)

	// redis-cli.
	expect(t, c, "k1", "DELAY.ADD", "cliq", 0, "hello", "ID", "k1")
	out := cli(t, s, "DELAY.MPOP", "1", "1", "cliq", "COUNT", "5")
	if want := "cliq\nk1\nhello\n"; out != want {
		t.Fatalf("redis-cli DELAY.MPOP: %q, want %q", out, want)
	}
	out = cli(t, s, "COMMAND", "INFO", "DELAY.MPOP")
	if !strings.Contains(out, "movablekeys") {
		t.Fatalf("COMMAND INFO DELAY.MPOP lacks movablekeys: %q", out)
	}
}

// All of it inside MULTI/EXEC, as go-redis's TxPipelined sends it.
func TestIdentInTransaction(t *testing.T) {
	s := startServer(t)
	c := s.Client()
	ctx := ctxT(t, 10*time.Second)
	cmds, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Do(ctx, "DELAY.ADD", "q", 60000, "p", "ID", "a", "UNIQUE", 60000)
		p.Do(ctx, "DELAY.ADD", "q", 60000, "p", "ID", "b", "DEBOUNCE", 1000)
		p.Do(ctx, "DELAY.PROMOTE", "q", "a")
		p.Do(ctx, "DELAY.RESCHEDULE", "q", "b", 0)
		p.Do(ctx, "DELAY.MPOP", 0, 1, "q", "COUNT", 5)
		p.Do(ctx, "DELAY.MPOP", 0, 1, "q")
		p.Do(ctx, "DELAY.ADD", "q", 0, "p", "ID", "a")
		return nil
	})
	if err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	var got []string
	for _, cmd := range cmds {
		v, err := cmd.(*redis.Cmd).Result()
		got = append(got, fmt.Sprintf("%v %v", v, err))
	}
	want := []string{"a <nil>", "b <nil>", "1 <nil>", "1 <nil>", "[q [[a p] [b p]]] <nil>", "<nil> redis: nil", "<nil> redis: nil"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("transaction replies %q, want %q", got, want)
	}
}
