package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayd/delayd/internal/testserver"
	"github.com/delayd/delayd/worker"
)

// The worker library (package worker) against the real server: the five
// tests every delayd worker library has (issue 35). The kill and SIGTERM
// tests run the library in a process of its own (worker/internal/testworker)
// and really kill it.

var (
	testWorkerOnce sync.Once
	testWorkerBin  string
	testWorkerErr  error
)

func testWorker(t *testing.T) string {
	t.Helper()
	testWorkerOnce.Do(func() {
		root, err := testserver.ModuleRoot()
		if err != nil {
			testWorkerErr = err
			return
		}
		dir, err := os.MkdirTemp("", "testworker")
		if err != nil {
			testWorkerErr = err
			return
		}
		testWorkerBin = filepath.Join(dir, "testworker")
		cmd := exec.Command("go", "build", "-o", testWorkerBin, "./worker/internal/testworker")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			testWorkerErr = fmt.Errorf("go build ./worker/internal/testworker: %v\n%s", err, out)
		}
	})
	if testWorkerErr != nil {
		t.Fatal(testWorkerErr)
	}
	return testWorkerBin
}

// workerProc is a running testworker: its stdout lines as they come.
type workerProc struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *testserver.Buffer
	exited chan error
}

func startWorkerProc(t *testing.T, addr, queue string, env ...string) *workerProc {
	t.Helper()
	p := &workerProc{lines: make(chan string, 1000), stderr: new(testserver.Buffer), exited: make(chan error, 1)}
	p.cmd = exec.Command(testWorker(t))
	p.cmd.Env = append(os.Environ(), append([]string{"DELAYD_ADDR=" + addr, "QUEUE=" + queue}, env...)...)
	p.cmd.Stderr = p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		io.Copy(io.Discard, out)
		close(p.lines)
		p.exited <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		if t.Failed() {
			t.Logf("testworker's log:\n%s", p.stderr.String())
		}
	})
	return p
}

// expectLine waits for a line and returns the lines before it.
func (p *workerProc) expectLine(t *testing.T, want string, limit time.Duration) []string {
	t.Helper()
	var before []string
	timeout := time.After(limit)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("testworker ended before %q; it printed %q", want, before)
			}
			if l == want {
				return before
			}
			before = append(before, l)
		case <-timeout:
			t.Fatalf("testworker did not print %q within %v; it printed %q", want, limit, before)
		}
	}
}

// libWorker runs a library Worker in this process until the test ends.
func libWorker(t *testing.T, rdb redis.UniversalClient, queue string, opt worker.Options, h worker.HandlerFunc) {
	t.Helper()
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
		if verbose {
			opt.Logger = slog.Default()
		}
	}
	w := worker.New(rdb, opt)
	w.Handle(queue, h)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

func libClient(s *server) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: s.Addr(), Protocol: 2})
}

// 1. kill -9 of a worker process mid-job: the job comes back after its ack
// timeout, once.
func TestWorkerLibKill9MidJob(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	rdb := libClient(s)
	defer rdb.Close()
	c := worker.NewClient(rdb)
	ctx := ctxT(t, 30*time.Second)
	if _, err := c.Add(ctx, "k9", []byte("x"), worker.ID("k1"), worker.AckTimeout(1500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	p := startWorkerProc(t, s.Addr(), "k9", "CONCURRENCY=1", "WORK_MS=-1")
	p.expectLine(t, "start k1", 10*time.Second)
	job, err := c.Get(ctx, "k9", "k1")
	if err != nil || job == nil || job.State != "reserved" {
		t.Fatalf("the job in the worker's hands: %+v %v", job, err)
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited

	type run struct {
		at         time.Time
		deliveries int
	}
	runs := make(chan run, 10)
	libWorker(t, rdb, "k9", worker.Options{}, func(ctx context.Context, j *worker.Job) error {
		info, _ := c.Get(ctx, j.Queue, j.ID)
		r := run{at: time.Now()}
		if info != nil {
			r.deliveries = info.Deliveries
		}
		runs <- r
		return nil
	})
	var got run
	select {
	case got = <-runs:
	case <-time.After(10 * time.Second):
		t.Fatal("the killed worker's job was not delivered again")
	}
	if got.at.Before(job.AckDeadline) {
		t.Errorf("delivered again %v before the ack deadline", job.AckDeadline.Sub(got.at))
	}
	if got.deliveries != 2 {
		t.Errorf("deliveries %d on the second run, want 2", got.deliveries)
	}
	// Once: acked, never a third time.
	time.Sleep(2 * time.Second)
	select {
	case r := <-runs:
		t.Fatalf("delivered a third time (deliveries %d)", r.deliveries)
	default:
	}
	if j, _ := c.Get(ctx, "k9", "k1"); j != nil {
		t.Fatalf("after the second run: %+v, want acked", j)
	}
}

// 2. a job running 3x its ack timeout is never redelivered while its
// heartbeat runs; a second worker on the queue never gets it.
func TestWorkerLibHeartbeatOutlivesAckTimeout(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	rdb := libClient(s)
	defer rdb.Close()
	c := worker.NewClient(rdb)
	ctx := ctxT(t, 30*time.Second)
	if _, err := c.Add(ctx, "hb", []byte("x"), worker.ID("long"), worker.AckTimeout(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	done := make(chan struct{})
	h := func(ctx context.Context, j *worker.Job) error {
		if runs.Add(1) > 1 {
			t.Errorf("the long job was delivered a second time")
			return nil
		}
		time.Sleep(6 * time.Second) // 3x the ack timeout
		close(done)
		return nil
	}
	libWorker(t, rdb, "hb", worker.Options{}, h)
	libWorker(t, rdb, "hb", worker.Options{}, h) // another worker, waiting
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("the long job did not end")
	}
	// DELAY.STATS cannot say it: a queue's counters go with the queue when
	// its last job does. Acked is gone; expired, it would have been ready
	// again and the second worker would have run it.
	waitForT(t, 5*time.Second, "the long job acked", func() bool {
		j, err := c.Get(ctx, "hb", "long")
		return err == nil && j == nil
	})
	time.Sleep(500 * time.Millisecond) // a redelivery would run by now
	if n := runs.Load(); n != 1 {
		t.Fatalf("the long job ran %d times, want 1", n)
	}
}

// 3. a failing job is retried with the policy's delays (read from each
// delivery's due time) and dead-lettered at its RETRY limit with its error
// text as the reason.
func TestWorkerLibRetriesThenDeadLetters(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	rdb := libClient(s)
	defer rdb.Close()
	c := worker.NewClient(rdb)
	ctx := ctxT(t, 30*time.Second)
	if _, err := c.Add(ctx, "rt", []byte("x"), worker.ID("r1"), worker.AckTimeout(10*time.Second),
		worker.Retry(3), worker.DeadLetter("rt:dead")); err != nil {
		t.Fatal(err)
	}
	policy := func(n int, _ error, _ *worker.Job) time.Duration { return time.Duration(100<<n) * time.Millisecond }
	var mu sync.Mutex
	var failedAt, due []time.Time
	libWorker(t, rdb, "rt", worker.Options{Backoff: policy}, func(ctx context.Context, j *worker.Job) error {
		info, err := c.Get(ctx, j.Queue, j.ID)
		if err != nil || info == nil {
			return fmt.Errorf("GET: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		due = append(due, info.Due)
		failedAt = append(failedAt, time.Now())
		return fmt.Errorf("smtp: 451 try later (%d)", info.Deliveries)
	})
	var dead *worker.JobInfo
	waitForT(t, 15*time.Second, "the job dead-lettered", func() bool {
		dead, _ = c.Get(ctx, "rt:dead", "r1")
		return dead != nil
	})
	mu.Lock()
	defer mu.Unlock()
	if len(due) != 4 {
		t.Fatalf("%d deliveries, want 4 (RETRY 3)", len(due))
	}
	for n := 1; n < 4; n++ {
		want := time.Duration(100<<n) * time.Millisecond
		if gap := due[n].Sub(failedAt[n-1]); gap < want-2*time.Millisecond || gap > want+200*time.Millisecond {
			t.Errorf("delivery %d was due %v after failure %d, want %v", n+1, gap, n, want)
		}
	}
	if dead.Error != "smtp: 451 try later (4)" || dead.Origin != "rt" {
		t.Fatalf("the dead letter: reason %q from %q", dead.Error, dead.Origin)
	}
}

// 4. SIGTERM: running jobs finish and are acked, nothing else is taken,
// the process exits 0.
func TestWorkerLibSIGTERM(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	rdb := libClient(s)
	defer rdb.Close()
	c := worker.NewClient(rdb)
	ctx := ctxT(t, 30*time.Second)
	for i := 1; i <= 5; i++ {
		if _, err := c.Add(ctx, "term", []byte("x"), worker.ID(fmt.Sprintf("t%d", i)), worker.AckTimeout(30*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	p := startWorkerProc(t, s.Addr(), "term", "CONCURRENCY=2", "WORK_MS=700")
	p.expectLine(t, "running", 10*time.Second)
	var started []string
	for len(started) < 2 {
		select {
		case l := <-p.lines:
			if strings.HasPrefix(l, "start ") {
				started = append(started, strings.TrimPrefix(l, "start "))
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the worker did not start two jobs")
		}
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	rest := p.expectLine(t, "stopped", 10*time.Second)
	if err := <-p.exited; err != nil {
		t.Fatalf("exit after SIGTERM: %v, want 0", err)
	}
	for _, l := range rest {
		if strings.HasPrefix(l, "start ") {
			t.Errorf("a job started after SIGTERM: %s", l)
		}
	}
	for _, id := range started {
		if j, _ := c.Get(ctx, "term", id); j != nil {
			t.Errorf("job %s running at SIGTERM: %+v, want finished and acked", id, j)
		}
	}
	st, err := c.Stats(ctx, "term")
	if err != nil || st.Ready != 3 || st.Reserved != 0 || st.All["deliveries"] != 2 {
		t.Fatalf("after the stop: %+v %v; want 3 ready, none reserved, 2 deliveries", st, err)
	}
}

// 5. a 3-node cluster's leader killed under load: every job added is
// completed, none twice except a redelivery after a real ack-timeout
// expiry, told apart by the deliveries each run saw.
func TestWorkerLibClusterLeaderKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster and a failover")
	}
	t.Parallel()
	cc := clStart(t, 3)
	leader := cc.waitFormed(t, 20*time.Second)
	var addrs []string
	for _, n := range cc.nodes {
		addrs = append(addrs, n.Addr())
	}
	opt := worker.ClusterOptions(addrs...)
	opt.Protocol = 2
	opt.DialTimeout = time.Second
	opt.ReadTimeout = 2 * time.Second
	rc := redis.NewClusterClient(opt)
	defer rc.Close()
	c := worker.NewClient(rc)
	const queue, jobs = "{wl}jobs", 400

	type run struct {
		id         string
		deliveries int
	}
	var mu sync.Mutex
	var runs []run
	seen := map[string]bool{}
	libWorker(t, rc, queue, worker.Options{Concurrency: 8}, func(ctx context.Context, j *worker.Job) error {
		deliveries := -1
		for i := 0; i < 200 && deliveries < 0; i++ {
			if info, err := c.Get(ctx, j.Queue, j.ID); err == nil && info != nil {
				deliveries = info.Deliveries
			} else {
				time.Sleep(100 * time.Millisecond)
			}
		}
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		runs = append(runs, run{j.ID, deliveries})
		seen[j.ID] = true
		mu.Unlock()
		return nil
	})

	// The producer: jobs due over 4 s, each add sent again with its ID
	// until acknowledged; the leader killed a second in.
	added := make(chan struct{})
	go func() {
		defer close(added)
		for i := 0; i < jobs; i++ {
			id := fmt.Sprintf("j%d", i)
			for try := 0; ; try++ {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				_, err := c.Add(ctx, queue, []byte("x"), worker.ID(id), worker.Delay(time.Duration(i%40)*100*time.Millisecond),
					worker.AckTimeout(3*time.Second))
				cancel()
				if err == nil {
					break
				}
				if try > 300 {
					t.Errorf("add %s: %v", id, err)
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	time.Sleep(time.Second)
	leader.Kill9()
	<-added
	waitForT(t, 60*time.Second, "every job completed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == jobs
	})
	time.Sleep(4 * time.Second) // a lost ack's redelivery shows within the ack timeout
	mu.Lock()
	defer mu.Unlock()
	twice := map[run]int{}
	redelivered := 0
	for _, r := range runs {
		twice[r]++
		if r.deliveries > 1 {
			redelivered++
		}
	}
	for r, n := range twice {
		if n > 1 {
			t.Errorf("job %s ran %d times at delivery %d: a double without an ack timeout's expiry", r.id, n, r.deliveries)
		}
	}
	t.Logf("%d jobs, %d runs, %d of them redeliveries after an ack timeout", jobs, len(runs), redelivered)
}

// waitForT polls ok every 20 ms until it holds, or fails the test.
func waitForT(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
