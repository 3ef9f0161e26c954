package integration

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayd/delayd/engine"
)

// SPEC "Transactions and the keyspace": while the log replays at start,
// connections are accepted and commands get LOADING (clients retry on it);
// progress is logged every second.

const loadingErr = "LOADING delayd is loading the dataset in memory"

// loadingJobs is a log that takes the server a while to replay: about 0.4 s
// here (1.2 s built with -race, where half as many do): long enough to talk
// to a loading server, short enough for CI. The tests pause the process
// (SIGSTOP) to see what a longer replay shows, rather than write a bigger log.
func loadingJobs() int {
	if os.Getenv("DELAYD_IT_RACE") == "1" {
		return 150_000
	}
	return 300_000
}

// writeLog writes, through the engine as a server would, a log of n jobs
// delayed by an hour in queues q0..q15 into dir, and returns its size.
func writeLog(t *testing.T, dir string, n int) int64 {
	t.Helper()
	e, err := engine.New(engine.Options{AppendOnly: true, Dir: dir, Fsync: engine.FsyncNo})
	if err != nil {
		t.Fatal(err)
	}
	p := []byte("payload-16-bytes")
	var last uint64
	for i := range n {
		res, err := e.Add(engine.AddArgs{Queue: []byte("q" + strconv.Itoa(i%16)), Delay: 3_600_000, Payload: p, AckTimeout: -1, Retry: -1})
		if err != nil {
			t.Fatal(err)
		}
		last = res.Ticket
	}
	if err := e.WaitDurable(last); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	return logBytes(t, dir)
}

// startLoading starts the server on the log in dir at info level and
// returns, without waiting for the load, a raw connection that got LOADING
// for a PING. It fails the test if the load was over first.
func startLoading(t *testing.T, dir string) (*server, *rawConn) {
	t.Helper()
	port := freePort(t)
	s := newServer(t, port, nil, "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir,
		"--appendonly", "yes", "--auto-rewrite-percentage", "0", "--log-level", "info", "--log-format", "json")
	if err := s.Spawn(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.Addr(), 200*time.Millisecond)
		if err == nil {
			t.Cleanup(func() { c.Close() })
			rc := &rawConn{t: t, c: c, r: bufio.NewReader(c)}
			rc.send("PING")
			if got := rc.readLine(); got != "-"+loadingErr {
				t.Fatalf("the first PING got %q, want -%s (is the log too small to see the load?)", got, loadingErr)
			}
			return s, rc
		}
		select {
		case <-s.Exited():
			t.Fatalf("the server exited (code %d) before it listened", s.ExitCode())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not listen within 10s: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// infoOf parses an INFO text into its fields.
func infoOf(text string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(strings.TrimRight(line, "\r"), ":"); ok {
			m[k] = v
		}
	}
	return m
}

// countingConn counts the times a command name is written to the server.
type countingConn struct {
	net.Conn
	name []byte
	n    *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.n.Add(int64(bytes.Count(p, c.name)))
	return c.Conn.Write(p)
}

func TestLoadingAnswersWhileTheLogReplays(t *testing.T) {
	t.Parallel()
	n := loadingJobs()
	dir := t.TempDir()
	size := writeLog(t, dir, n)

	// Once the replay is under way, a pause of more than a second, as a
	// longer log would take: the replay logs its progress once a second, and
	// INFO shows it part way. On a loaded machine the replay (a tenth of a
	// second) can end between the INFO that saw it under way and the
	// SIGSTOP; then the server starts again on the same log, up to three
	// times.
	var (
		s  *server
		rc *rawConn
		f  map[string]string
		r  resp
	)
	for attempt := 1; ; attempt++ {
		s, rc = startLoading(t, dir)
		for {
			rc.send("INFO", "persistence")
			if r = rc.read(); r.kind != '$' {
				t.Fatalf("INFO persistence while loading: %s", r)
			}
			if f = infoOf(r.str); f["loading_loaded_records"] != "0" {
				break
			}
		}
		s.Signal(syscall.SIGSTOP)
		time.Sleep(1100 * time.Millisecond)
		s.Signal(syscall.SIGCONT)
		rc.send("INFO", "persistence")
		if r = rc.read(); r.kind != '$' {
			t.Fatalf("INFO persistence while loading: %s", r)
		}
		if f = infoOf(r.str); f["loading"] == "1" || attempt == 3 {
			break
		}
		t.Logf("attempt %d: the replay was over before the SIGSTOP; starting again", attempt)
		s.Kill9()
	}
	perc, err := strconv.ParseFloat(f["loading_loaded_perc"], 64)
	if f["loading"] != "1" || f["async_loading"] != "0" || err != nil || perc <= 0 || perc >= 100 {
		t.Errorf("INFO persistence while loading: loading:%q async_loading:%q loading_loaded_perc:%q; want 1, 0 and a percent part way\n%s",
			f["loading"], f["async_loading"], f["loading_loaded_perc"], r.str)
	}
	if f["loading_total_bytes"] != strconv.FormatInt(size, 10) {
		t.Errorf("loading_total_bytes:%q, want the log's %d bytes", f["loading_total_bytes"], size)
	}
	for _, k := range []string{"loading_start_time", "loading_loaded_bytes", "loading_eta_seconds", "loading_loaded_records"} {
		if v, err := strconv.ParseInt(f[k], 10, 64); err != nil || v < 0 {
			t.Errorf("%s:%q, want a number", k, f[k])
		}
	}

	// Clients see the error as they see Redis's: go-redis as a LOADING
	// error it retries on, redis-cli printing it.
	ctx := ctxT(t, 10*time.Second)
	if err := s.Client().Ping(ctx).Err(); !redis.IsLoadingError(err) || err.Error() != loadingErr {
		t.Errorf("go-redis PING while loading: %v, want %s", err, loadingErr)
	}
	if _, err := exec.LookPath("redis-cli"); err == nil {
		if out := cli(t, s, "DELAY.STATS", "q0"); !strings.Contains(out, loadingErr) {
			t.Errorf("redis-cli DELAY.STATS while loading: %q, want %s", out, loadingErr)
		}
	}
	var sent atomic.Int64
	retrying := s.Client(func(o *redis.Options) {
		o.MaxRetries = 200
		o.MinRetryBackoff, o.MaxRetryBackoff = 5*time.Millisecond, 20*time.Millisecond
		o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return countingConn{Conn: c, name: []byte("DELAY.STATS"), n: &sent}, nil
		}
	})
	st, err := retrying.Do(ctx, "DELAY.STATS", "q0").Result()
	if err != nil {
		t.Fatalf("go-redis with retries, DELAY.STATS during the load: %v", err)
	}
	if got := asInt(t, "delayed", fields(t, "DELAY.STATS", st)["delayed"]); got != int64(n/16) {
		t.Errorf("DELAY.STATS q0 after the load: delayed %d, want %d", got, n/16)
	}
	if sent.Load() < 2 {
		t.Errorf("go-redis sent DELAY.STATS %d times: it never got LOADING to retry on", sent.Load())
	}

	// Ready: every job is there, and the log tells how the load went.
	rc.send("PING")
	if got := rc.readLine(); got != "+PONG" {
		t.Fatalf("PING after the load: %q", got)
	}
	c := s.Client()
	info, err := c.Info(ctx, "persistence", "queues").Result()
	if err != nil {
		t.Fatal(err)
	}
	if f := infoOf(info); f["loading"] != "0" || f["jobs"] != strconv.Itoa(n) || f["loading_loaded_perc"] != "" {
		t.Errorf("INFO after the load: loading:%q jobs:%q (want 0 and %d), no loading_* fields\n%s", f["loading"], f["jobs"], n, info)
	}
	for _, want := range []string{`"message":"loading the log"`, `"percent":`, `"records_per_sec":`, `"message":"log replayed"`, `"message":"delayd ready"`} {
		if !s.outputHas(want, 5*time.Second) {
			t.Errorf("the server's log has no %s", want)
		}
	}
	out := s.Output()
	if strings.Index(out, `"message":"delayd listening; loading the log"`) > strings.Index(out, `"message":"loading the log"`) {
		t.Errorf("the server did not say it listens before the progress")
	}
}

// TestLoadingSIGTERM: SIGTERM while the log loads stops the server at once
// with exit code 0, the log untouched; the next start loads every job.
func TestLoadingSIGTERM(t *testing.T) {
	t.Parallel()
	n := loadingJobs()
	dir := t.TempDir()
	writeLog(t, dir, n)
	before := readLog(t, dir)
	s, _ := startLoading(t, dir)
	start := time.Now()
	if code := s.Stop(); code != 0 {
		t.Fatalf("SIGTERM while loading: exit code %d, want 0", code)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("SIGTERM while loading took %v to stop", el)
	}
	if out := s.Output(); !strings.Contains(out, `"message":"delayd stopped while loading the log"`) {
		t.Errorf("the log does not say the server stopped while loading:\n%s", out)
	}
	if after := readLog(t, dir); !bytes.Equal(after, before) {
		t.Fatalf("stopping while loading changed the log (%d bytes, was %d)", len(after), len(before))
	}
	if err := s.Start(); err != nil {
		t.Fatalf("restart: %v", err)
	}
	info, err := s.Client().Info(ctxT(t, 60*time.Second), "queues").Result()
	if err != nil {
		t.Fatal(err)
	}
	if got := infoOf(info)["jobs"]; got != strconv.Itoa(n) {
		t.Fatalf("after a stop while loading and a restart: jobs:%s, want %d", got, n)
	}
}
