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
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SPEC "Durability" on the real binary with the append-only log on: restarts,
// kill -9 under appendfsync always, torn and damaged logs, --repair,
// BGREWRITEAOF under load and while being killed, reserved jobs, SIGTERM.

// ---- helpers (dur*) ----

// durDir is the server's data directory (the last --dir of its arguments).
func durDir(t testing.TB, s *server) string {
	t.Helper()
	dir := ""
	for i := 0; i+1 < len(s.args); i++ {
		if s.args[i] == "--dir" {
			dir = s.args[i+1]
		}
	}
	if dir == "" {
		t.Fatalf("no --dir in the server's arguments %q", s.args)
	}
	return dir
}

// durAOF is the path of the server's log.
func durAOF(t testing.TB, s *server) string {
	return filepath.Join(durDir(t, s), "delayd.aof")
}

// durStart starts the stopped server again (same dir and port) with extra
// flags appended to its arguments (they stay for later restarts). It returns
// the error of start and the server output written by this run.
func durStart(t testing.TB, s *server, extra ...string) (string, error) {
	t.Helper()
	if s.running() {
		t.Fatalf("durStart: the server still runs")
	}
	s.args = append(slices.Clone(s.args), extra...)
	before := len(s.out.String())
	err := s.start()
	if err != nil {
		// wait for the process to finish writing its output
		select {
		case <-s.Exited():
		case <-time.After(5 * time.Second):
			s.kill9()
		}
	}
	return s.out.String()[before:], err
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
		if !s.running() {
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

// TestDurabilityTornTail: a partial record or garbage at the end of the log
// (a crash mid-write) is cut off with a warning, and everything before it is
// there.
func TestDurabilityTornTail(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--appendonly", "yes")
	c := s.Client()
	path := durAOF(t, s)

	var ids []string
	for i := 0; i < 20; i++ {
		ids = append(ids, add(t, c, "q", 60000, "job-"+strconv.Itoa(i)))
	}

	damages := []struct {
		name string
		// damage changes the log; lastMayGo tells that the last added job
		// may be lost (its own record was cut)
		damage    func(b []byte) []byte
		lastMayGo bool
	}{
		{"garbage bytes appended", func(b []byte) []byte {
			return append(b, 0x07, 0xff, 0x13)
		}, false},
		{"partial record appended", func(b []byte) []byte {
			rec := make([]byte, 8+10)
			binary.LittleEndian.PutUint32(rec, 100) // says 100 bytes, has 10
			binary.LittleEndian.PutUint32(rec[4:], 0xdeadbeef)
			copy(rec[8:], "0123456789")
			return append(b, rec...)
		}, false},
		{"last record truncated", func(b []byte) []byte {
			recs := durRecords(t, b)
			last := recs[len(recs)-1]
			return b[:last.off+8+last.n-3]
		}, true},
		{"last record checksum mismatch", func(b []byte) []byte {
			recs := durRecords(t, b)
			last := recs[len(recs)-1]
			b[last.off+8+last.n/2] ^= 0x5a
			return b
		}, true},
	}
	for _, d := range damages {
		// each round adds one job, stops cleanly, damages the tail, starts
		ids = append(ids, add(t, c, "q", 60000, "job-"+d.name))
		durStopClean(t, s)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, d.damage(b), 0o644); err != nil {
			t.Fatal(err)
		}
		since := len(s.out.String()) // where this start's output begins
		out, err := durStart(t, s)
		if err != nil {
			t.Fatalf("%s: the server did not start: %v\n%s", d.name, err, out)
		}
		// The warning is logged before the server answers, but it reaches
		// s.out through a pipe copier that may lag the PING: wait for it.
		for wait := time.Now().Add(5 * time.Second); !strings.Contains(strings.ToLower(out), "torn") && time.Now().Before(wait); {
			time.Sleep(10 * time.Millisecond)
			out = s.out.String()[since:]
		}
		if !strings.Contains(strings.ToLower(out), "torn") {
			t.Errorf("%s: no warning about a torn tail in the server output:\n%s", d.name, out)
		}
		c = s.Client()
		check := ids
		if d.lastMayGo {
			check = ids[:len(ids)-1]
			last := ids[len(ids)-1]
			if len(durExisting(t, c, "q", []string{last})) == 0 {
				ids = ids[:len(ids)-1] // it went with the cut record
			}
		}
		found := durExisting(t, c, "q", check)
		if len(found) != len(check) {
			var missing []string
			for _, id := range check {
				if !found[id] {
					missing = append(missing, id)
				}
			}
			t.Errorf("%s: %d jobs missing after the start: %q", d.name, len(missing), missing)
		}
		expectStats(t, c, "q", int64(len(ids)), 0, 0)
		// the log works after the cut
		ids = append(ids, add(t, c, "q", 60000, "after-"+d.name))
	}
	durStopClean(t, s)
	if out, err := durStart(t, s); err != nil {
		t.Fatalf("final restart: %v\n%s", err, out)
	}
	c = s.Client()
	expectStats(t, c, "q", int64(len(ids)), 0, 0)
}

// TestDurabilityDamageBeforeTail: a flipped byte in the middle of the log
// stops the start with a message naming the file and the offset; --repair
// cuts the log there, keeps the rest in delayd.aof.broken and starts.
func TestDurabilityDamageBeforeTail(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--appendonly", "yes")
	c := s.Client()
	path := durAOF(t, s)
	var ids []string
	for i := 0; i < 40; i++ {
		ids = append(ids, add(t, c, "q", 60000, "job-"+strconv.Itoa(i)))
	}
	durStopClean(t, s)

	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	recs := durRecords(t, b)
	victim := recs[len(recs)/2]
	flip := victim.off + 8 + victim.n/2
	b[flip] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}

	out, err := durStart(t, s)
	if err == nil {
		t.Fatalf("the server started on a log damaged at offset %d of %d; want a refusal", flip, len(b))
	}
	if code := s.ExitCode(); code == 0 {
		t.Errorf("refused start: exit code 0, want non-zero")
	}
	if !strings.Contains(out, path) {
		t.Errorf("the refusal does not name the file %s:\n%s", path, out)
	}
	if !strings.Contains(out, "offset") ||
		(!strings.Contains(out, strconv.Itoa(victim.off)) && !strings.Contains(out, strconv.Itoa(flip))) {
		t.Errorf("the refusal does not name the offset (record at %d, byte %d):\n%s", victim.off, flip, out)
	}
	if after, _ := os.ReadFile(path); len(after) != len(b) {
		t.Errorf("the refused start changed the log size from %d to %d; nothing may be cut without --repair", len(b), len(after))
	}

	out, err = durStart(t, s, "--repair")
	if err != nil {
		t.Fatalf("--repair: the server did not start: %v\n%s", err, out)
	}
	broken, err := os.ReadFile(path + ".broken")
	if err != nil {
		t.Fatalf("--repair left no %s.broken: %v", path, err)
	}
	if want := len(b) - victim.off; len(broken) != want && len(broken) != len(b)-flip {
		t.Errorf("%s.broken has %d bytes, want the %d bytes cut from offset %d", path, len(broken), want, victim.off)
	}
	if fi, err := os.Stat(path); err == nil && fi.Size() > int64(victim.off) && fi.Size() < int64(len(b)) {
		// the log may have grown by records written at start, not by the cut
		t.Logf("log is %d bytes after the repair (cut at %d)", fi.Size(), victim.off)
	}
	c = s.Client()
	found := durExisting(t, c, "q", ids)
	// what is kept is a prefix of the adds, and the cut took the rest
	n := 0
	for n < len(ids) && found[ids[n]] {
		n++
	}
	if n != len(found) {
		t.Errorf("after --repair the jobs found are not a prefix of the adds: first missing #%d, %d found", n, len(found))
	}
	if n == 0 || n == len(ids) {
		t.Errorf("after --repair %d of %d jobs found; want those before the damage (some, not all)", n, len(ids))
	}
	expectStats(t, c, "q", int64(len(found)), 0, 0)
	add(t, c, "q", 60000, "after-repair")
	durStopClean(t, s)
	if out, err := durStart(t, s); err != nil {
		t.Fatalf("restart after the repair: %v\n%s", err, out)
	}
	expectStats(t, s.Client(), "q", int64(len(found))+1, 0, 0)
}

// TestDurabilityRewriteUnderLoad: BGREWRITEAOF while 4 producers add and a
// consumer pops; after it finishes, kill -9 and restart: every acknowledged
// job not popped is there, none popped is back.
func TestDurabilityRewriteUnderLoad(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
	c := s.Client()
	// a base of live jobs so the rewrite has something to copy
	base := durAddMany(t, c, "q", 600000, 20000)

	var (
		mu     sync.Mutex
		acked  = map[string]bool{}
		popped = map[string]bool{}
		stop   atomic.Bool
		wg     sync.WaitGroup
		errs   atomic.Int64
	)
	for p := 0; p < 4; p++ {
		pc := s.Client()
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				delay := 0
				if i%2 == 1 {
					delay = 600000
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				v, err := pc.Do(ctx, "DELAY.ADD", "q", delay, fmt.Sprintf("p%d-%d", p, i)).Result()
				cancel()
				if err != nil {
					errs.Add(1)
					return
				}
				mu.Lock()
				acked[fmt.Sprint(v)] = true
				mu.Unlock()
			}
		}(p)
	}
	cc := s.Client()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			v, err := cc.Do(ctx, "DELAY.POP", "q", "0.1").Result()
			cancel()
			if errors.Is(err, redis.Nil) {
				continue
			}
			if err != nil {
				errs.Add(1)
				return
			}
			r, _ := v.([]any)
			if len(r) != 3 {
				errs.Add(1)
				return
			}
			mu.Lock()
			popped[fmt.Sprint(r[1])] = true
			mu.Unlock()
		}
	}()
	// three rewrites while the load goes on
	for i := 0; i < 3; i++ {
		time.Sleep(150 * time.Millisecond)
		expect(t, c, anyReply{}, "BGREWRITEAOF")
		durWaitRewriteDone(t, s, 30*time.Second)
	}
	time.Sleep(150 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if errs.Load() > 0 {
		t.Fatalf("%d producer/consumer errors during the rewrites (server running: %v)", errs.Load(), s.running())
	}
	durWaitRewriteDone(t, s, 30*time.Second)
	for _, id := range base {
		acked[id] = true
	}
	t.Logf("%d acknowledged adds, %d pops", len(acked), len(popped))

	s.Kill9()
	durRestartAfterKill(t, s)
	c = s.Client()
	var all []string
	for id := range acked {
		all = append(all, id)
	}
	found := durExisting(t, c, "q", all)
	lost, back := 0, 0
	for id := range acked {
		switch {
		case popped[id] && found[id]:
			back++
		case !popped[id] && !found[id]:
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("after rewrite + kill -9: %d acknowledged, not popped jobs lost", lost)
	}
	if back > 0 {
		t.Errorf("after rewrite + kill -9: %d popped jobs are back", back)
	}
	d, r, res := stats(t, c, "q")
	if want := int64(len(acked) - len(popped)); d+r+res != want {
		t.Errorf("after rewrite + kill -9: DELAY.STATS q delayed+ready+reserved = %d, want %d", d+r+res, want)
	}
}

// TestDurabilityKill9DuringRewrite: kill -9 right after BGREWRITEAOF on a log
// of many jobs; the restart recovers every acknowledged job, and the next
// rewrite works.
func TestDurabilityKill9DuringRewrite(t *testing.T) {
	t.Parallel()
	n := 200000
	if testing.Short() {
		n = 50000
	}
	s := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
	c := s.Client()
	ids := durAddMany(t, c, "q", 600000, n)
	// some churn so the rewrite has something to drop
	expect(t, c, int64(1000), append([]any{"DELAY.CANCEL", "q"}, anySlice(ids[:1000])...)...)
	ids = ids[1000:]

	expect(t, c, anyReply{}, "BGREWRITEAOF")
	inProgress, _ := s.info("persistence", "aof_rewrite_in_progress")
	s.Kill9()
	t.Logf("killed with aof_rewrite_in_progress:%s", inProgress)

	durRestartAfterKill(t, s)
	c = s.Client()
	expectStats(t, c, "q", int64(len(ids)), 0, 0)
	found := durExisting(t, c, "q", ids)
	if len(found) != len(ids) {
		t.Errorf("after kill -9 during a rewrite: %d of %d acknowledged jobs found", len(found), len(ids))
	}

	// the next rewrite works and keeps everything, also through another kill
	expect(t, c, anyReply{}, "BGREWRITEAOF")
	durWaitRewriteDone(t, s, 60*time.Second)
	s.Kill9()
	durRestartAfterKill(t, s)
	expectStats(t, s.Client(), "q", int64(len(ids)), 0, 0)
	if matches, _ := filepath.Glob(filepath.Join(durDir(t, s), "*")); len(matches) > 0 {
		t.Logf("data dir after the second rewrite: %q", matches)
	}
}

// TestDurabilityLogBoundedUnderChurn: after 100k adds and pops and a
// BGREWRITEAOF the log is small when nothing is pending.
func TestDurabilityLogBoundedUnderChurn(t *testing.T) {
	t.Parallel()
	n := 100000
	if testing.Short() {
		n = 20000
	}
	s := startServer(t, "--appendonly", "yes")
	c := s.Client()
	const batch = 1000
	for start := 0; start < n; start += batch {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		pipe := c.Pipeline()
		for i := 0; i < batch; i++ {
			pipe.Do(ctx, "DELAY.ADD", "q", 0, "churn-"+strconv.Itoa(start+i))
		}
		pops := make([]*redis.Cmd, batch)
		for i := 0; i < batch; i++ {
			pops[i] = pipe.Do(ctx, "DELAY.POP", "q", "1")
		}
		_, err := pipe.Exec(ctx)
		cancel()
		if err != nil {
			t.Fatalf("batch at %d: %v", start, err)
		}
		for i, p := range pops {
			if r, _ := p.Val().([]any); len(r) != 3 || r[2] != "churn-"+strconv.Itoa(start+i) {
				t.Fatalf("pop %d: got %s", start+i, showValue(p.Val()))
			}
		}
	}
	expectStats(t, c, "q", 0, 0, 0)
	path := durAOF(t, s)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	before := fi.Size()
	expect(t, c, anyReply{}, "BGREWRITEAOF")
	durWaitRewriteDone(t, s, 30*time.Second)
	fi, err = os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("log: %d bytes before the rewrite, %d after", before, fi.Size())
	if fi.Size() >= 64<<10 {
		t.Errorf("log is %d bytes after BGREWRITEAOF with nothing pending (before: %d); want < 64 KiB", fi.Size(), before)
	}
	// INFO persistence follows the new file (allowing a moment after
	// aof_rewrite_in_progress:0 for the size to be published)
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		v, _ := s.info("persistence", "aof_current_size")
		if v == strconv.FormatInt(fi.Size(), 10) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("INFO persistence aof_current_size = %s 2 s after the rewrite ended, the file has %d bytes", v, fi.Size())
			break
		}
	}
	durStopClean(t, s)
	if out, err := durStart(t, s); err != nil {
		t.Fatalf("restart: %v\n%s", err, out)
	}
	c = s.Client()
	expectStats(t, c, "q", 0, 0, 0)
	expect(t, c, int64(0), "DBSIZE")
	expect(t, c, nil, "DELAY.POP", "q", "0.1")
}

// TestDurabilityReservedSurvivesKill9: a popped, unacknowledged job with an
// ack timeout is still reserved after kill -9 and a restart, with the same
// absolute deadline; an ACK after the restart deletes it for good.
func TestDurabilityReservedSurvivesKill9(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
	c := s.Client()
	id := add(t, c, "q", 0, "work", "ACKTIMEOUT", 60000)
	expect(t, c, []any{"q", id, "work"}, "DELAY.POP", "q", "1")
	m := job(t, c, "q", id)
	if m["state"] != "reserved" {
		t.Fatalf("after the pop: state %v, want reserved", m["state"])
	}
	deadline, ok := m["ack_deadline"]
	if !ok {
		t.Errorf("DELAY.GET of a reserved job has no ack_deadline: %v", sortedKeys(m))
	}
	expectStats(t, c, "q", 0, 0, 1)
	s.Kill9()
	durRestartAfterKill(t, s)
	c = s.Client()
	m = job(t, c, "q", id)
	if m["state"] != "reserved" || fmt.Sprint(m["ack_deadline"]) != fmt.Sprint(deadline) {
		t.Errorf("after kill -9 and restart: state %v deadline %v, want reserved until %v", m["state"], m["ack_deadline"], deadline)
	}
	if d := asInt(t, "deliveries", m["deliveries"]); d != 1 {
		t.Errorf("after kill -9 and restart: deliveries %d, want 1", d)
	}
	expectStats(t, c, "q", 0, 0, 1)
	expect(t, c, nil, "DELAY.POP", "q", "0.1")
	expect(t, c, int64(1), "DELAY.ACK", "q", id)
	s.Kill9()
	durRestartAfterKill(t, s)
	c = s.Client()
	expect(t, c, nil, "DELAY.GET", "q", id)
	expectStats(t, c, "q", 0, 0, 0)
}

// TestDurabilityEverysecReservedSurvivesKill9: under everysec, as under
// always, a pop's reservation is in the log before its reply (SPEC,
// Durability), so a kill -9 right after the pop neither loses the job nor
// hands it out again before its ack deadline; an ACK's likewise.
func TestDurabilityEverysecReservedSurvivesKill9(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--appendonly", "yes", "--appendfsync", "everysec")
	c := s.Client()
	id := add(t, c, "q", 0, "a", "ACKTIMEOUT", 60000)
	other := add(t, c, "q", 0, "b", "ACKTIMEOUT", 60000)
	expect(t, c, []any{"q", id, "a"}, "DELAY.POP", "q", "1")
	deadline := job(t, c, "q", id)["ack_deadline"]
	s.Kill9()
	durRestartAfterKill(t, s)
	c = s.Client()
	m := job(t, c, "q", id)
	if m["state"] != "reserved" || fmt.Sprint(m["ack_deadline"]) != fmt.Sprint(deadline) {
		t.Fatalf("after a pop and kill -9 under everysec: %v, want reserved until %v", m, deadline)
	}
	expect(t, c, []any{"q", other, "b"}, "DELAY.POP", "q", "1") // not a again
	expect(t, c, int64(1), "DELAY.ACK", "q", id)
	expect(t, c, int64(1), "DELAY.ACK", "q", other)
	s.Kill9()
	durRestartAfterKill(t, s)
	c = s.Client()
	expect(t, c, nil, "DELAY.GET", "q", id)
	expect(t, c, nil, "DELAY.GET", "q", other)
	expectStats(t, c, "q", 0, 0, 0)
}

// TestDurabilityEverysecTimerRecordsSurviveKill9: under everysec the records
// the timer goroutine makes, which no client waits for, are written by that
// goroutine before it sleeps (engine/journal.go), not left for the flusher's
// one-second tick. A job served to a blocked DELAY.POP when it comes due is
// reserved after a kill -9 right after the reply; a schedule's firings, made
// while no client sends anything, are in the log when the server is killed.
// Without the timer goroutine's write, every firing is lost.
func TestDurabilityEverysecTimerRecordsSurviveKill9(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--appendonly", "yes", "--appendfsync", "everysec")
	c := s.Client()

	// A reservation made by the timer: the job comes due while the worker
	// blocks.
	popped := make(chan []any, 1)
	go func() {
		v, _ := s.Client().Do(ctxT(t, 10*time.Second), "DELAY.POP", "r", "5").Slice()
		popped <- v
	}()
	s.waitBlocked(t, 1)
	id := add(t, c, "r", 200, "served", "ACKTIMEOUT", 60000)
	if v := <-popped; len(v) != 3 || v[1] != id {
		t.Fatalf("the blocked pop: %v, want job %s", v, id)
	}
	s.Kill9()
	durRestartAfterKill(t, s)
	c = s.Client()
	if m := job(t, c, "r", id); m["state"] != "reserved" || asInt(t, "deliveries", m["deliveries"]) != 1 {
		t.Fatalf("a job served by the timer, after kill -9: %v, want reserved, delivered once", m)
	}

	// A schedule's firings, made while no client sends a command: any
	// command, even a read, would have the pending records written
	// (Engine.Settle), so the test learns the firing times only after the
	// restart. Those due 150 ms before the kill or earlier must be there: a
	// firing late by that much on a loaded machine is not what this tests.
	const every = 20
	expect(t, c, "OK", "DELAY.SCHEDULE", "q", "tick", "EVERY", every, "x")
	from := time.Now().UnixMilli()
	time.Sleep(500 * time.Millisecond)
	killed := time.Now().UnixMilli()
	s.Kill9()
	durRestartAfterKill(t, s)
	c = s.Client()
	list := do(t, c, "DELAY.SCHEDULES", "q").([]any)
	if len(list) != 1 {
		t.Fatalf("DELAY.SCHEDULES q: %v", list)
	}
	next := asInt(t, "next", fields(t, "tick", list[0])["next"])
	first := from + 1 + ((next-from-1)%every+every)%every // the first firing after from
	var made, lost []string
	for at := first; at <= killed-150; at += every {
		made = append(made, "tick:"+strconv.FormatInt(at, 10))
	}
	if len(made) < 3 {
		t.Fatalf("%d firings in 350 ms of EVERY %d", len(made), every)
	}
	found := durExisting(t, c, "q", made)
	for _, id := range made {
		if !found[id] {
			lost = append(lost, id)
		}
	}
	if len(lost) > 0 {
		t.Errorf("after kill -9, %d of the %d firings due by then are gone: %v (from %d, killed %d)", len(lost), len(made), lost, from, killed)
	}
}

// TestDurabilitySigtermKeepsEverything: SIGTERM exits 0 and the restart sees
// every write, whatever the fsync policy (a graceful stop flushes and fsyncs).
func TestDurabilitySigtermKeepsEverything(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"no", "everysec", "always"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, "--appendonly", "yes", "--appendfsync", policy)
			c := s.Client()
			delayed := durAddMany(t, c, "d", 600000, 3000)
			ready := durAddMany(t, c, "r", 0, 10)
			expect(t, c, int64(2), "DELAY.CANCEL", "d", delayed[0], delayed[1])
			expect(t, c, []any{"r", ready[0], "payload-0"}, "DELAY.POP", "r", "1")
			resv := add(t, c, "a", 0, "reserved", "ACKTIMEOUT", 60000)
			acked := add(t, c, "a", 0, "acked", "ACKTIMEOUT", 60000)
			expect(t, c, []any{"a", resv, "reserved"}, "DELAY.POP", "a", "1")
			expect(t, c, []any{"a", acked, "acked"}, "DELAY.POP", "a", "1")
			expect(t, c, int64(1), "DELAY.ACK", "a", acked)
			custom := add(t, c, "x", 600000, "v1", "ID", "mine")
			expect(t, c, custom, "DELAY.ADD", "x", 600000, "v2", "ID", "mine", "REPLACE")

			durStopClean(t, s)
			if out, err := durStart(t, s); err != nil {
				t.Fatalf("restart: %v\n%s", err, out)
			}
			c = s.Client()
			expectStats(t, c, "d", int64(len(delayed)-2), 0, 0)
			expectStats(t, c, "r", 0, 9, 0)
			// a reserved job stays reserved across a restart
			expectStats(t, c, "a", 0, 0, 1)
			if m := job(t, c, "a", resv); m["state"] != "reserved" {
				t.Errorf("reserved job after restart: %v", m)
			}
			expect(t, c, nil, "DELAY.GET", "a", acked)
			expect(t, c, nil, "DELAY.GET", "d", delayed[0])
			expect(t, c, nil, "DELAY.GET", "r", ready[0])
			if m := job(t, c, "x", "mine"); m["payload"] != "v2" {
				t.Errorf("replaced job after restart: payload %v, want v2", m["payload"])
			}
			if found := durExisting(t, c, "d", delayed[2:]); len(found) != len(delayed)-2 {
				t.Errorf("%d of %d delayed jobs after the restart", len(found), len(delayed)-2)
			}
			expect(t, c, []any{"r", ready[1], "payload-1"}, "DELAY.POP", "r", "1")
		})
	}
}

// durPopAll pops n jobs of key with pipelined DELAY.POP key 1 and returns
// their ids; any error or null reply fails the test.
func durPopAll(t testing.TB, c *redis.Client, key string, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pipe := c.Pipeline()
	cmds := make([]*redis.Cmd, n)
	for i := range cmds {
		cmds[i] = pipe.Do(ctx, "DELAY.POP", key, "1")
	}
	_, _ = pipe.Exec(ctx)
	ids := make([]string, 0, n)
	for i, cmd := range cmds {
		v, err := cmd.Result()
		if err != nil {
			t.Fatalf("pipelined DELAY.POP %s #%d of %d: %v", key, i, n, err)
		}
		r, _ := v.([]any)
		if len(r) != 3 {
			t.Fatalf("pipelined DELAY.POP %s #%d: %s", key, i, showValue(v))
		}
		ids = append(ids, fmt.Sprint(r[1]))
	}
	return ids
}

// TestDurabilityManyReservedSurviveRestarts: 1,000 reserved jobs keep their
// reservations across a restart (SIGTERM, and kill -9 under appendfsync
// always): none is handed out again before its deadline, an ACK sent after
// the restart deletes its job, and once the deadline passes every un-acked
// job comes back, once.
func TestDurabilityManyReservedSurviveRestarts(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"kill -9", "SIGTERM"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			const n = 1000
			const ackTimeout = 4000 // the wait before the deadline fits expect's 5 s
			s := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
			c := s.Client()
			var want []string
			for start := 0; start < n; start += 100 {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				pipe := c.Pipeline()
				cmds := make([]*redis.Cmd, 100)
				for i := range cmds {
					cmds[i] = pipe.Do(ctx, "DELAY.ADD", "q", 0, "w"+strconv.Itoa(start+i), "ACKTIMEOUT", ackTimeout)
				}
				_, _ = pipe.Exec(ctx)
				cancel()
				for _, cmd := range cmds {
					want = append(want, bulkID(t, "DELAY.ADD", cmd.Val()))
				}
			}
			got := durPopAll(t, c, "q", n)
			if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
				t.Fatalf("the %d pops did not return each job once", n)
			}
			// The first job popped has the earliest deadline.
			first := asInt(t, "ack_deadline", job(t, c, "q", got[0])["ack_deadline"])
			if how == "kill -9" {
				s.Kill9()
			} else {
				durStopClean(t, s)
			}
			if out, err := durStart(t, s); err != nil {
				t.Fatalf("restart with %d reserved jobs in the log: %v\n%s", n, err, out)
			}
			c = s.Client()
			expectStats(t, c, "q", 0, 0, n)
			if d := asInt(t, "ack_deadline", job(t, c, "q", got[0])["ack_deadline"]); d != first {
				t.Fatalf("ack deadline after the restart %d, want %d as before", d, first)
			}
			// ACK every other job after the restart: each deletes its job.
			acked := map[string]bool{}
			for i := 0; i < n; i += 2 {
				expect(t, c, int64(1), "DELAY.ACK", "q", got[i])
				acked[got[i]] = true
			}
			// Nothing is handed out again before the deadline.
			if wait := first - durNowMs() - 300; wait > 0 {
				ms := strconv.FormatFloat(float64(wait)/1000, 'f', 3, 64)
				expect(t, c, nil, "DELAY.POP", "q", ms)
			} else {
				t.Logf("the restart took past the deadline; skipping the check before it")
			}
			if durNowMs() < first-50 {
				expectStats(t, c, "q", 0, 0, n/2)
			}
			// After the deadline the un-acked jobs come back, each once.
			for durNowMs() <= first+ackTimeout/10 {
				time.Sleep(50 * time.Millisecond)
			}
			back := durPopAll(t, c, "q", n/2)
			for _, id := range back {
				if acked[id] {
					t.Fatalf("acked job %s came back", id)
				}
			}
			if len(slices.Compact(slices.Sorted(slices.Values(back)))) != n/2 {
				t.Fatalf("%d distinct jobs came back, want %d", len(slices.Compact(slices.Sorted(slices.Values(back)))), n/2)
			}
			expect(t, c, nil, "DELAY.GET", "q", got[0])
			expect(t, c, nil, "DELAY.POP", "q", "0.1") // nothing else
		})
	}
}
