package deploy

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// containerRequired makes a machine that cannot build or run the image fail
// the container test instead of skipping it.
var containerRequired = os.Getenv("DELAYD_CONTAINER_REQUIRE") == "1"

// skipContainer skips, or fails under DELAYD_CONTAINER_REQUIRE=1, saying
// what the machine lacks.
func skipContainer(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if containerRequired {
		t.Fatal(msg + " (DELAYD_CONTAINER_REQUIRE=1)")
	}
	t.Skip(msg + " (DELAYD_CONTAINER_REQUIRE=1 makes this a failure)")
}

// sandboxRunArgs are podman run flags for machines that refuse what podman
// asks by default: crun refuses a hybrid cgroup v1/v2 mount, and setrlimit
// to podman's default open-file and process limits is refused where they
// exceed the machine's own (this machine's: see docs/operations.md). They
// change the host's side, never the image.
func sandboxRunArgs() []string {
	var args []string
	if _, err := exec.LookPath("runc"); err == nil {
		args = append(args, "--runtime", "runc")
	}
	nofile := uint64(10000)
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil && lim.Max < nofile {
		nofile = lim.Max
	}
	return append(args, "--ulimit", fmt.Sprintf("nofile=%d:%d", nofile, nofile), "--ulimit", "nproc=4096:4096")
}

// The image built from deploy/container/Containerfile and the release
// binary runs as a non-root user, listens on every interface with the
// health endpoints open, keeps its log in the /data volume across a
// container stop and start, and stops cleanly on podman stop.
func TestContainerImage(t *testing.T) {
	builder := ""
	for _, b := range []string{"podman", "buildah"} {
		if _, err := exec.LookPath(b); err == nil {
			builder = b
			break
		}
	}
	if builder == "" {
		skipContainer(t, "neither podman nor buildah is installed (Debian: apt-get install podman)")
	}
	dist := releaseDist(t)
	if _, err := os.Stat(filepath.Join(dist, "delayd-"+testVersion+"-linux-amd64")); err != nil {
		t.Fatal(err)
	}
	tag := fmt.Sprintf("localhost/delayd-test:%d", os.Getpid())
	start := time.Now()
	out, err := exec.Command(builder, "build", "--layers=false", "-f", "container/Containerfile",
		"--build-arg", "VERSION="+testVersion, "-t", tag, dist).CombinedOutput()
	if err != nil {
		// FROM scratch needs no registry and runs nothing: a failure here is
		// the image's, not the machine's.
		t.Fatalf("%s build: %v\n%s", builder, err, out)
	}
	t.Logf("%s build: %s", builder, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() { exec.Command(builder, "rmi", "-f", tag).Run() })

	format := "{{.C.User}}|{{range $k, $v := .C.Volumes}}{{$k}} {{end}}|{{range $k, $v := .C.ExposedPorts}}{{$k}} {{end}}"
	inspect := []string{"image", "inspect", "--format", strings.ReplaceAll(format, ".C.", ".Config.")}
	if builder == "buildah" {
		inspect = []string{"inspect", "--type", "image", "--format", strings.ReplaceAll(format, ".C.", ".OCIv1.Config.")}
	}
	config, err := exec.Command(builder, append(inspect, tag)...).Output()
	if err != nil {
		t.Fatalf("%s inspect %s: %v", builder, tag, err)
	}
	if got, want := strings.TrimSpace(string(config)), "65532:65532|/data |16380/tcp 6380/tcp 6381/tcp"; got != want {
		t.Errorf("image user|volumes|ports = %q, want %q", got, want)
	}
	if builder != "podman" {
		skipContainer(t, "the image builds; running it needs podman, and only buildah is installed")
	}

	volume := fmt.Sprintf("delayd-test-%d", os.Getpid())
	t.Cleanup(func() { exec.Command("podman", "volume", "rm", "-f", volume).Run() })
	port, httpPort := freePort(t), freePort(t)
	name := fmt.Sprintf("delayd-test-%d", os.Getpid())
	run := func(extra []string) ([]byte, error) {
		args := append([]string{"run", "-d", "--name", name}, extra...)
		args = append(args,
			"-p", fmt.Sprintf("127.0.0.1:%d:6380", port),
			"-p", fmt.Sprintf("127.0.0.1:%d:6381", httpPort),
			"-v", volume+":/data", tag)
		exec.Command("podman", "rm", "-f", name).Run()
		return exec.Command("podman", args...).CombinedOutput()
	}
	var runArgs []string
	if env := os.Getenv("DELAYD_PODMAN_RUN_ARGS"); env != "" {
		runArgs = strings.Fields(env)
	}
	out, err = run(runArgs)
	if err != nil && runArgs == nil {
		first := strings.TrimSpace(string(out))
		runArgs = sandboxRunArgs()
		if out, err = run(runArgs); err == nil {
			t.Logf("podman run as it is failed here (%s); it ran with %s", first, strings.Join(runArgs, " "))
		}
	}
	if err != nil {
		skipContainer(t, "podman cannot run a container on this machine: %v: %s", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { exec.Command("podman", "rm", "-f", name).Run() })

	logs := func() string {
		b, _ := exec.Command("podman", "logs", name).CombinedOutput()
		return string(b)
	}
	// The probes a kubelet would make, through the published port: open
	// without credentials, and ready once the log is loaded.
	waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/healthz", httpPort), http.StatusOK)
	waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/readyz", httpPort), http.StatusOK)
	// A client from outside the container's loopback (the published port)
	// gets in: protected mode is off in the image.
	c := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), MaxRetries: 3, Protocol: 2})
	defer c.Close()
	if err := c.Do(t.Context(), "DELAY.ADD", "q", "600000", "kept", "ID", "k1").Err(); err != nil {
		t.Fatalf("DELAY.ADD through the published port: %v\n%s", err, logs())
	}
	if v, err := c.Info(t.Context(), "server").Result(); err != nil || !strings.Contains(v, "delayd_version:"+testVersion) {
		t.Errorf("INFO server (%v) does not say delayd_version:%s", err, testVersion)
	}

	// podman stop sends STOPSIGNAL (SIGTERM): the server flushes and exits 0.
	if out, err := exec.Command("podman", "stop", "-t", "30", name).CombinedOutput(); err != nil {
		t.Fatalf("podman stop: %v: %s", err, out)
	}
	if code, _ := exec.Command("podman", "inspect", "--format", "{{.State.ExitCode}}", name).Output(); strings.TrimSpace(string(code)) != "0" {
		t.Errorf("exit code after podman stop: %s, want 0\n%s", code, logs())
	}
	// The log is in the volume, written by the image's user, not root.
	mount, err := exec.Command("podman", "volume", "inspect", "--format", "{{.Mountpoint}}", volume).Output()
	if err == nil {
		fi, err := os.Stat(filepath.Join(strings.TrimSpace(string(mount)), "delayd.aof"))
		if err != nil {
			t.Errorf("no log in the volume: %v\n%s", err, logs())
		} else if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 65532 {
			t.Errorf("the log in the volume is owned by uid %d, want 65532", st.Uid)
		}
	}

	// A new container on the same volume has the job.
	if out, err := run(runArgs); err != nil {
		t.Fatalf("podman run again: %v: %s", err, out)
	}
	waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/readyz", httpPort), http.StatusOK)
	got, err := c.Do(t.Context(), "DELAY.GET", "q", "k1").Slice()
	if err != nil || len(got) < 2 || got[1] != "k1" {
		t.Errorf("DELAY.GET q k1 after a new container on the volume: %v %v\n%s", got, err, logs())
	}
}
