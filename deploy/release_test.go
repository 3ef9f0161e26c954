package deploy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// testVersion is what the tests stamp: a pre-release, which release.sh
// builds from any tree and which needs no CHANGELOG section.
const testVersion = "0.0.0-ci.1"

// release is scripts/release.sh's output, built once for the package's
// tests: linux/amd64 only unless DELAYD_RELEASE_ALL=1 asks for every target
// (the full run takes minutes on a cold build cache; see docs/operations.md).
var release struct {
	once    sync.Once
	dist    string
	targets []string
	out     string
	err     error
}

// releaseDist runs the release script into a temporary directory and
// returns it, or fails the test with the script's output.
func releaseDist(t *testing.T) string {
	t.Helper()
	release.once.Do(func() {
		release.targets = []string{"linux/amd64"}
		if os.Getenv("DELAYD_RELEASE_ALL") == "1" {
			release.targets = []string{"linux/amd64", "linux/arm64", "darwin/arm64"}
		}
		// Not t.TempDir: the directory outlives this test for the others.
		release.dist, release.err = os.MkdirTemp("", "delayd-dist-")
		if release.err != nil {
			return
		}
		cmd := exec.Command("scripts/release.sh", testVersion)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "DIST="+release.dist, "TARGETS="+strings.Join(release.targets, " "))
		start := time.Now()
		out, err := cmd.CombinedOutput()
		release.out = fmt.Sprintf("%s(%s)\n", out, time.Since(start).Round(time.Second))
		release.err = err
	})
	if release.err != nil {
		t.Fatalf("scripts/release.sh %s: %v\n%s", testVersion, release.err, release.out)
	}
	return release.dist
}

func TestMain(m *testing.M) {
	code := m.Run()
	if release.dist != "" {
		os.RemoveAll(release.dist)
	}
	os.Exit(code)
}

// serverBinary is the release's linux/amd64 binary, or a skip on a machine
// that cannot run it.
func serverBinary(t *testing.T) string {
	t.Helper()
	dist := releaseDist(t)
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skipf("the release's linux/amd64 binary does not run on %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	return filepath.Join(dist, "delayd-"+testVersion+"-linux-amd64")
}

// Every binary the script built is in SHA256SUMS with its true sum, and is
// static: no program interpreter, so it runs on any Linux, FROM scratch too.
func TestReleaseBinariesAndSums(t *testing.T) {
	dist := releaseDist(t)
	t.Logf("release.sh: %s", release.out)
	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(sums))
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q is not sha256sum's format", sc.Text())
		}
		listed[name] = sum
	}
	if len(listed) != len(release.targets) {
		t.Errorf("SHA256SUMS lists %d files, want %d (%v):\n%s", len(listed), len(release.targets), release.targets, sums)
	}
	for _, target := range release.targets {
		name := "delayd-" + testVersion + "-" + strings.ReplaceAll(target, "/", "-")
		b, err := os.ReadFile(filepath.Join(dist, name))
		if err != nil {
			t.Errorf("%s: %v", target, err)
			continue
		}
		sum := sha256.Sum256(b)
		if got := hex.EncodeToString(sum[:]); listed[name] != got {
			t.Errorf("SHA256SUMS says %s for %s; its sum is %s", listed[name], name, got)
		}
		if !strings.HasPrefix(target, "linux/") {
			continue
		}
		f, err := elf.NewFile(bytes.NewReader(b))
		if err != nil {
			t.Errorf("%s: not ELF: %v", name, err)
			continue
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s has a program interpreter: it is linked dynamically, not static", name)
			}
		}
		if want := map[string]elf.Machine{"linux/amd64": elf.EM_X86_64, "linux/arm64": elf.EM_AARCH64}[target]; f.Machine != want {
			t.Errorf("%s is for %v, want %v", name, f.Machine, want)
		}
	}
}

// The release binary says its version and commit, starts, answers PING,
// and INFO's delayd_version is the version --version printed.
func TestReleaseBinaryVersionAndStart(t *testing.T) {
	bin := serverBinary(t)
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", bin, err)
	}
	line := strings.TrimSpace(string(out))
	m := regexp.MustCompile(`^delayd (\S+) commit ([0-9a-f]{40})(-dirty)? go\S+ linux/amd64$`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("--version printed %q", line)
	}
	if m[1] != testVersion {
		t.Errorf("--version says version %s, want %s", m[1], testVersion)
	}
	if head, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		if h := strings.TrimSpace(string(head)); m[2] != h {
			t.Errorf("--version says commit %s; HEAD is %s", m[2], h)
		}
	}

	s := startBinary(t, bin)
	info, err := s.client.Info(t.Context(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info, "delayd_version:"+testVersion+"\r\n") {
		t.Errorf("INFO server does not say delayd_version:%s:\n%s", testVersion, info)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		waitHTTP(t, "http://"+s.httpAddr+path, http.StatusOK)
	}
}

// running is a server started from a binary for one test.
type running struct {
	client   *redis.Client
	httpAddr string
	out      *bytes.Buffer
}

// startBinary starts bin on free loopback ports with its own data directory
// and waits until it answers PING; the test's end stops it with SIGTERM.
func startBinary(t *testing.T, bin string, args ...string) *running {
	t.Helper()
	port, httpPort := freePort(t), freePort(t)
	httpAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(httpPort))
	argv := append([]string{"--port", strconv.Itoa(port), "--dir", t.TempDir(),
		"--http-addr", httpAddr, "--log-format", "json"}, args...)
	cmd := exec.Command(bin, argv...)
	out := new(bytes.Buffer)
	cmd.Stdout, cmd.Stderr = out, out
	// The machine's own DELAYD_* settings must not reach the server.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DELAYD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	c := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	// Generous: a loaded CI machine starts a process slowly.
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			break
		}
		select {
		case <-done:
			t.Fatalf("%s %s exited before it answered PING:\n%s", bin, strings.Join(argv, " "), out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s answered no PING in 60 s (%v):\n%s", bin, err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return &running{client: c, httpAddr: httpAddr, out: out}
}

// freePort is a loopback port free at the time of asking.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitHTTP polls url until it answers want, for a minute at most.
func waitHTTP(t *testing.T, url string, want int) {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	var last string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := c.Get(url)
		if err != nil {
			last = err.Error()
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == want {
			return
		}
		last = resp.Status
	}
	t.Fatalf("GET %s: %s after a minute, want %d", url, last, want)
}

// A release version is one CHANGELOG.md has a section for: the script
// refuses any other before it builds anything.
func TestReleaseNeedsItsChangelogSection(t *testing.T) {
	dist := t.TempDir()
	cmd := exec.Command("scripts/release.sh", "99.0.0")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "DIST="+dist)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "CHANGELOG.md has no section ## [99.0.0]") {
		t.Fatalf("release.sh 99.0.0: %v, want a refusal naming CHANGELOG.md:\n%s", err, out)
	}
	if entries, _ := os.ReadDir(dist); len(entries) > 0 {
		t.Errorf("a refused release wrote %d files into DIST", len(entries))
	}
}
