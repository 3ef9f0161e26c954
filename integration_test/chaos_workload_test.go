package integration

// The workload of TestChaos: producers, workers and cancellers on the
// at-least-once queues, and a small FIFO workload on sampled queues for the
// linearizability check. Every call goes through a go-redis ClusterClient
// (chaos.Guard keeps its retries to those that cannot double an effect)
// and is recorded in one chaos.History.

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/delayd/delayd/chaos"
	"github.com/redis/go-redis/v9"
)

// chaosWorkload runs the clients and holds what they recorded.
type chaosWorkload struct {
	t   *testing.T
	cfg chaosConfig
	h   *chaos.History

	cc chaosConn // at-least-once clients: short timeouts
	fc chaosConn // sampled FIFO queues: waits out any fault (see chaos/model.go)

	queues []string   // at-least-once queues
	byTag  [][]string // queues by hash tag: one slot each, so a worker pops a tag's queues at once
	fifo   []string   // sampled queues

	// After the run, before finish: what a stopped slot move excuses in
	// Check, and the sampled queues it left open, which porcupine skips
	// (a comeback is not linearizable, by design).
	checkOpts chaos.CheckOptions
	unsampled map[string]bool

	nextClient atomic.Int64

	recentMu sync.Mutex
	recent   []queuedJob // recently added jobs, for the cancellers

	producers, workers sync.WaitGroup
}

type queuedJob struct{ queue, id string }

// chaosConn is a ClusterClient, or a Client for the single-node run.
type chaosConn interface {
	chaos.Processor
	Do(ctx context.Context, args ...any) *redis.Cmd
}

// newChaosSingleClient is a Client of one standalone server, guarded the
// same way.
func newChaosSingleClient(t *testing.T, addr string, readTimeout time.Duration) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr:            addr,
		MaxRetries:      -1,
		DialTimeout:     500 * time.Millisecond,
		ReadTimeout:     readTimeout,
		WriteTimeout:    2 * time.Second,
		PoolSize:        32,
		DisableIdentity: true,
	})
	chaos.GuardClient(c)
	t.Cleanup(func() { c.Close() })
	return c
}

// newChaosClient is a ClusterClient as a failover-aware deployment would
// set it up: every node as a seed, many redirects, a state refresh every
// half second, and short timeouts (readTimeout must exceed the pops' own
// 1 s block).
func newChaosClient(t *testing.T, addrs []string, readTimeout time.Duration) *redis.ClusterClient {
	o := &redis.ClusterOptions{
		Addrs:                      addrs,
		MaxRedirects:               16,
		MinRetryBackoff:            20 * time.Millisecond,
		MaxRetryBackoff:            250 * time.Millisecond,
		DialTimeout:                500 * time.Millisecond,
		ReadTimeout:                readTimeout,
		WriteTimeout:               2 * time.Second,
		PoolSize:                   32,
		ClusterStateReloadInterval: 500 * time.Millisecond,
		DisableIdentity:            true,
	}
	chaos.Guard(o)
	c := redis.NewClusterClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}

// newChaosWorkload records into a new history; cc should time out soon
// after the workers' 1 s pops, fc only after any fault is over.
func newChaosWorkload(t *testing.T, cfg chaosConfig, cc, fc chaosConn) *chaosWorkload {
	w := &chaosWorkload{t: t, cfg: cfg, h: chaos.NewHistory(), cc: cc, fc: fc}
	tags := cfg.tags
	if len(tags) == 0 {
		tags = []string{"chaos"}
	}
	per := max(2, 8/len(tags))
	for _, tag := range tags {
		var qs []string
		for i := 0; i < per; i++ {
			qs = append(qs, fmt.Sprintf("{%s}q%d", tag, i))
		}
		w.byTag = append(w.byTag, qs)
		w.queues = append(w.queues, qs...)
	}
	for i := 0; i < cfg.sampled; i++ {
		w.fifo = append(w.fifo, fmt.Sprintf("{%s}fifo%d", tags[i%len(tags)], i))
	}
	return w
}

func (w *chaosWorkload) allQueues() []string {
	return append(append([]string(nil), w.queues...), w.fifo...)
}

func (w *chaosWorkload) sampled(q string) bool {
	return strings.Contains(q, "}fifo") && !w.unsampled[q]
}

func (w *chaosWorkload) client() int { return int(w.nextClient.Add(1) - 1) }

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// after a call that did not succeed: the cluster may have moved, so look
// again now rather than at the next periodic refresh, and do not spin.
func (w *chaosWorkload) backoff(c chaosConn) {
	if cc, ok := c.(*redis.ClusterClient); ok {
		cc.ReloadState(context.Background())
	}
	time.Sleep(20 * time.Millisecond)
}

// add records one DELAY.ADD (or DELAY.ADDAT when at) of a new job.
func (w *chaosWorkload) add(c chaosConn, client int, q, uid string, delay, ack int64, at bool) chaos.Op {
	inv := w.h.Now()
	invMs := (w.h.Start() + inv) / int64(time.Millisecond)
	due := invMs + delay // DELAY.ADD: the earliest due time the server can give it
	payload := chaos.EncodePayload(chaos.Payload{UID: uid, Due: due, AckTimeout: ack, Pad: 16})
	args := []any{"DELAY.ADD", q, delay, payload}
	if at {
		args = []any{"DELAY.ADDAT", q, due, payload}
	}
	args = append(args, "ID", uid, "ACKTIMEOUT", ack)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	cmd, out := chaos.Do(ctx, c, args...)
	cancel()
	op := chaos.Op{Client: client, Kind: chaos.KindAdd, Queue: q, Job: uid, Payload: payload, Due: due,
		AckTimeout: ack, Invoke: inv, Return: w.h.Now(), Outcome: out}
	if out == chaos.OK {
		if cmd.Val() != nil {
			op.Count = 1
		}
	} else {
		op.Err = errText(cmd.Err())
	}
	w.h.Record(op)
	if out != chaos.OK {
		w.backoff(c)
	}
	return op
}

// pop records one DELAY.POP of keys with a timeout in seconds; the
// returned op has Count 1 when it returned a job.
func (w *chaosWorkload) pop(c chaosConn, client int, timeout string, keys ...string) chaos.Op {
	args := []any{"DELAY.POP"}
	for _, k := range keys {
		args = append(args, k)
	}
	args = append(args, timeout)
	inv := w.h.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	cmd, out := chaos.Do(ctx, c, args...)
	cancel()
	op := chaos.Op{Client: client, Kind: chaos.KindPop, Invoke: inv, Return: w.h.Now(), Outcome: out}
	if len(keys) == 1 {
		op.Queue = keys[0]
	}
	switch {
	case out != chaos.OK:
		op.Err = errText(cmd.Err())
	case cmd.Val() != nil:
		arr, _ := cmd.Val().([]any)
		if len(arr) != 3 {
			w.t.Errorf("DELAY.POP replied %#v", cmd.Val())
			break
		}
		op.Queue, op.Job, op.Payload = fmt.Sprint(arr[0]), fmt.Sprint(arr[1]), fmt.Sprint(arr[2])
		op.Count = 1
		if p, err := chaos.ParsePayload(op.Payload); err == nil {
			op.Due, op.AckTimeout = p.Due, p.AckTimeout
		}
	}
	w.h.Record(op)
	if out != chaos.OK {
		w.backoff(c)
	}
	return op
}

// one records an ack, nack or cancel of one job.
func (w *chaosWorkload) one(c chaosConn, client int, kind chaos.Kind, q, id string) chaos.Op {
	name := map[chaos.Kind]string{chaos.KindAck: "DELAY.ACK", chaos.KindNack: "DELAY.NACK", chaos.KindCancel: "DELAY.CANCEL"}[kind]
	inv := w.h.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	cmd, out := chaos.Do(ctx, c, name, q, id)
	cancel()
	op := chaos.Op{Client: client, Kind: kind, Queue: q, Job: id, Invoke: inv, Return: w.h.Now(), Outcome: out}
	if out == chaos.OK {
		n, err := cmd.Int64()
		if err != nil {
			w.t.Errorf("%s replied %#v", name, cmd.Val())
		}
		op.Count = n
	} else {
		op.Err = errText(cmd.Err())
	}
	w.h.Record(op)
	if out != chaos.OK {
		w.backoff(c)
	}
	return op
}

func (w *chaosWorkload) remember(j queuedJob) {
	w.recentMu.Lock()
	defer w.recentMu.Unlock()
	if len(w.recent) < 512 {
		w.recent = append(w.recent, j)
		return
	}
	w.recent[rand.Intn(len(w.recent))] = j
}

func (w *chaosWorkload) pick(rng *rand.Rand) (queuedJob, bool) {
	w.recentMu.Lock()
	defer w.recentMu.Unlock()
	if len(w.recent) == 0 {
		return queuedJob{}, false
	}
	return w.recent[rng.Intn(len(w.recent))], true
}

// startProducers runs the producers, the cancellers and the FIFO
// producers until ctx is done.
func (w *chaosWorkload) startProducers(ctx context.Context) {
	per := float64(w.cfg.rate) / float64(w.cfg.producers)
	for p := 0; p < w.cfg.producers; p++ {
		client, rng := w.client(), rand.New(rand.NewSource(w.cfg.seed+int64(p)))
		w.producers.Add(1)
		go func() {
			defer w.producers.Done()
			tick := time.NewTicker(time.Duration(float64(time.Second) / per))
			defer tick.Stop()
			for seq := 0; ; seq++ {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				q := w.queues[rng.Intn(len(w.queues))]
				delay := rng.Int63n(w.cfg.maxDelay + 1)
				if rng.Intn(10) < 3 {
					delay = 0
				}
				uid := fmt.Sprintf("p%d-%d", client, seq)
				op := w.add(w.cc, client, q, uid, delay, w.cfg.ackTimeout, rng.Intn(2) == 0)
				if op.Outcome == chaos.OK && delay > 500 {
					w.remember(queuedJob{q, uid})
				}
			}
		}()
	}

	// Cancellers: about one cancel per 20 adds, mostly of jobs still delayed.
	client, rng := w.client(), rand.New(rand.NewSource(w.cfg.seed+100))
	w.producers.Add(1)
	go func() {
		defer w.producers.Done()
		tick := time.NewTicker(time.Duration(float64(time.Second) / max(1, float64(w.cfg.rate)/20)))
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if j, ok := w.pick(rng); ok {
				w.one(w.cc, client, chaos.KindCancel, j.queue, j.id)
			}
		}
	}()

	// FIFO producers: one per sampled queue, 20 adds a second, delay 0,
	// ACKTIMEOUT 0; now and then a cancel of the last job added.
	for i, q := range w.fifo {
		client, rng := w.client(), rand.New(rand.NewSource(w.cfg.seed+200+int64(i)))
		w.producers.Add(1)
		go func() {
			defer w.producers.Done()
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			last := ""
			for seq := 0; ; seq++ {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				if last != "" && rng.Intn(8) == 0 {
					w.one(w.fc, client, chaos.KindCancel, q, last)
					last = ""
					continue
				}
				uid := fmt.Sprintf("f%d-%d", client, seq)
				w.add(w.fc, client, q, uid, 0, 0, false)
				last = uid
			}
		}()
	}
}

// startWorkers runs the workers and the FIFO consumers until ctx is done.
func (w *chaosWorkload) startWorkers(ctx context.Context) {
	for i := 0; i < max(w.cfg.workers, len(w.byTag)); i++ {
		client, rng := w.client(), rand.New(rand.NewSource(w.cfg.seed+300+int64(i)))
		queues := w.byTag[i%len(w.byTag)]
		w.workers.Add(1)
		go func() {
			defer w.workers.Done()
			for ctx.Err() == nil {
				op := w.pop(w.cc, client, "1", queues...)
				if op.Outcome != chaos.OK || op.Count == 0 {
					continue
				}
				switch r := rng.Intn(100); {
				case r < 5:
					// A worker that dies with the job: its reservation
					// expires and the job is delivered again.
				case r < 9:
					w.one(w.cc, client, chaos.KindNack, op.Queue, op.Job)
				default:
					w.one(w.cc, client, chaos.KindAck, op.Queue, op.Job)
				}
			}
		}()
	}
	for i, q := range w.fifo {
		for k := 0; k < 2; k++ {
			client, rng := w.client(), rand.New(rand.NewSource(w.cfg.seed+400+int64(2*i+k)))
			w.workers.Add(1)
			go func() {
				defer w.workers.Done()
				for ctx.Err() == nil {
					w.pop(w.fc, client, "0.2", q)
					time.Sleep(time.Duration(rng.Intn(40)) * time.Millisecond)
				}
			}()
		}
	}
}

// queueStats is DELAY.STATS of every queue, summed: delayed, ready, reserved.
func (w *chaosWorkload) queueStats() ([3]int64, error) {
	var sum [3]int64
	for _, q := range w.allQueues() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		v, err := w.cc.Do(ctx, "DELAY.STATS", q).Result()
		cancel()
		if err != nil {
			return sum, fmt.Errorf("DELAY.STATS %s: %w", q, err)
		}
		arr, _ := v.([]any)
		if m, ok := v.(map[any]any); ok { // RESP3
			for k, x := range m {
				arr = append(arr, k, x)
			}
		}
		for i := 0; i+1 < len(arr); i += 2 {
			n, _ := arr[i+1].(int64)
			switch fmt.Sprint(arr[i]) {
			case "delayed":
				sum[0] += n
			case "ready":
				sum[1] += n
			case "reserved":
				sum[2] += n
			}
		}
	}
	return sum, nil
}

// drain waits until no job is left in any state on any queue, with the
// workers still running. A long run can end with a backlog (the workers
// pop queues in order, so the last ones wait): the limit is extended while
// the backlog shrinks, up to 10 minutes, so a slow drain is not taken for
// lost jobs and a stuck one still fails.
func (w *chaosWorkload) drain(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	hard := time.Now().Add(10 * time.Minute)
	var last [3]int64
	var err error
	best := int64(-1)
	for time.Now().Before(deadline) {
		last, err = w.queueStats()
		if err == nil && last == [3]int64{} {
			return nil
		}
		if total := last[0] + last[1] + last[2]; err == nil && (best < 0 || total < best) {
			best = total
			if ext := time.Now().Add(30 * time.Second); ext.After(deadline) {
				deadline = ext
			}
			if deadline.After(hard) {
				deadline = hard
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("after %v still delayed %d, ready %d, reserved %d", limit, last[0], last[1], last[2])
}

// waitGroup waits for wg up to d.
func waitGroup(wg *sync.WaitGroup, d time.Duration) error {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-time.After(d):
		return errors.New("timed out")
	}
}

// finish stops the producers, waits until every job is drained, stops the
// workers, and judges the history: chaos.Check over every operation and
// porcupine over the sampled queues. Violations fail the test.
func (w *chaosWorkload) finish(stopProducers, stopWorkers context.CancelFunc) ([]chaos.Op, chaos.Report, chaos.LinResult) {
	t, cfg := w.t, w.cfg
	stopProducers()
	if err := waitGroup(&w.producers, 60*time.Second); err != nil {
		t.Fatalf("producers did not stop: %v", err)
	}
	drainLimit := time.Duration(cfg.maxDelay+cfg.ackTimeout)*time.Millisecond + 60*time.Second
	if err := w.drain(drainLimit); err != nil {
		t.Errorf("jobs were not drained: %v", err)
	}
	stopWorkers()
	if err := waitGroup(&w.workers, 60*time.Second); err != nil {
		t.Fatalf("workers did not stop: %v", err)
	}
	if st, err := w.queueStats(); err != nil || st != [3]int64{} {
		t.Errorf("after the workers stopped: stats %v, %v (want nothing left)", st, err)
	}

	ops := w.h.Ops()
	defer func() {
		if t.Failed() {
			w.dumpHistory(ops)
		}
	}()
	report := chaos.Check(w.h.Start(), ops, w.checkOpts)
	t.Logf("chaos: %s", report.Summary())
	if !report.OK() {
		t.Errorf("chaos: the history breaks the delivery guarantees:\n%s", report)
	}
	lin := chaos.CheckFIFO(ops, w.sampled, 2*time.Minute)
	t.Logf("chaos: linearizability of %d operations on %d sampled queues: %s", lin.Ops, len(w.fifo)-len(w.unsampled), lin.Result)
	switch lin.Result {
	case porcupine.Illegal:
		path := filepath.Join(os.TempDir(), fmt.Sprintf("delayd-chaos-%d.html", cfg.seed))
		if err := lin.Visualize(path); err != nil {
			t.Logf("visualize: %v", err)
		}
		t.Errorf("chaos: the sampled queues' history is not linearizable (porcupine's view: %s)", path)
	case porcupine.Unknown:
		t.Logf("chaos: porcupine gave up within its time limit: linearizability not decided")
	}
	return ops, report, lin
}

// dumpHistory writes the history where a failed run can be read again:
// $DELAYD_CHAOS_REPORT.history.jsonl, or a file in the temp dir.
func (w *chaosWorkload) dumpHistory(ops []chaos.Op) {
	path := filepath.Join(os.TempDir(), fmt.Sprintf("delayd-chaos-%d.history.jsonl", w.cfg.seed))
	if w.cfg.report != "" {
		path = w.cfg.report + ".history.jsonl"
	}
	f, err := os.Create(path)
	if err == nil {
		err = chaos.WriteJSON(f, w.h.Start(), ops)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		w.t.Logf("chaos: writing the history: %v", err)
		return
	}
	w.t.Logf("chaos: the history (%d ops) is in %s", len(ops), path)
}
