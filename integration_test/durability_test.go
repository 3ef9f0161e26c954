package integration

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/engine"
)

// SPEC "Durability" on the real binary with the append-only log on: restarts,
// kill -9 under appendfsync always, torn and damaged logs, --repair,
// BGREWRITEAOF under load and while being killed, reserved jobs, SIGTERM.
// This file has the helpers, restarts and kill -9; durability_log_test.go
// the damaged logs and rewrites; durability_reserved_test.go reserved jobs,
// everysec and SIGTERM.

// ---- helpers (dur*) ----

// durDir is the server's data directory (the last --dir of its arguments).
func durDir(t testing.TB, s *server) string {
	t.Helper()
	dir := ""
	for i := 0; i+1 < len(s.Args); i++ {
		if s.Args[i] == "--dir" {
			dir = s.Args[i+1]
		}
	}
	if dir == "" {
		t.Fatalf("no --dir in the server's arguments %q", s.Args)
	}
	return dir
}

// durAOF is the path of the server's log: the segment appends go to.
func durAOF(t testing.TB, s *server) string {
	segs := logSegments(t, durDir(t, s))
	return segs[len(segs)-1]
}

// logSegments returns the paths of the segments the log's manifest in dir
// names, oldest first.
func logSegments(t testing.TB, dir string) []string {
	t.Helper()
	path := filepath.Join(dir, engine.LogFile)
	ids, legacy, err := aof.ReadManifest(aof.OS, path)
	if err != nil || legacy {
		t.Fatalf("the log's manifest %s: %v (a log of an earlier release: %v)", path, err, legacy)
	}
	var segs []string
	for _, id := range ids {
		segs = append(segs, aof.SegPath(path, id))
	}
	return segs
}

// logBytes is what the log in dir holds on disk: every segment's bytes.
func logBytes(t testing.TB, dir string) int64 {
	t.Helper()
	var n int64
	for _, p := range logSegments(t, dir) {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		n += st.Size()
	}
	return n
}

// readLog returns the bytes of every segment of the log in dir, in order.
func readLog(t testing.TB, dir string) []byte {
	t.Helper()
	var all []byte
	for _, p := range logSegments(t, dir) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

// durStart starts the stopped server again (same dir and port) with extra
// flags appended to its arguments (they stay for later restarts). It returns
// the error of start and the server output written by this run.
func durStart(t testing.TB, s *server, extra ...string) (string, error) {
	t.Helper()
	if s.Running() {
		t.Fatalf("durStart: the server still runs")
	}
	s.Args = append(slices.Clone(s.Args), extra...)
	before := len(s.Output())
	err := s.Start()
	if err != nil {
		// wait for the process to finish writing its output
		select {
		case <-s.Exited():
		case <-time.After(5 * time.Second):
			s.Kill()
		}
	}
	return s.Output()[before:], err
}

// durKillUnderLoad lets the clients in wg run for a second, kills the server
// with kill -9 in the middle of their work, and waits for them to stop.
func durKillUnderLoad(t testing.TB, s *server, stop *atomic.Bool, wg *sync.WaitGroup) {
	t.Helper()
	time.Sleep(time.Second)
	s.Kill9()
	stop.Store(true)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("clients did not stop within 10 s of the kill")
	}
}

// durRestartAfterKill starts the server after Kill9 and fails the test when it
// does not come up.
func durRestartAfterKill(t testing.TB, s *server) {
	t.Helper()
	if out, err := durStart(t, s); err != nil {
		t.Fatalf("restart after kill -9: %v\n%s", err, out)
	}
}

// durStopClean stops the server with SIGTERM and requires exit code 0.
func durStopClean(t testing.TB, s *server) {
	t.Helper()
	if code := s.Stop(); code != 0 {
		t.Fatalf("SIGTERM: exit code %d, want 0", code)
	}
}

// durRec is one framed record of the log: its offset and payload length.
type durRec struct {
	off int
	n   int
}

// durRecords walks the log's records (8-byte header, then length, crc, payload).
func durRecords(t testing.TB, b []byte) []durRec {
	t.Helper()
	if len(b) < 8 || string(b[:4]) != "DLYD" {
		t.Fatalf("log does not start with the DLYD header: %q", b[:min(len(b), 8)])
	}
	var recs []durRec
	off := 8
	for off+8 <= len(b) {
		n := int(binary.LittleEndian.Uint32(b[off:]))
		if n == 0 || off+8+n > len(b) {
			break
		}
		recs = append(recs, durRec{off, n})
		off += 8 + n
	}
	if off != len(b) {
		t.Fatalf("log has %d bytes after its last whole record at %d", len(b)-off, off)
	}
	return recs
}

// durExisting returns which of ids DELAY.GET key finds (pipelined).
func durExisting(t testing.TB, c *redis.Client, key string, ids []string) map[string]bool {
	t.Helper()
	found := make(map[string]bool, len(ids))
	for start := 0; start < len(ids); start += 2000 {
		batch := ids[start:min(len(ids), start+2000)]
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		pipe := c.Pipeline()
		cmds := make([]*redis.Cmd, len(batch))
		for i, id := range batch {
			cmds[i] = pipe.Do(ctx, "DELAY.GET", key, id)
		}
		_, _ = pipe.Exec(ctx)
		cancel()
		for i, cmd := range cmds {
			v, err := cmd.Result()
			switch {
			case errors.Is(err, redis.Nil):
			case err != nil:
				t.Fatalf("DELAY.GET %s %s: %v", key, batch[i], err)
			default:
				if v != nil {
					found[batch[i]] = true
				}
			}
		}
	}
	return found
}

// durAddMany adds n jobs to key with DELAY.ADD key delay payload, pipelined,
// and returns their ids.
func durAddMany(t testing.TB, c *redis.Client, key string, delayMs int64, n int) []string {
	t.Helper()
	ids := make([]string, 0, n)
	for start := 0; start < n; start += 1000 {
		m := min(n-start, 1000)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		pipe := c.Pipeline()
		cmds := make([]*redis.Cmd, m)
		for i := 0; i < m; i++ {
			cmds[i] = pipe.Do(ctx, "DELAY.ADD", key, delayMs, "payload-"+strconv.Itoa(start+i))
		}
		_, _ = pipe.Exec(ctx)
		cancel()
		for i, cmd := range cmds {
			v, err := cmd.Result()
			if err != nil {
				t.Fatalf("pipelined DELAY.ADD %s #%d: %v", key, start+i, err)
			}
			ids = append(ids, bulkID(t, "DELAY.ADD", v))
		}
	}
	return ids
}

// durWaitRewriteDone waits until INFO persistence shows no rewrite in progress
// and the last one succeeded.
func durWaitRewriteDone(t testing.TB, s *server, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		v, ok := s.info("persistence", "aof_rewrite_in_progress")
		if ok && v == "0" {
			break
		}
		if !s.Running() {
			t.Fatalf("the server exited (code %d) while a log rewrite was in progress", s.ExitCode())
		}
		if time.Now().After(deadline) {
			t.Fatalf("INFO persistence aof_rewrite_in_progress still %q (reported %v) after %v", v, ok, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if v, _ := s.info("persistence", "aof_last_bgrewrite_status"); v != "ok" {
		t.Errorf("INFO persistence aof_last_bgrewrite_status = %q, want ok", v)
	}
}

// durNowMs is the client's clock in unix ms.
func durNowMs() int64 { return time.Now().UnixMilli() }

// ---- tests ----

// TestDurabilityRestartKeepsDueTimesAndOrder: jobs with various delays and
// same-millisecond ADDAT ties survive a SIGTERM stop with the same due times;
// after the restart they come out in (due, add order), never early, including
// those that became due while the server was down.
func TestDurabilityRestartKeepsDueTimesAndOrder(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--appendonly", "yes")
	c := s.Client()

	type durJob struct {
		key, id string
		seq     int
		due     int64
	}
	var jobs []*durJob
	seq := 0
	t0 := durNowMs()
	addRel := func(key string, delay int64) {
		id := add(t, c, key, delay, fmt.Sprintf("%s-%d", key, seq))
		jobs = append(jobs, &durJob{key: key, id: id, seq: seq})
		seq++
	}
	addAt := func(key string, at int64) {
		v := do(t, c, "DELAY.ADDAT", key, at, fmt.Sprintf("%s-%d", key, seq))
		jobs = append(jobs, &durJob{key: key, id: bulkID(t, "DELAY.ADDAT", v), seq: seq})
		seq++
	}
	// ready at once (all added long before the first delayed job is due):
	// they join the ready list in add order, whatever their due
	addRel("q", 0)
	addAt("q", t0-5000) // past: ready at once with that due
	addRel("q2", 0)
	addRel("q", 0)
	addAt("q", t0-10000)
	// due (and ready) before the stop
	addRel("q", 400)
	addAt("q2", t0+450)
	// due while the server is down (it stops after t0+500 and is down
	// until after t0+900)
	addAt("q", t0+800)
	addAt("q2", t0+700)
	addAt("q", t0+700)
	addAt("q", t0+800) // tie with the other t0+800
	// pending after the restart; ties at t0+2400 added in between others
	// and from different distances (so through different wheel levels)
	addRel("q", 3200)
	addAt("q", t0+2400)
	addRel("q", 1800)
	addAt("q2", t0+2400)
	addAt("q", t0+2400)
	addAt("q", t0+2400)
	addRel("q2", 2600)
	addAt("q", t0+2400)
	if late := durNowMs() - t0; late > 350 {
		t.Fatalf("the adds took %d ms; the test needs them done before the first delayed job is due (400 ms)", late)
	}
	const immediate = 5 // jobs[:immediate] were added ready
	for _, j := range jobs {
		j.due = asInt(t, "due", job(t, c, j.key, j.id)["due"])
	}
	time.Sleep(time.Duration(t0+520-durNowMs()) * time.Millisecond)
	durStopClean(t, s)
	time.Sleep(time.Duration(t0+920-durNowMs()) * time.Millisecond)
	if out, err := durStart(t, s); err != nil {
		t.Fatalf("restart: %v\n%s", err, out)
	}
	c = s.Client()

	for _, j := range jobs {
		m := job(t, c, j.key, j.id)
		if got := asInt(t, "due", m["due"]); got != j.due {
			t.Errorf("after restart DELAY.GET %s %s: due %d, want %d as before", j.key, j.id, got, j.due)
		}
		state := fmt.Sprint(m["state"])
		if now := durNowMs(); j.due < now-50 && state != "ready" {
			t.Errorf("after restart DELAY.GET %s %s: state %s, want ready (due %d ms ago)", j.key, j.id, state, now-j.due)
		} else if j.due > durNowMs()+50 && state != "delayed" {
			t.Errorf("after restart DELAY.GET %s %s: state %s, want delayed (due in %d ms)", j.key, j.id, state, j.due-durNowMs())
		}
	}

	for _, key := range []string{"q", "q2"} {
		var want []*durJob
		for _, j := range jobs {
			if j.key == key {
				want = append(want, j)
			}
		}
		// the ready list: jobs added ready in add order, then the others in
		// (due, add order)
		slices.SortStableFunc(want, func(a, b *durJob) int {
			if (a.seq < immediate) != (b.seq < immediate) {
				if a.seq < immediate {
					return -1
				}
				return 1
			}
			if a.seq < immediate {
				return a.seq - b.seq
			}
			if a.due != b.due {
				return int(a.due - b.due)
			}
			return a.seq - b.seq
		})
		for i, w := range want {
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
			v, err := c.Do(ctx, "DELAY.POP", key, "5").Result()
			cancel()
			at := durNowMs()
			if err != nil {
				t.Fatalf("pop %d of %s: %v", i, key, err)
			}
			r, _ := v.([]any)
			if len(r) != 3 || r[1] != w.id {
				t.Fatalf("pop %d of %s: got %s, want id %s (due %d, add order %d)", i, key, showValue(v), w.id, w.due, w.seq)
			}
			if at < w.due {
				t.Errorf("pop %d of %s: job %s handed out at %d, %d ms before its due %d", i, key, w.id, at, w.due-at, w.due)
			}
		}
	}
	expectStats(t, c, "q", 0, 0, 0)

	// server ids keep increasing across the restart
	last := ""
	for _, j := range jobs {
		last = max(last, j.id)
	}
	if id := add(t, c, "q", 0, "after"); id <= last {
		t.Errorf("id made after the restart %q is not above the ids made before (max %q)", id, last)
	}
}

// TestDurabilityKill9AlwaysLosesNoAcknowledgedAdd: 8 producers add as fast as
// they can under appendfsync always; kill -9 after about a second; every id
// that got a reply is there after the restart.
func TestDurabilityKill9AlwaysLosesNoAcknowledgedAdd(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--appendonly", "yes", "--appendfsync", "always")

	const producers = 8
	var (
		mu    sync.Mutex
		acked []string
		stop  atomic.Bool
		wg    sync.WaitGroup
	)
	clients := make([]*redis.Client, producers)
	for i := range clients {
		clients[i] = s.Client(func(o *redis.Options) {
			o.DialTimeout = 200 * time.Millisecond
			o.ReadTimeout = 2 * time.Second
		})
	}
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			var mine []string
			defer func() {
				mu.Lock()
				acked = append(acked, mine...)
				mu.Unlock()
			}()
			for i := 0; !stop.Load(); i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				v, err := clients[p].Do(ctx, "DELAY.ADD", "q", 60000, fmt.Sprintf("p%d-%d", p, i)).Result()
				cancel()
				if err != nil {
					return // the server is gone
				}
				if id, ok := v.(string); ok && id != "" {
					mine = append(mine, id)
				}
			}
		}(p)
	}
	durKillUnderLoad(t, s, &stop, &wg)
	if len(acked) < 100 {
		t.Fatalf("only %d adds were acknowledged in a second: too few to test anything", len(acked))
	}

	durRestartAfterKill(t, s)
	c := s.Client()
	found := durExisting(t, c, "q", acked)
	lost := 0
	var examples []string
	for _, id := range acked {
		if !found[id] {
			lost++
			if len(examples) < 5 {
				examples = append(examples, id)
			}
		}
	}
	t.Logf("%d acknowledged adds before kill -9", len(acked))
	if lost > 0 {
		t.Errorf("kill -9 under appendfsync always lost %d of %d acknowledged adds (e.g. %q)", lost, len(acked), examples)
	}
	d, _, _ := stats(t, c, "q")
	if d < int64(len(acked)) || d > int64(len(acked))+producers {
		t.Errorf("after restart DELAY.STATS q delayed = %d, want %d acknowledged (+ at most %d unacknowledged in flight)", d, len(acked), producers)
	}
}

// TestDurabilityKill9KeepsCancelsAndPops: under appendfsync always, a
// cancelled job stays cancelled and a popped job is not delivered again after
// kill -9 and a restart.
func TestDurabilityKill9KeepsCancelsAndPops(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
	c := s.Client()

	var kept, cancelled, popped []string
	for i := 0; i < 10; i++ {
		id := add(t, c, "q", 60000, "delayed-"+strconv.Itoa(i))
		if i%2 == 0 {
			cancelled = append(cancelled, id)
		} else {
			kept = append(kept, id)
		}
	}
	cancelledReady := add(t, c, "r", 0, "ready-cancelled")
	for i := 0; i < 6; i++ {
		id := add(t, c, "r", 0, "ready-"+strconv.Itoa(i))
		if i < 4 {
			popped = append(popped, id)
		} else {
			kept = append(kept, id)
		}
	}
	expect(t, c, int64(len(cancelled)), append([]any{"DELAY.CANCEL", "q"}, anySlice(cancelled)...)...)
	expect(t, c, int64(1), "DELAY.CANCEL", "r", cancelledReady)
	for i, id := range popped {
		if i%2 == 0 {
			expect(t, c, []any{"r", id, "ready-" + strconv.Itoa(i)}, "DELAY.POP", "r", "1")
		} else {
			expect(t, c, "ready-"+strconv.Itoa(i), "LPOP", "r")
		}
	}
	s.Kill9()
	durRestartAfterKill(t, s)
	c = s.Client()

	for _, id := range cancelled {
		expect(t, c, nil, "DELAY.GET", "q", id)
	}
	expect(t, c, nil, "DELAY.GET", "r", cancelledReady)
	for _, id := range popped {
		expect(t, c, nil, "DELAY.GET", "r", id)
	}
	expectStats(t, c, "q", 5, 0, 0)
	expectStats(t, c, "r", 0, 2, 0)
	expect(t, c, []any{"r", kept[5], "ready-4"}, "DELAY.POP", "r", "1")
	expect(t, c, []any{"r", kept[6], "ready-5"}, "DELAY.POP", "r", "1")
	expect(t, c, nil, "DELAY.POP", "r", "0.2")
	found := durExisting(t, c, "q", kept[:5])
	if len(found) != 5 {
		t.Errorf("after kill -9: %d of the 5 kept delayed jobs found", len(found))
	}
}

// anySlice converts strings to command arguments.
func anySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
