package integration

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/internal/testserver"
)

// Upgrades (docs/decisions/versions.md). The data directories each release
// left (testdata/upgrade, made once by scripts/golden-datadirs.sh from the
// release's own commit) open with this binary holding what that release
// answered before it stopped, job by job; and they go on working: written
// to, rewritten, restarted.

// golden is one release's data directory and what that release answered.
type golden struct {
	Version string           `json:"version"`
	Mode    string           `json:"mode"` // single or cluster
	Jobs    []map[string]any `json:"jobs"` // DELAY.GET of each job, as field -> value
	Queues  map[string]struct {
		Delayed   int64          `json:"delayed"`
		Ready     int64          `json:"ready"`
		Reserved  int64          `json:"reserved"`
		Peek      any            `json:"peek"`
		Schedules []any          `json:"schedules"` // 0.2.0 and later
		Limit     map[string]any `json:"limit"`     // 0.2.0 and later
	} `json:"queues"`
}

func TestUpgradeGoldenDataDirs(t *testing.T) {
	t.Parallel()
	// Every release's, as scripts/golden-datadirs.sh left them.
	names, _ := filepath.Glob(filepath.Join("testdata", "upgrade", "*.json"))
	if len(names) < 4 {
		t.Fatalf("testdata/upgrade holds %d golden data directories, want at least 0.1.0's and 0.2.0's two each", len(names))
	}
	for _, p := range names {
		name := strings.TrimSuffix(filepath.Base(p), ".json")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			g := readGolden(t, name)
			dir := t.TempDir()
			untarGz(t, filepath.Join("testdata", "upgrade", name+".tar.gz"), dir)
			s := startOnDir(t, g.Mode, dir)
			c := s.Client()
			expired := checkGolden(t, c, g)
			if expired > 0 {
				t.Logf("%d reservations of %s had passed their ack deadline: checked as the ready jobs they became", expired, name)
			}

			// It goes on: a write, a pop, a feature the release did not
			// have; a rewrite (single node); a restart; all of it kept.
			far := int64(4102444800000)
			expect(t, c, "post1", "DELAY.ADDAT", "{g}q", far+9, "p-post1", "ID", "post1")
			expect(t, c, []any{"{g}r", "r1", "p-r1"}, "DELAY.POP", "{g}r", 1)
			expect(t, c, "OK", "DELAY.PAUSE", "{g}t")
			if g.Mode == "single" {
				// The release's one log became the first segment.
				if segs := logSegments(t, dir); len(segs) != 1 || !strings.HasSuffix(segs[0], ".aof.1") {
					t.Errorf("after the first start the log is %v, want segment 1 alone", segs)
				}
				expect(t, c, "Background append only file rewriting started", "BGREWRITEAOF")
				waitRewritten(t, s)
			}
			s.Restart()
			if g.Mode == "cluster" {
				waitMaster(t, s)
			}
			c = s.Client()
			if got := checkGolden(t, c, g, "{g}q", "{g}r", "{g}t"); got != expired {
				t.Errorf("after the restart %d reservations read as expired, before it %d", got, expired)
			}
			expect(t, c, []any{"id", "post1", "queue", "{g}q", "state", "delayed", "due", far + 9, "payload", "p-post1", "deliveries", int64(0)},
				"DELAY.GET", "{g}q", "post1")
			expect(t, c, nil, "DELAY.GET", "{g}r", "r1")
			expect(t, c, int64(1), "EXISTS", "{g}r")
			if st := pairMap(t, do(t, c, "DELAY.STATS", "{g}t")); st["paused"] != "1" {
				t.Errorf("{g}t is no longer paused after the restart: DELAY.STATS %v", st)
			}
			if out := s.Output(); strings.Contains(out, `"level":"error"`) {
				t.Errorf("the server logged errors on the %s data directory:\n%s", name, out)
			}
		})
	}
}

// readGolden reads testdata/upgrade/name.json.
func readGolden(t *testing.T, name string) golden {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "upgrade", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatalf("%s.json: %v", name, err)
	}
	if len(g.Jobs) == 0 || len(g.Queues) == 0 {
		t.Fatalf("%s.json holds no jobs or no queues", name)
	}
	return g
}

// untarGz unpacks the gzipped tar at path into dir (regular files and
// directories only: what the script packs).
func untarGz(t *testing.T, path, dir string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, filepath.Clean(dir)) {
			t.Fatalf("%s: %s is outside the directory", path, h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, b, 0o644)
			}
		default:
			err = fmt.Errorf("%s: unexpected entry type %c", h.Name, h.Typeflag)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// startOnDir starts this binary on the data directory dir: a single node
// with its log, or a cluster node on its Raft data (its configuration names
// the bus port the release ran on; a one-node group elects itself anyway).
func startOnDir(t *testing.T, mode, dir string) *server {
	t.Helper()
	s, err := testserver.StartFresh(ports, 2, func(p []int) *server {
		args := []string{"--bind", "127.0.0.1", "--http-addr", "", "--port", strconv.Itoa(p[0]), "--dir", dir,
			"--log-level", "info", "--log-format", "json"}
		if mode == "cluster" {
			args = append(args, testserver.ClusterFlags(p[1])...)
		} else {
			args = append(args, "--appendonly", "yes", "--appendfsync", "always")
		}
		return newServer(t, p[0], nil, args...)
	})
	if err != nil {
		t.Fatalf("the current binary did not start on the %s data directory: %v", mode, err)
	}
	if mode == "cluster" {
		waitMaster(t, s)
	}
	return s
}

// waitMaster waits until a one-node cluster leads and takes writes; by
// then its version is raised (a group of one raises it before it leads).
func waitMaster(t *testing.T, s *server) {
	t.Helper()
	c := s.Client()
	clWait(t, 20*time.Second, "the one-node cluster leads", func() (bool, string) {
		err := c.Do(ctxT(t, 3*time.Second), "DELAY.ADDAT", "{g}probe", 4102444800000, "probe").Err()
		return err == nil, fmt.Sprint(err)
	})
	info := do(t, c, "CLUSTER", "INFO").(string)
	if v, _ := infoValue(info, "delayd_cluster_version"); v != "3" {
		t.Errorf("a one-node cluster on an old data directory leads at delayd_cluster_version:%s, want 3", v)
	}
}

// waitRewritten waits for a rewrite to finish.
func waitRewritten(t *testing.T, s *server) {
	t.Helper()
	clWait(t, 20*time.Second, "the rewrite", func() (bool, string) {
		v, _ := s.info("persistence", "aof_rewrite_in_progress")
		return v == "0", "aof_rewrite_in_progress:" + v
	})
}

// checkGolden checks every job, queue, schedule and limit g names against
// what the server answers, except the queues in changed (which the test
// itself wrote to). A reservation whose ack deadline has passed since the
// release wrote it is, as it would have been on the release, a ready job
// again with its delivery counted; it returns how many there were.
func checkGolden(t *testing.T, c *redis.Client, g golden, changed ...string) (expired int) {
	t.Helper()
	skip := map[string]bool{}
	for _, q := range changed {
		skip[q] = true
	}
	now := time.Now().UnixMilli()
	expiredIn := map[string]int64{}
	for _, want := range g.Jobs {
		q, id := want["queue"].(string), want["id"].(string)
		if skip[q] {
			continue
		}
		got := pairMap(t, do(t, c, "DELAY.GET", q, id))
		if got == nil {
			t.Errorf("%s %s: job %s of queue %s is gone", g.Version, g.Mode, id, q)
			continue
		}
		if dl, ok := want["ack_deadline"].(float64); ok && int64(dl) < now+5000 {
			if int64(dl) > now-5000 {
				continue // expiring as the test runs: either answer is right
			}
			expired++
			expiredIn[q]++
			if got["state"] != "ready" || got["deliveries"] != canon(want["deliveries"]) {
				t.Errorf("%s %s: %s %s, reserved until %d (past), reads %v; want ready with its delivery counted", g.Version, g.Mode, q, id, int64(dl), got)
			}
			continue
		}
		for k, v := range want {
			if got[k] != canon(v) {
				t.Errorf("%s %s: %s %s: %s is %q, the release said %q (all: %v)", g.Version, g.Mode, q, id, k, got[k], canon(v), got)
			}
		}
	}
	for q, want := range g.Queues {
		if skip[q] {
			continue
		}
		st := pairMap(t, do(t, c, "DELAY.STATS", q))
		for _, f := range []struct {
			name string
			want int64
		}{{"delayed", want.Delayed}, {"ready", want.Ready + expiredIn[q]}, {"reserved", want.Reserved - expiredIn[q]}} {
			if st[f.name] != strconv.FormatInt(f.want, 10) {
				t.Errorf("%s %s: queue %s: %s %s, the release said %d", g.Version, g.Mode, q, f.name, st[f.name], f.want)
			}
		}
		if expiredIn[q] == 0 {
			if got, w := canon(do(t, c, "DELAY.PEEK", q, 1000)), canon(want.Peek); got != w {
				t.Errorf("%s %s: queue %s: DELAY.PEEK %s, the release said %s", g.Version, g.Mode, q, got, w)
			}
		}
		if want.Schedules != nil {
			got, _ := do(t, c, "DELAY.SCHEDULES", q).([]any)
			if len(got) != len(want.Schedules) {
				t.Errorf("%s %s: queue %s: %d schedules, the release had %d: %v", g.Version, g.Mode, q, len(got), len(want.Schedules), got)
			}
			for i := 0; i < len(got) && i < len(want.Schedules); i++ {
				gm := pairMap(t, got[i])
				for k, v := range pairMap(t, want.Schedules[i]) {
					if gm[k] != v {
						t.Errorf("%s %s: queue %s: schedule %d: %s is %q, the release said %q", g.Version, g.Mode, q, i, k, gm[k], v)
					}
				}
			}
		}
		if len(want.Limit) > 0 {
			got := pairMap(t, do(t, c, "DELAY.LIMIT", q))
			for k, v := range want.Limit {
				if got[k] != canon(v) {
					t.Errorf("%s %s: queue %s: limit %s is %q, the release said %q", g.Version, g.Mode, q, k, got[k], canon(v))
				}
			}
		}
	}
	return expired
}

// pairMap reads a flat field-value reply (or the JSON of one) as a map of
// canonical strings; nil for a nil reply.
func pairMap(t *testing.T, v any) map[string]string {
	t.Helper()
	if v == nil {
		return nil
	}
	a, ok := v.([]any)
	if !ok || len(a)%2 != 0 {
		t.Fatalf("want a field-value array, got %#v", v)
	}
	m := make(map[string]string, len(a)/2)
	for i := 0; i < len(a); i += 2 {
		m[canon(a[i])] = canon(a[i+1])
	}
	return m
}

// canon writes a reply or a golden JSON value as one string: integers
// as integers (JSON's float64s too), a {"base64": ...} payload as its bytes,
// arrays bracketed.
func canon(v any) string {
	switch v := v.(type) {
	case nil:
		return "(nil)"
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatInt(int64(v), 10)
	case map[string]any:
		if b, ok := v["base64"].(string); ok {
			raw, err := base64.StdEncoding.DecodeString(b)
			if err == nil {
				return string(raw)
			}
		}
		return fmt.Sprint(v)
	case []any:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = canon(x)
		}
		return "[" + strings.Join(parts, " ") + "]"
	default:
		return fmt.Sprint(v)
	}
}

// Downgrades are refused, and say why: a log holding a record of a kind
// this binary does not know (what it will be for the next release's log)
// stops the start with a line naming a newer delayd, not damage: --repair
// has nothing to cut.
func TestUpgradeNewerLogRefused(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
	c := s.Client()
	expect(t, c, "a1", "DELAY.ADD", "{g}q", 3600000, "p", "ID", "a1")
	dir := s.dir(t)
	s.Stop()
	segs := logSegments(t, dir)
	path := segs[len(segs)-1]
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := aof.OpenAppend(aof.OS, path, fi.Size())
	if err != nil {
		t.Fatal(err)
	}
	w.Append([]byte{200, 2, 1, 'q'}) // op 200 at time 1 on queue q: no kind this binary knows
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := s.Spawn(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("the server started on a log of a newer delayd")
	}
	out := s.Output()
	if s.ExitCode() != 1 || !strings.Contains(out, "records of a newer delayd") || !strings.Contains(out, "a newer delayd wrote it") {
		t.Errorf("exit %d; want 1 and a line naming a newer delayd:\n%s", s.ExitCode(), out)
	}
	if i := strings.LastIndex(out, "records of a newer delayd"); strings.Contains(out[i:], "--repair") {
		t.Errorf("a log of a newer delayd is called damage:\n%s", out)
	}
}

// A data directory this release wrote (a manifest and segments) is refused
// by the previous release, with and without --repair, rather than read as
// an empty log: its manifest, named delayd.aof as the old single log was,
// reads to it as a record of a kind it does not know. This release then
// starts on the directory with every job.
func TestUpgradePreviousReleaseRefusesSegmentedLog(t *testing.T) {
	t.Parallel()
	oldBin := buildRelease(t, previousCommit)
	s := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
	c := s.Client()
	expect(t, c, "a1", "DELAY.ADD", "q", 3600000, "p", "ID", "a1")
	dir := s.dir(t)
	s.Stop()
	if segs := logSegments(t, dir); len(segs) != 1 {
		t.Fatalf("segments %v", segs)
	}
	for _, extra := range [][]string{nil, {"--repair"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		args := append([]string{"--bind", "127.0.0.1", "--port", strconv.Itoa(freePort(t)),
			"--dir", dir, "--appendonly", "yes", "--log-level", "warn"}, extra...)
		out, err := exec.CommandContext(ctx, oldBin, args...).CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		if timedOut {
			t.Fatalf("release %s %v started on a segmented log:\n%s", previousRelease, extra, out)
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() == 0 || !strings.Contains(string(out), "delayd.aof") {
			t.Fatalf("release %s %v on a segmented log: %v; want a refusal naming delayd.aof:\n%s", previousRelease, extra, err, out)
		}
		t.Logf("release %s %v: %s", previousRelease, extra, bytes.TrimSpace(out))
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if v := do(t, s.Client(), "DELAY.GET", "q", "a1"); v == nil {
		t.Fatal("the job added before the old release's attempts is gone")
	}
}
