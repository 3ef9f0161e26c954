package integration

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SPEC "Durability": a torn or damaged log, and BGREWRITEAOF under load,
// while being killed, and under churn (helpers in durability_test.go).

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
		since := len(s.Output()) // where this start's output begins
		out, err := durStart(t, s)
		if err != nil {
			t.Fatalf("%s: the server did not start: %v\n%s", d.name, err, out)
		}
		// The warning is logged before the server answers, but it reaches
		// s.out through a pipe copier that may lag the PING: wait for it.
		for wait := time.Now().Add(5 * time.Second); !strings.Contains(strings.ToLower(out), "torn") && time.Now().Before(wait); {
			time.Sleep(10 * time.Millisecond)
			out = s.Output()[since:]
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
		t.Fatalf("%d producer/consumer errors during the rewrites (server running: %v)", errs.Load(), s.Running())
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
	dir := durDir(t, s)
	before := logBytes(t, dir)
	expect(t, c, anyReply{}, "BGREWRITEAOF")
	durWaitRewriteDone(t, s, 30*time.Second)
	size := logBytes(t, dir)
	t.Logf("log: %d bytes before the rewrite, %d after", before, size)
	if size >= 64<<10 {
		t.Errorf("log is %d bytes after BGREWRITEAOF with nothing pending (before: %d); want < 64 KiB", size, before)
	}
	// INFO persistence follows the new file (allowing a moment after
	// aof_rewrite_in_progress:0 for the size to be published)
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		v, _ := s.info("persistence", "aof_current_size")
		if v == strconv.FormatInt(size, 10) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("INFO persistence aof_current_size = %s 2 s after the rewrite ended, the log has %d bytes", v, size)
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
