package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scripts/cluster.sh as its header says a user runs it: three nodes from a
// base port in the background, one node killed and started again, the
// leader killed by that name, all stopped; status shows each node's role
// throughout.
func TestClusterScript(t *testing.T) {
	t.Parallel()
	cliPath(t) // status reads each role with redis-cli
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(filepath.Dir(wd), "scripts", "cluster.sh")
	base := scriptBasePort(t)
	data := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", append([]string{script}, args...)...)
		cmd.Env = append(cleanEnv(), "BASE_PORT="+strconv.Itoa(base), "DATA="+data, "DELAYD_BIN="+binPath)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("cluster.sh %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	t.Cleanup(func() {
		// Whatever the test left running, by the pid files the script keeps.
		files, _ := filepath.Glob(filepath.Join(data, "*", "delayd.pid"))
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
					if p, err := os.FindProcess(pid); err == nil {
						_ = p.Kill()
					}
				}
			}
		}
	})

	out := run("start")
	if want := fmt.Sprintf("delayd cluster: 3 nodes on ports %d-%d", base+1, base+3); !strings.Contains(out, want) {
		t.Fatalf("start: no %q in:\n%s", want, out)
	}
	if want := fmt.Sprintf("export DELAYD_CLUSTER=127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d\n", base+1, base+2, base+3); !strings.Contains(out, want) {
		t.Fatalf("start: no %q for the examples in:\n%s", want, out)
	}
	// status: "node N  port P  pid X  role R" or "node N  port P  stopped"
	line := regexp.MustCompile(`(?m)^node (\d)  port (\d+)  (?:pid \d+  role (\S+)|stopped)$`)
	roles := func() map[int]string {
		m := map[int]string{}
		for _, f := range line.FindAllStringSubmatch(run("status"), -1) {
			n, _ := strconv.Atoi(f[1])
			m[n] = f[3]
			if f[3] == "" {
				m[n] = "stopped"
			}
		}
		return m
	}
	// master is the node status shows master, once the others are as want.
	master := func(what string, want map[int]string) int {
		t.Helper()
		var m int
		clWait(t, 20*time.Second, what, func() (bool, string) {
			r := roles()
			m = 0
			for n, role := range r {
				if role == "master" {
					if m != 0 {
						return false, fmt.Sprint("two masters: ", r)
					}
					m = n
				}
			}
			for n, role := range want {
				if r[n] != role {
					return false, fmt.Sprint(r)
				}
			}
			return m != 0 && len(r) == 3, fmt.Sprint(r)
		})
		return m
	}
	first := master("one master, two replicas", nil)
	// A healthy start of nodes started together logs no warning: the
	// joiners ask before the bootstrap node has elected itself, and that
	// first refusal is part of the start (issue 30, item 8).
	for n := 1; n <= 3; n++ {
		b, err := os.ReadFile(filepath.Join(data, strconv.Itoa(base+n), "delayd.out"))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, `"level":"warn"`) || strings.Contains(l, `"level":"error"`) {
				t.Errorf("node %d logged on a healthy start: %s", n, l)
			}
		}
	}

	run("kill-node", strconv.Itoa(first))
	second := master(fmt.Sprintf("a new master after node %d was killed", first), map[int]string{first: "stopped"})
	if second == first {
		t.Fatalf("node %d still master after its kill", first)
	}
	run("start-node", strconv.Itoa(first))
	master(fmt.Sprintf("node %d back as a replica", first), map[int]string{first: "slave", second: "master"})

	// "leader" names whichever node is master, for a user who does not
	// know which one that is after a failover.
	if out := run("kill-node", "leader"); !strings.Contains(out, fmt.Sprintf("node %d (port %d): KILL sent", second, base+second)) {
		t.Fatalf("kill-node leader, with node %d the leader:\n%s", second, out)
	}
	master(fmt.Sprintf("a new master after the leader, node %d, was killed", second), map[int]string{second: "stopped"})

	run("stop")
	for n, role := range roles() {
		if role != "stopped" {
			t.Errorf("after stop, node %d: %s", n, role)
		}
	}
}

// scriptBasePort is a base port whose three nodes' client, dashboard
// (+1000) and bus (+10000) ports are all free, below the ephemeral range.
func scriptBasePort(t *testing.T) int {
	t.Helper()
	for range 50 {
		base := 12000 + rand.IntN(3900)
		free := true
		for n := 1; n <= 3 && free; n++ {
			for _, p := range []int{base + n, base + n + 1000, base + n + 10000} {
				ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
				if err != nil {
					free = false
					break
				}
				ln.Close()
			}
		}
		if free {
			return base
		}
	}
	t.Fatal("no free base port")
	return 0
}

// A node that cannot start (here its port is taken) makes start fail at
// once with the node's own last words, rather than report a cluster that
// is not there.
func TestClusterScriptNodeFails(t *testing.T) {
	t.Parallel()
	cliPath(t)
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	base := scriptBasePort(t)
	taken, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(base+2)))
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	data := t.TempDir()
	script := filepath.Join(filepath.Dir(wd), "scripts", "cluster.sh")
	env := append(cleanEnv(), "BASE_PORT="+strconv.Itoa(base), "DATA="+data, "DELAYD_BIN="+binPath)
	defer func() {
		stop := exec.Command("bash", script, "stop")
		stop.Env = env
		if out, err := stop.CombinedOutput(); err != nil {
			t.Errorf("cluster.sh stop: %v\n%s", err, out)
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script, "start")
	cmd.Env = env
	began := time.Now()
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("start with node 2's port taken succeeded:\n%s", out)
	}
	if took := time.Since(began); took > 20*time.Second {
		t.Errorf("start took %v to see node 2 exit", took)
	}
	for _, want := range []string{fmt.Sprintf("node 2 (port %d) exited at start", base+2), "address already in use"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("start: no %q in:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "delayd cluster: ") {
		t.Errorf("start reports a cluster:\n%s", out)
	}
}

// RAFT_GROUPS=3: the slots over three Raft groups, each led by its own
// node once start returns; a killed node's group fails over to another,
// and the node comes back as a replica in every group.
func TestClusterScriptGroups(t *testing.T) {
	t.Parallel()
	cliPath(t)
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(filepath.Dir(wd), "scripts", "cluster.sh")
	var base int
	for range 50 {
		base = 12000 + rand.IntN(3700)
		free := true
		for n := 1; n <= 3 && free; n++ {
			for _, p := range []int{base + n, base + n + 100, base + n + 200, base + n + 1000, base + n + 10000, base + n + 10100, base + n + 10200} {
				ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
				if err != nil {
					free = false
					break
				}
				ln.Close()
			}
		}
		if free {
			break
		}
	}
	data := t.TempDir()
	env := append(cleanEnv(), "BASE_PORT="+strconv.Itoa(base), "DATA="+data, "DELAYD_BIN="+binPath, "RAFT_GROUPS=3")
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", append([]string{script}, args...)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("cluster.sh %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	t.Cleanup(func() {
		stop := exec.Command("bash", script, "stop")
		stop.Env = env
		_ = stop.Run()
	})

	run("start")
	line := regexp.MustCompile(`(?m)^node (\d)  port \d+  (?:pid \d+  roles by group: (\S+) (\S+) (\S+)|stopped)$`)
	roles := func() map[int][]string {
		m := map[int][]string{}
		for _, f := range line.FindAllStringSubmatch(run("status"), -1) {
			n, _ := strconv.Atoi(f[1])
			m[n] = f[2:]
			if f[2] == "" {
				m[n] = nil
			}
		}
		return m
	}
	want := "map[1:[master slave slave] 2:[slave master slave] 3:[slave slave master]]"
	if got := fmt.Sprint(roles()); got != want {
		t.Fatalf("status after start: %s, want %s", got, want)
	}
	for n := 1; n <= 3; n++ {
		b, err := os.ReadFile(filepath.Join(data, strconv.Itoa(base+n), "delayd.out"))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, `"level":"warn"`) || strings.Contains(l, `"level":"error"`) {
				t.Errorf("node %d logged on a healthy start: %s", n, l)
			}
		}
	}
	out, err := exec.Command("redis-cli", "--cluster", "check", "127.0.0.1:"+strconv.Itoa(base+1)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "[OK] All 16384 slots covered.") || strings.Contains(string(out), "[ERR]") {
		t.Errorf("redis-cli --cluster check: %v\n%s", err, out)
	}

	run("kill-node", "2")
	clWait(t, 20*time.Second, "group 1 led by node 1 or 3 after node 2's kill", func() (bool, string) {
		r := roles()
		return r[2] == nil && len(r[1]) == 3 && len(r[3]) == 3 && (r[1][1] == "master") != (r[3][1] == "master") &&
			r[1][0] == "master" && r[3][2] == "master", fmt.Sprint(r)
	})
	run("start-node", "2")
	clWait(t, 20*time.Second, "node 2 back as a replica of every group", func() (bool, string) {
		r := roles()
		return fmt.Sprint(r[2]) == "[slave slave slave]", fmt.Sprint(r)
	})
	run("stop")
}
