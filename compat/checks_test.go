package compat

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayd/delayd/internal/testserver"
)

// feature is a column of the matrix: one thing every client is checked for.
type feature struct {
	name  string // subtest name
	title string // column title
	what  string // what the check does, for the README
	// delaydOnly features use DELAY.* commands, so they are n/a against
	// redis-server.
	delaydOnly bool
	// cluster features run against a delayd cluster of clusterSize nodes
	// (cluster_test.go) instead of one server.
	cluster bool
}

var features = []feature{
	{name: "handshake", title: "handshake",
		what: "connect with the library's defaults (whatever it sends first: HELLO, CLIENT SETINFO, CLIENT TRACKING, INFO), PING, add a ready job, LLEN"},
	{name: "resp3", title: "RESP3",
		what: "HELLO 3 through the library's RESP3 option: a map with `proto` 3 and `server` `redis`; on delayd `DELAY.GET` replies a map"},
	{name: "auth", title: "AUTH",
		what: "a server with `requirepass`: no password gets `NOAUTH`, a wrong one `WRONGPASS`, the right one works"},
	{name: "delay", title: "`DELAY.*`", delaydOnly: true,
		what: "generic calls: `DELAY.ADD` with `ID` (a retry replies nil), `DELAY.GET`, `DELAY.STATS`, `DELAY.CANCEL`, a binary payload through `DELAY.POP`"},
	{name: "pipeline", title: "pipeline",
		what: "the library's default (non-transactional) pipeline of 100 adds: 100 replies, 100 ready jobs"},
	{name: "transaction", title: "transaction",
		what: "the library's default transaction (redis-py `pipeline()`, go-redis `TxPipelined`, ioredis and node-redis `multi()`, rueidis MULTI on a dedicated connection): 100 adds add exactly 100; a command refused while queuing aborts it (`EXECABORT`) and nothing runs; WATCH of a changed queue makes EXEC fail, where the library has it"},
	{name: "blpop", title: "BLPOP worker",
		what: "the library's BLPOP helper blocks until another connection adds a job, and times out with nil on an empty queue"},
	{name: "schedule", title: "scheduling", delaydOnly: true,
		what: "generic calls of issue 10's commands: `DELAY.SCHEDULE` (`EVERY 100`, and `CRON` with `TZ Europe/Berlin`), `DELAY.SCHEDULES` lists it, a firing popped with id `name:<fire ms>` no later than now, `DELAY.UNSCHEDULE`; `DELAY.ADD ... UNIQUE`, `DELAY.PROMOTE`, a re-add after the pop replies nil; `DELAY.RESCHEDULE` of a ready job makes it delayed; `PRIORITY` and `DELAY.MPOP ... COUNT 2` (reply `[key, [[id, payload], ...]]`, higher priority first); `DELAY.LIMIT`"},
	{name: "popack", title: "DELAY.POP+ACK worker", delaydOnly: true,
		what: "a worker with a read timeout longer than its pop timeout pops in a loop (empty pops reply nil, not an error), gets a job with an ack timeout no sooner than its delay, sees it reserved, ACKs it, and it is gone"},
	{name: "lmove", title: "reliable list",
		what: "`BLMOVE` / `RPOPLPUSH` of a job into a processing list, then `LREM` when done"},
	{name: "scan", title: "SCAN/KEYS",
		what: "the library's SCAN iterator with `MATCH jobs:*`, `KEYS jobs:*`, `DBSIZE`"},
	{name: "clientinfo", title: "CLIENT INFO",
		what: "the library's CLIENT INFO helper parses the reply (Redis's fields: `id`, `addr`, `qbuf-free`, `oll`, `tot-mem`, ...)"},
	{name: "cache", title: "client-side cache",
		what: "the library's client-side caching: a cached `LLEN` is served from the cache, and an add by another client invalidates it"},
	{name: "reconnect", title: "reconnect",
		what: "after a server restart (SIGTERM, start again) the same client object works again on its own, and the jobs are still there"},
	// tls is delaydOnly because the check adds with DELAY.ADD, and the
	// redis-server run would need its own TLS build and flags.
	{name: "tls", title: "TLS", delaydOnly: true,
		what: "a server with `--tls-port` and `--tls-auth-clients yes` (mutual TLS, certificates made by `tlsconf/tlstest`): the library's TLS options with a client certificate (go-redis `TLSConfig`, rueidis `TLSConfig`, redis-py `ssl=True, ssl_certfile, ssl_keyfile, ssl_ca_certs`, ioredis `tls: {cert, key, ca}`, node-redis `socket: {tls: true, cert, key, ca}`, redis-cli `--tls --cert --key --cacert`): PING, `DELAY.ADD` with `ID`, `DELAY.POP` of it; a connection without a client certificate is refused"},
	{name: "cluster", title: "cluster client", delaydOnly: true, cluster: true,
		what: "a 3-node delayd cluster; the library's cluster client, given one follower's address, finds the leader (the one master of `CLUSTER SLOTS`/`SHARDS`/`NODES`) and follows `MOVED`: `DELAY.ADD` with `ID`, `DELAY.GET`, `DELAY.POP`, `DELAY.ACK`, and adds to 20 queues (20 slots), pipelined where the library's cluster pipeline takes several slots (ioredis's takes one); redis-cli: `MOVED` printed without `-c`, followed with it, and `--cluster check` finds all 16384 slots covered"},
	{name: "failover", title: "failover", delaydOnly: true, cluster: true,
		what: "a 3-node delayd cluster and the library's cluster client given every node, with its defaults plus only what the README's cluster section names for it: a producer (`DELAY.ADD` with `ID`, delays 0..2000 ms, a failed add retried with its ID) and a worker (`DELAY.POP` + `DELAY.ACK`) run while the leader is killed (SIGKILL); both resume on their own within 15 s, the killed node restarts and rejoins, more adds succeed; then the leader is frozen for 3 s (SIGSTOP) while the others elect a new one and goes on (SIGCONT) as a stale leader that must step down, and the work goes on again; in the end every add the client saw acknowledged is delivered at least once, none early. redis-cli: `-c` from a follower, an add retried by hand until the new leader takes it, the job added before the kill popped after it, and a pop blocked on the frozen leader answered `UNBLOCKED`"},
}

// cell is how one client is checked for one feature.
type cell struct {
	run  func(*env) error
	na   string // the client has no such feature: why
	note string // a condition shown in the README
}

// client is a row of the matrix.
type client struct {
	name  string
	title string
	cells map[string]cell
}

// scripted makes every feature a run of one script, which decides n/a
// itself where that depends on the installed version.
func scripted(runtime func() (string, error), script string, arg string, override map[string]cell) map[string]cell {
	m := map[string]cell{}
	for _, f := range features {
		args := []string{f.name}
		if arg != "" {
			args = []string{arg, f.name}
		}
		m[f.name] = cell{run: scriptCheck(runtime, script, args...)}
	}
	for k, v := range override {
		if v.run == nil && v.na == "" {
			v.run = m[k].run
		}
		m[k] = v
	}
	return m
}

var clients = []client{
	{name: "go-redis", title: "go-redis v9", cells: goRedisCells()},
	{name: "rueidis", title: "rueidis", cells: rueidisCells()},
	{name: "redis-py", title: "redis-py", cells: scripted(python, "python/checks.py", "", map[string]cell{
		"resp3": {note: "redis-py 5 and later (`protocol=3`); Debian bookworm's 4.3 has no RESP3"},
		"cache": {note: "redis-py 5.1 and later (`cache_config`, RESP3); Debian bookworm's 4.3 has none"},
		"failover": {note: "redis-py 4.4.2 and later with its defaults; Debian bookworm's 4.3 fails to re-read the slot map after a connection error " +
			"(`cannot pickle '_thread.lock' object`, redis-py #2377, fixed in 4.4.0), so with its defaults it writes again only once the dead node is back; " +
			"the check adds the README's one line, `RedisCluster.__deepcopy__ = lambda self, memo: self`; 4.3 also raises `IndexError` once when a replica becomes master " +
			"(redis-py #2549, fixed in 4.4.2), which the app's retry covers"},
	})},
	{name: "ioredis", title: "ioredis 5", cells: scripted(node, "node/checks.js", "ioredis", map[string]cell{
		"resp3": {na: "ioredis speaks RESP2 only"},
		"cache": {na: "ioredis has no client-side cache"},
	})},
	{name: "node-redis", title: "node-redis 5", cells: scripted(node, "node/checks.js", "node-redis", map[string]cell{
		"failover": {note: "node-redis 5 reads the slot map again only on `MOVED`/`ASK` (node-redis #2806), so with its defaults it keeps sending to a dead leader until it is back; " +
			"the check does what the README says an app must: nodes give up reconnecting after a few tries, and a command failed by its connection makes the app replace its cluster client"},
	})},
	{name: "redis-cli", title: "redis-cli", cells: redisCLICells()},
}

// results holds each cell's outcome for the matrix.
var (
	resultsMu sync.Mutex
	results   = map[string]string{} // client/feature -> pass, FAIL, n/a, skip
)

func record(c, f, outcome string) {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	results[c+"/"+f] = outcome
}

// raiseParallel lets 6 checks run at once whatever GOMAXPROCS, unless
// -parallel was given: the checks mostly wait (on subprocesses, blocked
// pops, timers), so 2 at a time on a 2-core machine would only add minutes.
func raiseParallel() {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", "6")
	}
}

// TestCompat runs every client x feature cell, each on its own server.
func TestCompat(t *testing.T) {
	t.Cleanup(func() { printMatrix(t) })
	for _, c := range clients {
		for _, f := range features {
			cl := c.cells[f.name]
			t.Run(c.name+"/"+f.name, func(t *testing.T) {
				if cl.na != "" {
					record(c.name, f.name, "n/a")
					t.Skip("n/a: " + cl.na)
				}
				if f.delaydOnly && againstRedis {
					record(c.name, f.name, "n/a")
					t.Skip("n/a: DELAY.* commands are delayd's")
				}
				t.Parallel()
				runCell(t, c.name, f, cl.run)
			})
		}
	}
}

func runCell(t *testing.T, clientName string, f feature, run func(*env) error) {
	featureName := f.name
	e, err := startEnv(t, f)
	if err != nil {
		record(clientName, featureName, "FAIL")
		t.Fatalf("server did not start: %v", err)
	}
	start := time.Now()
	err = run(e)
	took := time.Since(start).Round(time.Millisecond)
	if !e.stop() {
		t.Errorf("server did not exit within 5s of SIGTERM")
	}
	show := func() {
		t.Logf("check log:\n%s", e.log.String())
		t.Logf("server output:\n%s", e.output())
	}
	var na errNA
	var missing errMissing
	switch {
	case err == nil:
		record(clientName, featureName, "pass")
		if verbose {
			show()
		}
		t.Logf("pass in %v", took)
	case errors.As(err, &na):
		record(clientName, featureName, "n/a")
		t.Skip(err.Error())
	case errors.As(err, &missing) && !require:
		record(clientName, featureName, "skip")
		t.Skipf("%v (DELAYD_COMPAT_REQUIRE=1 makes this a failure)", err)
	default:
		record(clientName, featureName, "FAIL")
		show()
		t.Errorf("%s %s: %v", clientName, featureName, err)
	}
}

// startEnv starts what a check of f runs against: its own server, or its
// own cluster for a cluster feature. A start that fails logs the output.
func startEnv(t *testing.T, f feature) (*env, error) {
	if f.name == "tls" {
		return startTLSEnv(t)
	}
	if f.cluster {
		tc, err := startCluster(t.TempDir(), clusterSize)
		if err != nil {
			tc.stop()
			t.Logf("cluster output:\n%s", tc.output())
			return nil, err
		}
		return &env{cluster: tc, addr: tc.nodes[0].addr(), addrs: tc.addrs(), log: &testserver.Buffer{}}, nil
	}
	password := ""
	if f.name == "auth" {
		password = "compat-secret"
	}
	srv, err := startServer(t.TempDir(), password)
	if err != nil {
		if srv != nil {
			t.Logf("server output:\n%s", srv.Output())
		}
		return nil, err
	}
	return &env{srv: srv, addr: srv.addr(), addrs: []string{srv.addr()}, password: password, log: &testserver.Buffer{}}, nil
}

// printMatrix logs the outcome of every cell that ran, as a table, and
// writes it to DELAYD_COMPAT_MATRIX when set.
func printMatrix(t *testing.T) {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	target := "delayd"
	if againstRedis {
		target = serverBin
	}
	var b strings.Builder
	fmt.Fprintf(&b, "client compatibility against %s\n", target)
	fmt.Fprintf(&b, "%-12s", "")
	for _, f := range features {
		fmt.Fprintf(&b, " %-*s", colWidth(f), f.name)
	}
	b.WriteString("\n")
	count := map[string]int{}
	for _, c := range clients {
		fmt.Fprintf(&b, "%-12s", c.name)
		for _, f := range features {
			r := results[c.name+"/"+f.name]
			if r == "" {
				r = "-"
			}
			count[r]++
			fmt.Fprintf(&b, " %-*s", colWidth(f), r)
		}
		b.WriteString("\n")
	}
	b.WriteString(matrixSummary(count))
	t.Log("\n" + b.String())
	if p := os.Getenv("DELAYD_COMPAT_MATRIX"); p != "" {
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Errorf("DELAYD_COMPAT_MATRIX: %v", err)
		}
	}
}

func colWidth(f feature) int { return max(len(f.name), 4) }

// matrixSummary is the matrix's last line: how many checks ran and how many
// were skipped for a missing client. A plain `go test ./...` prints only
// "ok" for this package whatever was skipped, so .ci/run prints this line
// and the README says how to get it.
func matrixSummary(count map[string]int) string {
	ran := count["pass"] + count["FAIL"]
	return fmt.Sprintf("%d client checks ran: %d passed, %d failed; %d skipped (client not installed), %d not applicable, %d not run\n",
		ran, count["pass"], count["FAIL"], count["skip"], count["n/a"], count["-"])
}

// Helpers for the Go checks: each returns an error describing the
// difference, so a check reads as a list of expectations.

func eq(what string, got, want any) error {
	if !reflect.DeepEqual(got, want) {
		return fmt.Errorf("%s: got %#v, want %#v", what, got, want)
	}
	return nil
}

func noErr(what string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// errStarts checks that err is a server error starting with prefix.
func errStarts(what string, err error, prefix string) error {
	if err == nil {
		return fmt.Errorf("%s: no error, want one starting %q", what, prefix)
	}
	if !strings.Contains(err.Error(), prefix) {
		return fmt.Errorf("%s: error %q, want one starting %q", what, err.Error(), prefix)
	}
	return nil
}

// first returns the first non-nil error.
func first(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func sorted(s []string) []string {
	s = append([]string(nil), s...)
	sort.Strings(s)
	return s
}

// TestMatrixSummaryCounts: the matrix's last line counts skipped checks
// apart from the ones that ran, so a machine without a client cannot pass
// for one where every check ran.
func TestMatrixSummaryCounts(t *testing.T) {
	got := matrixSummary(map[string]int{"pass": 3, "FAIL": 1, "skip": 2, "n/a": 4, "-": 5})
	want := "4 client checks ran: 3 passed, 1 failed; 2 skipped (client not installed), 4 not applicable, 5 not run\n"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
