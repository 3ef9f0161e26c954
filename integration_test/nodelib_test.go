package integration

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayd/delayd/internal/testserver"
)

// The Node library's own tests (clients/node/test, node:test) run here
// against the real server, so go test runs them with the rest: this file
// starts the server, or a 3-node cluster whose leader the Node test has
// killed (a POST to a URL it is given) while a Node worker process works,
// and runs node --test. Without node or clients/node's npm ci the tests
// skip, unless DELAYD_COMPAT_REQUIRE=1 (CI), as compat's do.

// nodeLib returns node's path and clients/node's directory, or skips (fails
// with DELAYD_COMPAT_REQUIRE=1) when either is missing.
func nodeLib(t *testing.T) (node, dir string) {
	t.Helper()
	root, err := testserver.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(root, "clients", "node")
	missing := func(what string) {
		t.Helper()
		if os.Getenv("DELAYD_COMPAT_REQUIRE") == "1" {
			t.Fatalf("%s is not installed (DELAYD_COMPAT_REQUIRE=1)", what)
		}
		t.Skipf("%s is not installed (DELAYD_COMPAT_REQUIRE=1 makes this a failure)", what)
	}
	node, err = exec.LookPath("node")
	if err != nil {
		missing("node (apt-get install nodejs npm)")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "ioredis")); err != nil {
		missing("ioredis for clients/node (npm ci in clients/node)")
	}
	return node, dir
}

// runNodeTests runs node --test on files of clients/node/test with env
// added, and fails the test with node's report if any fails.
func runNodeTests(t *testing.T, node, dir string, env []string, files ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := []string{"--test"}
	for _, f := range files {
		args = append(args, filepath.Join("test", f))
	}
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = dir
	// The node tests read the address from the environment; nothing of
	// the parent's DELAYD_ variables may point them elsewhere.
	cmd.Env = append(cleanEnv(), env...)
	began := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil || verbose {
		t.Logf("node %s (%v):\n%s", strings.Join(args, " "), time.Since(began).Round(time.Millisecond), out)
	}
	if err != nil {
		t.Fatalf("node --test: %v", err)
	}
	// A run whose tests all skipped (no address reached them) proves nothing.
	if !strings.Contains(string(out), "\n# fail 0\n") || !strings.Contains(string(out), "\n# skipped 0\n") {
		t.Fatalf("node --test: not every test ran and passed:\n%s", out)
	}
}

func TestNodeLibrary(t *testing.T) {
	t.Parallel()
	node, dir := nodeLib(t)
	s := startServer(t)
	runNodeTests(t, node, dir, []string{"DELAYD_TEST_ADDR=" + s.Addr()}, "worker.test.js")
}

func TestNodeLibraryClusterFailover(t *testing.T) {
	node, dir := nodeLib(t)
	cc := clStart(t, 3)
	var addrs []string
	for _, n := range cc.nodes {
		addrs = append(addrs, n.Addr())
	}

	// The Node test asks for the fault when its load is under way: one
	// POST kills the leader (SIGKILL) and names it.
	var once sync.Once
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST kills the leader", http.StatusMethodNotAllowed)
			return
		}
		status, msg := http.StatusConflict, "the leader was killed already"
		once.Do(func() {
			leader, why := cc.leaderNow()
			if leader == nil {
				status, msg = http.StatusServiceUnavailable, "no leader: "+why
				return
			}
			leader.Kill9()
			status, msg = http.StatusOK, fmt.Sprintf("%v", leader)
			t.Logf("killed the leader, %v", leader)
		})
		w.WriteHeader(status)
		fmt.Fprint(w, msg)
	})}
	go srv.Serve(ln)
	defer srv.Close()

	runNodeTests(t, node, dir, []string{
		"DELAYD_TEST_CLUSTER=" + strings.Join(addrs, ","),
		"DELAYD_TEST_FAULT=http://" + ln.Addr().String() + "/kill-leader",
	}, "cluster.test.js")
}
