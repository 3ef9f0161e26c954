package fromredis

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayd/delayd/internal/testserver"
	"github.com/delayd/delayd/transfer"
)

// freePort returns a port the kernel had free a moment ago. These tests
// never restart a server on its port, so the ephemeral range, which
// testserver's ranges keep clear of for that reason, is safe here, and
// keeps clear of the ranges of the packages that do.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startRedis starts a redis-server of its own, without persistence, and
// returns its address; the test fails when there is none to start, as
// CI installs it (.ci/run).
func startRedis(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server is needed (Debian's redis-server): %v", err)
	}
	for try := 0; ; try++ {
		port := freePort(t)
		s := testserver.New(bin, port, t.TempDir(), "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no")
		err := s.Start()
		if err == nil {
			t.Cleanup(func() { s.Stop(5 * time.Second) })
			return s.Addr()
		}
		if try == 2 {
			t.Fatalf("redis-server did not start: %v\n%s", err, s.Output())
		}
	}
}

var (
	buildOnce sync.Once
	delaydBin string
	buildErr  error
)

// startDelayd starts the delayd of this tree (built once per run, or the
// binary in DELAYD_IT_BIN) on a port of its own, log off.
func startDelayd(t testing.TB) *testserver.Server {
	t.Helper()
	buildOnce.Do(func() { delaydBin, _, buildErr = testserver.Binary("DELAYD_IT_BIN", false) })
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	for try := 0; ; try++ {
		port := freePort(t)
		s := testserver.New(delaydBin, port, t.TempDir(), "--bind", "127.0.0.1", "--http-addr", "",
			"--port", strconv.Itoa(port), "--dir", t.TempDir(), "--appendonly", "no",
			"--log-level", "warn", "--log-format", "json")
		s.Env = testserver.CleanEnv()
		err := s.Start()
		if err == nil {
			t.Cleanup(func() { s.Stop(5 * time.Second) })
			return s
		}
		if try == 2 {
			t.Fatalf("delayd did not start: %v\n%s", err, s.Output())
		}
	}
}

// sink sends each job to delayd as DELAY.ADDAT queue due payload ID id
// [RETRY n] [ACKTIMEOUT ms], pipelined 1000 to a round trip: the emit of
// `delayd import --from-redis`, in small.
type sink struct {
	c    *redis.Client
	pipe redis.Pipeliner
	n    int
}

func newSink(addr string) *sink {
	c := redis.NewClient(&redis.Options{Addr: addr})
	return &sink{c: c, pipe: c.Pipeline()}
}

func (s *sink) emit(j transfer.Job) error {
	payload := j.Payload
	if j.PayloadBase64 != "" {
		b, err := base64.StdEncoding.DecodeString(j.PayloadBase64)
		if err != nil {
			return err
		}
		payload = string(b)
	}
	args := []any{"DELAY.ADDAT", j.Queue, j.Due, payload, "ID", j.ID}
	switch {
	case j.Retry > 0:
		args = append(args, "RETRY", j.Retry)
	case j.Retry == noRetry:
		args = append(args, "RETRY", 0)
	}
	if j.AckTimeout > 0 {
		args = append(args, "ACKTIMEOUT", j.AckTimeout)
	}
	s.pipe.Do(context.Background(), args...)
	if s.n++; s.n%1000 == 0 {
		return s.flush()
	}
	return nil
}

func (s *sink) flush() error {
	cmds, err := s.pipe.Exec(context.Background())
	if err == redis.Nil {
		err = nil // an id that exists: nothing changed, as a rerun wants
	}
	for _, c := range cmds {
		if e := c.Err(); e != nil && e != redis.Nil && err == nil {
			err = e
		}
	}
	return err
}

// want is one line of a generator's manifest.
type want struct {
	queue, id string
	due       int64
	retry     int64 // the library's limit, as it counts
	done      int64 // runs made
	name      string
}

func readManifest(t testing.TB, path string) []want {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ws []want
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p := strings.Split(sc.Text(), "\t")
		if len(p) != 6 {
			t.Fatalf("%s: bad line %q", path, sc.Text())
		}
		w := want{queue: p[0], id: p[1], name: p[5]}
		w.due, _ = strconv.ParseInt(p[2], 10, 64)
		w.retry, _ = strconv.ParseInt(p[3], 10, 64)
		w.done, _ = strconv.ParseInt(p[4], 10, 64)
		ws = append(ws, w)
	}
	return ws
}

// got is a job as delayd holds it (DELAY.GET).
type got struct {
	due     int64
	payload string
	state   string
}

// fetch reads the jobs of ws from delayd, pipelined; a job delayd does not
// hold is absent from the map.
func fetch(t testing.TB, addr string, ws []want) map[string]got {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
	defer c.Close()
	out := map[string]got{}
	ctx := context.Background()
	for s := 0; s < len(ws); s += 1000 {
		part := ws[s:min(len(ws), s+1000)]
		pipe := c.Pipeline()
		cmds := make([]*redis.Cmd, len(part))
		for i, w := range part {
			cmds[i] = pipe.Do(ctx, "DELAY.GET", w.queue, w.id)
		}
		pipe.Exec(ctx)
		for i, w := range part {
			v, err := cmds[i].Slice()
			if err == redis.Nil {
				continue
			}
			if err != nil {
				t.Fatalf("DELAY.GET %s %s: %v", w.queue, w.id, err)
			}
			var g got
			for k := 0; k+1 < len(v); k += 2 {
				val := fmt.Sprint(v[k+1])
				switch v[k] {
				case "due":
					g.due, _ = strconv.ParseInt(val, 10, 64)
				case "payload":
					g.payload = val
				case "state":
					g.state = val
				}
			}
			out[w.queue+"\x00"+w.id] = g
		}
	}
	return out
}

// held counts the jobs delayd holds in queues, in any state.
func held(t testing.TB, addr string, queues ...string) int64 {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
	defer c.Close()
	var n int64
	for _, q := range queues {
		v, err := c.Do(context.Background(), "DELAY.STATS", q).Slice()
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k+1 < len(v); k += 2 {
			if f := v[k]; f == "delayed" || f == "ready" || f == "reserved" {
				n += v[k+1].(int64)
			}
		}
	}
	return n
}

// rivals is the bench/rivals module, where the generators live.
func rivals(t testing.TB) string {
	t.Helper()
	root, err := testserver.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "bench", "rivals")
}
