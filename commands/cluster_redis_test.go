package commands

import (
	"bufio"
	"fmt"
	"io"
	"net"
	execpkg "os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Redis 7 itself is the yardstick for the CLUSTER replies' shapes and the
// errors' words: a one-node Redis Cluster holding every slot is asked the
// same commands as a one-node delayd group. Skipped without redis-server.
func TestClusterRepliesMatchRedis(t *testing.T) {
	bin, err := execpkg.LookPath("redis-server")
	if err != nil || testing.Short() {
		t.Skip("redis-server not installed")
	}
	port := freePort(t)
	dir := t.TempDir()
	srv := execpkg.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
		"--cluster-config-file", dir+"/nodes.conf", "--dir", dir, "--save", "", "--appendonly", "no")
	if err := srv.Start(); err != nil {
		t.Skip("redis-server does not start:", err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	rc := dialRedis(t, port)
	if got := rc.do("CLUSTER", "ADDSLOTSRANGE", "0", "16383"); got != "+OK" {
		t.Skip("redis-server too old for ADDSLOTSRANGE:", got)
	}

	fc := newFake(idL, idL)
	fc.members = fc.members[:1] // one node, as the Redis above
	n := newNode(t, fc)
	c := n.client()
	ours := func(a ...string) string {
		// Verbatim text is a bulk string in RESP2.
		s := strings.ReplaceAll(n.do(c, a...), " =", " $")
		if strings.HasPrefix(s, "=") {
			s = "$" + s[1:]
		}
		return s
	}
	// A new Redis Cluster says CLUSTERDOWN until it has seen its slots.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(rc.do("CLUSTER", "INFO"), "cluster_state:ok"); {
		if time.Now().After(deadline) {
			t.Skip("redis-server's cluster did not come up")
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Same replies, word for word.
	for _, cmd := range []string{
		"CLUSTER KEYSLOT foo", "CLUSTER KEYSLOT {user1000}.followers", "CLUSTER KEYSLOT foo{}{bar}",
		"CLUSTER COUNTKEYSINSLOT 12182", "CLUSTER GETKEYSINSLOT 12182 10",
		"CLUSTER COUNTKEYSINSLOT x", "CLUSTER COUNTKEYSINSLOT 16384", "CLUSTER GETKEYSINSLOT 1 -1",
		"CLUSTER GETKEYSINSLOT x 1", "CLUSTER KEYSLOT", "CLUSTER NOSUCH", "CLUSTER FORGET abc",
		"CLUSTER MEET 1.2.3.4 x", "CLUSTER MEET 1.2.3.4", "CLUSTER MYID x",
		"READONLY", "READWRITE", "ASKING", "WAIT x 0", "WAIT 0 -1", "WAIT 0 x",
		"DEL a b", "RPOPLPUSH {a}1 b", "MULTI", "RPUSH a x", "RPUSH b y", "EXEC",
	} {
		a := strings.Fields(cmd)
		if got, want := ours(a...), rc.do(a...); got != want {
			t.Errorf("%s:\n delayd %q\n  redis %q", cmd, got, want)
		}
	}

	// Same shapes: types and counts, map keys and roles; addresses, ids and
	// offsets differ.
	for _, cmd := range []string{"CLUSTER SLOTS", "CLUSTER SHARDS", "CLUSTER MYID"} {
		a := strings.Fields(cmd)
		if got, want := shape(ours(a...)), shape(rc.do(a...)); got != want {
			t.Errorf("%s:\n delayd %q\n  redis %q", cmd, got, want)
		}
	}

	// CLUSTER INFO: the same fields in the same order.
	if got, want := infoKeys(ours("CLUSTER", "INFO")), infoKeys(rc.do("CLUSTER", "INFO")); got != want {
		t.Errorf("CLUSTER INFO fields:\n delayd %q\n  redis %q", got, want)
	}

	// CLUSTER NODES: the same fields, flags, link state and slots.
	nodeFields := func(s string) string {
		f := strings.Fields(strings.TrimPrefix(s, "$"))
		if len(f) != 9 {
			return fmt.Sprint(len(f), " fields: ", s)
		}
		return strings.Join([]string{f[2], f[3], f[4], f[5], f[7], f[8]}, " ")
	}
	if got, want := nodeFields(ours("CLUSTER", "NODES")), nodeFields(rc.do("CLUSTER", "NODES")); got != want {
		t.Errorf("CLUSTER NODES:\n delayd %q\n  redis %q", got, want)
	}

	// HELP: the same lines for the subcommands both have.
	redisHelp := map[string]bool{}
	for _, l := range strings.Split(rc.do("CLUSTER", "HELP"), " +") {
		redisHelp[l] = true
	}
	for _, l := range clusterHelp {
		if !strings.HasPrefix(l, " ") && !redisHelp[l] && !strings.HasPrefix(l, "JOIN") && !strings.HasPrefix(l, "GROUPS") && !strings.HasPrefix(l, "HANDOVER") && !strings.HasPrefix(l, "MYSHARDID") && !strings.HasPrefix(l, "SLOTCHANGE") && !strings.HasPrefix(l, "SLOTINDEX") {
			t.Errorf("CLUSTER HELP line %q is not Redis's", l)
		}
	}
}

// shape keeps a reply's types and counts, and the words that are fields
// or roles, not addresses, ids and offsets.
func shape(reply string) string {
	var out []string
	for _, l := range strings.Split(reply, " ") {
		switch {
		case l == "":
		case l[0] == ':' && l != ":16383":
			out = append(out, ":n")
		case l[0] == '$' && !strings.Contains("|slots|nodes|id|port|ip|endpoint|role|replication-offset|health|master|online|", "|"+l[1:]+"|"):
			out = append(out, "$")
		default:
			out = append(out, l)
		}
	}
	return strings.Join(out, " ")
}

func infoKeys(s string) string {
	var keys []string
	for _, l := range strings.Split(strings.TrimPrefix(s, "$"), "\r\n") {
		if k, _, ok := strings.Cut(l, ":"); ok {
			keys = append(keys, k)
		}
	}
	return strings.Join(keys, " ")
}

func freePort(t *testing.T) int {
	t.Helper()
	for range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if port+10000 < 65536 { // Redis's cluster bus listens there
			if bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000)); err == nil {
				bus.Close()
				return port
			}
		}
	}
	t.Fatal("no free port pair")
	return 0
}

// redisConn speaks just enough RESP2 to read replies as lineWriter writes
// them.
type redisConn struct {
	t  *testing.T
	nc net.Conn
	rd *bufio.Reader
}

func dialRedis(t *testing.T, port int) *redisConn {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		nc, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			rc := &redisConn{t: t, nc: nc, rd: bufio.NewReader(nc)}
			t.Cleanup(func() { nc.Close() })
			if rc.do("PING") == "+PONG" {
				return rc
			}
		}
		if time.Now().After(deadline) {
			t.Skip("redis-server did not come up:", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (rc *redisConn) do(a ...string) string {
	rc.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(a))
	for _, s := range a {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(s), s)
	}
	rc.nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := rc.nc.Write([]byte(b.String())); err != nil {
		rc.t.Fatal(err)
	}
	var lines []string
	rc.read(&lines)
	return strings.Join(lines, " ")
}

func (rc *redisConn) read(lines *[]string) {
	l, err := rc.rd.ReadString('\n')
	if err != nil {
		rc.t.Fatal(err)
	}
	l = strings.TrimSuffix(l, "\r\n")
	switch l[0] {
	case '$':
		n, _ := strconv.Atoi(l[1:])
		if n < 0 {
			*lines = append(*lines, "_")
			return
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rc.rd, buf); err != nil {
			rc.t.Fatal(err)
		}
		*lines = append(*lines, "$"+string(buf[:n]))
	case '*':
		*lines = append(*lines, l)
		n, _ := strconv.Atoi(l[1:])
		for range n {
			rc.read(lines)
		}
	default:
		*lines = append(*lines, l)
	}
}
