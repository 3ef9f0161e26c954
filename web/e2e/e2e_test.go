// Package e2e drives the dashboard in a real browser: Debian's chromium,
// through playwright-core (installed with npm ci in this folder), against
// the real binary. dashboard.js clicks through every page and action; it
// asks this test to run commands with go-redis (lines "RESP [args...]" on
// its stdout, a JSON reply on its stdin) and checks what the page shows
// against what RESP says.
//
// TestDashboardOnAFollower does the same on a follower of a 3-node
// cluster; TestFollowerPagesOverHTTP checks a follower's pages with plain
// HTTP, so that much runs without a browser.
//
// Chromium or the node modules missing: the browser tests skip, unless
// DELAYD_COMPAT_REQUIRE=1 (set by .ci/run), when they fail.
// DELAYD_SCREENSHOTS=1 also saves each page's screenshot in docs/img/.
// DELAYD_E2E_BIG=1 runs only the size check: 1M pending jobs in 10k
// queues, then the first page's weight and load time.
package e2e

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
)

var require = os.Getenv("DELAYD_COMPAT_REQUIRE") == "1"

// moduleRoot is the repository root (this package is <root>/web/e2e).
func moduleRoot(t *testing.T) string {
	root, err := testserver.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// missing skips the test, or fails it when CI requires every tool.
func missing(t *testing.T, what string) {
	t.Helper()
	if require {
		t.Fatalf("%s is not installed (DELAYD_COMPAT_REQUIRE=1)", what)
	}
	t.Skipf("%s is not installed", what)
}

// tools finds node, chromium and playwright-core.
func tools(t *testing.T) (nodeBin, chromium string) {
	t.Helper()
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		missing(t, "node (apt-get install nodejs npm)")
	}
	chromium = os.Getenv("DELAYD_CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		missing(t, chromium+" (apt-get install chromium)")
	}
	if _, err := os.Stat(filepath.Join("node_modules", "playwright-core", "package.json")); err != nil {
		missing(t, "playwright-core (run npm ci in web/e2e)")
	}
	return nodeBin, chromium
}

// ports are this package's (integration_test and compat have their own
// ranges; see testserver's package comment).
var ports = testserver.NewPorts(testserver.E2EPorts)

// server is the real binary, with the HTTP side on.
type server struct {
	*testserver.Server
	addr, http string
}

// built is the binary, built once per test binary run and only when a test
// starts a server (every test may skip).
var built struct {
	once   sync.Once
	bin    string
	remove func()
	err    error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.remove != nil {
		built.remove()
	}
	os.Exit(code)
}

func buildBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() { built.bin, built.remove, built.err = testserver.Build(moduleRoot(t), false) })
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

func startServer(t *testing.T, extra ...string) *server {
	t.Helper()
	return startNode(t, 0, func([]int) []string {
		return append([]string{"--appendonly", "yes", "--appendfsync", "no"}, extra...)
	})
}

// startNode starts the binary on free ports, RESP and HTTP and extra ones
// (a cluster node's bus), with the common flags plus what flags returns for
// the extra ports, and waits for PING and then /readyz.
func startNode(t *testing.T, extra int, flags func(extra []int) []string) *server {
	t.Helper()
	bin := buildBinary(t)
	dir := t.TempDir()
	s, err := testserver.StartFresh(ports, 2+extra, func(p []int) *server {
		port, hport := p[0], p[1]
		args := []string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port),
			"--http-addr", fmt.Sprintf("127.0.0.1:%d", hport), "--dir", dir,
			"--log-format", "json", "--log-level", "warn"}
		ts := testserver.New(bin, port, dir, append(args, flags(p[2:])...)...)
		ts.ReadyWithin = 20 * time.Second
		return &server{Server: ts, addr: ts.Addr(), http: fmt.Sprintf("http://127.0.0.1:%d", hport)}
	})
	if err != nil {
		if s != nil {
			t.Logf("server output:\n%s", s.Output())
		}
		t.Fatalf("server did not start: %v", err)
	}
	testserver.Watch(t, s.Server, false)
	if err := s.waitReady(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	return s
}

// waitReady waits until /readyz answers 200.
func (s *server) waitReady(within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		resp, err := http.Get(s.http + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("/readyz not 200 within %v: %v", within, err)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// plain turns a go-redis reply into JSON-friendly values: maps with string
// keys, bulk strings as strings.
func plain(v any) any {
	switch x := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, val := range x {
			m[fmt.Sprint(k)] = plain(val)
		}
		return m
	case map[string]any:
		for k, val := range x {
			x[k] = plain(val)
		}
		return x
	case []any:
		for i := range x {
			x[i] = plain(x[i])
		}
		return x
	}
	return v
}

// runScript runs dashboard.js and answers its RESP requests.
func runScript(t *testing.T, nodeBin, chromium string, s *server, rdb *redis.Client, env ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, nodeBin, "dashboard.js")
	cmd.Env = append(os.Environ(), "DELAYD_E2E_URL="+s.http, "DELAYD_E2E_CHROMIUM="+chromium,
		"DELAYD_E2E_SHOTS="+filepath.Join(moduleRoot(t), "docs", "img"))
	cmd.Env = append(cmd.Env, env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr testserver.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	enc := json.NewEncoder(stdin)
	for sc.Scan() {
		line := sc.Text()
		kind, req, ok := strings.Cut(line, " ")
		if !ok || (kind != "RESP" && kind != "RESPN") {
			t.Log(line)
			continue
		}
		reply := map[string]any{}
		if kind == "RESP" {
			var args []any
			if err := json.Unmarshal([]byte(req), &args); err != nil {
				reply["error"] = "bad request: " + err.Error()
			} else {
				v, err := rdb.Do(ctx, decodeArgs(args)...).Result()
				setReply(reply, v, err)
			}
		} else {
			var cmds [][]any
			if err := json.Unmarshal([]byte(req), &cmds); err != nil {
				reply["error"] = "bad request: " + err.Error()
			} else {
				p := rdb.Pipeline()
				out := make([]*redis.Cmd, len(cmds))
				for i, c := range cmds {
					out[i] = p.Do(ctx, decodeArgs(c)...)
				}
				_, _ = p.Exec(ctx)
				values := make([]any, len(out))
				for i, c := range out {
					r := map[string]any{}
					setReply(r, c.Val(), c.Err())
					if e, bad := r["error"]; bad {
						reply["error"] = fmt.Sprintf("command %d %v: %v", i, cmds[i], e)
					}
					values[i] = r["value"]
				}
				if _, bad := reply["error"]; !bad {
					reply["value"] = values
				}
			}
		}
		if err := enc.Encode(reply); err != nil {
			t.Errorf("answering the script: %v", err)
		}
	}
	err = cmd.Wait()
	if e := strings.TrimSpace(stderr.String()); e != "" {
		t.Logf("script stderr:\n%s", e)
	}
	if err != nil {
		t.Fatalf("dashboard.js: %v", err)
	}
}

// decodeArgs turns the script's arguments into go-redis's: {"hex": "..."}
// is bytes, so a script can send any payload.
func decodeArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = a
		if m, ok := a.(map[string]any); ok {
			if h, ok := m["hex"].(string); ok {
				b, _ := hex.DecodeString(h)
				out[i] = b
			}
		}
	}
	return out
}

func setReply(reply map[string]any, v any, err error) {
	switch {
	case err == redis.Nil:
		reply["value"] = nil
	case err != nil:
		reply["error"] = err.Error()
	default:
		reply["value"] = plain(v)
	}
}

func client(t *testing.T, s *server) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: s.addr, Protocol: 3, ClientName: "e2e-go"})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// TestDashboardInBrowser clicks through every page and action.
func TestDashboardInBrowser(t *testing.T) {
	if os.Getenv("DELAYD_E2E_BIG") == "1" {
		t.Skip("DELAYD_E2E_BIG=1 runs only TestDashboardFirstPageAtScale")
	}
	nodeBin, chromium := tools(t)
	s := startServer(t)
	rdb := client(t, s)
	crossOriginRefused(t, s, rdb)
	runScript(t, nodeBin, chromium, s, rdb)
}

// crossOriginRefused: a form on another site cannot press a button.
func crossOriginRefused(t *testing.T, s *server, rdb *redis.Client) {
	t.Helper()
	ctx := context.Background()
	if err := rdb.Do(ctx, "DELAY.ADD", "csrf", "0", "x", "ID", "j").Err(); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", s.http+"/action?op=cancel&key=csrf&id=j&back=/",
		strings.NewReader("confirmed=1"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://evil.example")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site POST /action: %d, want 403", resp.StatusCode)
	}
	if n, err := rdb.Exists(ctx, "csrf").Result(); err != nil || n != 1 {
		t.Fatalf("the job of a refused cross-site cancel is gone: %v %v", n, err)
	}
	if err := rdb.Del(ctx, "csrf").Err(); err != nil {
		t.Fatal(err)
	}
}

// TestDashboardFirstPageAtScale measures the overview's weight and load
// time with 1M pending jobs in 10k queues (DELAYD_E2E_BIG=1; it takes
// about a minute, most of it adding the jobs).
func TestDashboardFirstPageAtScale(t *testing.T) {
	if os.Getenv("DELAYD_E2E_BIG") != "1" {
		t.Skip("set DELAYD_E2E_BIG=1 to load 1M jobs in 10k queues and measure the first page")
	}
	nodeBin, chromium := tools(t)
	s := startServer(t)
	rdb := client(t, s)
	ctx := context.Background()
	const queues, jobs = 10_000, 1_000_000
	start := time.Now()
	const batch = 2000
	for i := 0; i < jobs; i += batch {
		p := rdb.Pipeline()
		for j := i; j < i+batch; j++ {
			p.Do(ctx, "DELAY.ADD", fmt.Sprintf("queue-%05d", j%queues), strconv.Itoa(60_000+j), "payload of job "+strconv.Itoa(j))
		}
		if _, err := p.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("added %d jobs in %d queues in %v", jobs, queues, time.Since(start).Round(time.Millisecond))
	runScript(t, nodeBin, chromium, s, rdb, "DELAYD_E2E_MODE=big")
}

// startCluster starts three nodes, the first the leader, and waits until
// both others follow it.
func startCluster(t *testing.T) []*server {
	t.Helper()
	var nodes []*server
	_, err := testserver.FormCluster(3, 30*time.Second, func(how ...string) (*testserver.Server, error) {
		s := startNode(t, 1, func(bus []int) []string { return append(testserver.ClusterFlags(bus[0]), how...) })
		nodes = append(nodes, s)
		return s.Server, nil
	})
	if err != nil {
		t.Fatalf("the cluster did not form: %v", err)
	}
	return nodes
}

// TestDashboardOnAFollower: a follower's pages show the leader's data
// (their own copy of it), say whose it is, link to the leader's
// dashboard, and offer no action.
func TestDashboardOnAFollower(t *testing.T) {
	if os.Getenv("DELAYD_E2E_BIG") == "1" {
		t.Skip("DELAYD_E2E_BIG=1 runs only TestDashboardFirstPageAtScale")
	}
	nodeBin, chromium := tools(t)
	nodes := startCluster(t)
	leader, follower := nodes[0], nodes[1]
	rdb := client(t, leader)
	runScript(t, nodeBin, chromium, follower, rdb, "DELAYD_E2E_MODE=follower",
		"DELAYD_E2E_LEADER="+leader.addr, "DELAYD_E2E_LEADER_URL="+leader.http)
}

// TestFollowerPagesOverHTTP checks a follower's pages without a browser
// (it runs wherever Go does): the leader's counts, the banner naming the
// leader, no redirection shown, no action offered, a post refused.
func TestFollowerPagesOverHTTP(t *testing.T) {
	if os.Getenv("DELAYD_E2E_BIG") == "1" {
		t.Skip("DELAYD_E2E_BIG=1 runs only TestDashboardFirstPageAtScale")
	}
	nodes := startCluster(t)
	leader, follower := nodes[0], nodes[2]
	rdb := client(t, leader)
	ctx := context.Background()
	for i := range 20 {
		if err := rdb.Do(ctx, "DELAY.ADD", "q20", strconv.Itoa(3_600_000+i), fmt.Sprint("job ", i), "ID", fmt.Sprint("j", i)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	page := func(path string) string {
		resp, err := http.Get(follower.http + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s on the follower: %d %s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(page("/queue?key=q20"), `data-k="delayed" value="20"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the follower's queue page never shows the 20 delayed jobs:\n%s", page("/queue?key=q20"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, path := range []string{"/", "/queues", "/queue?key=q20", "/schedules", "/job?key=q20&id=j3"} {
		body := page(path)
		if !strings.Contains(body, `<code data-k="leader">`+leader.addr+`</code>`) {
			t.Errorf("%s: no banner naming the leader %s", path, leader.addr)
		}
		for _, bad := range []string{"MOVED", "CLUSTERDOWN", `data-op=`, `type="checkbox"`} {
			if strings.Contains(body, bad) {
				t.Errorf("%s on a follower shows %s", path, bad)
			}
		}
	}
	if body := page("/job?key=q20&id=j3"); !strings.Contains(body, `data-field="state">delayed</td>`) {
		t.Errorf("the follower's job page does not read the job")
	}
	if body := page("/job/payload?key=q20&id=j3"); body != "job 3" {
		t.Errorf("the follower's payload download: %q, want %q", body, "job 3")
	}
	req, _ := http.NewRequest("POST", follower.http+"/action?op=cancel&key=q20&id=j3&back=/", strings.NewReader("confirmed=1"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n, err := rdb.Do(ctx, "DELAY.CANCEL", "q20", "j3").Int(); resp.StatusCode != http.StatusConflict || err != nil || n != 1 {
		t.Fatalf("a cancel posted to the follower: %d, and then the job was there: %d %v", resp.StatusCode, n, err)
	}
}
