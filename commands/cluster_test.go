package commands

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayd/delayd/cluster"
	"github.com/delayd/delayd/engine"
)

// fakeCluster is a ClusterView whose roles a test sets by hand.
type fakeCluster struct {
	mu       sync.Mutex
	self     string
	leader   string // the leader Raft names; "" while none is known
	writable bool
	last     string         // LastLeader's id while no leader is known
	members  []cluster.Node // Self and Leader are derived from self and leader
	term     uint64
	index    uint64
	err      error // what Meet, Join and Forget return

	waitResult int
	waits      []string // "index n timeout" of each WaitReplicas call
	calls      []string // Meet, Join, Forget calls
}

const (
	idL = "1111111111111111111111111111111111111111"
	idA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	idB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// newFake is a group of three: leader L, A, and B (a non-voter the leader
// has not heard from), seen from self.
func newFake(self, leader string) *fakeCluster {
	return &fakeCluster{
		self: self, leader: leader, writable: self == leader, term: 7, index: 42,
		members: []cluster.Node{
			{ID: idL, Addr: "10.0.0.1:7000", BusAddr: "10.0.0.1:17000", Voter: true, Connected: true, Match: 42, ConfigEpoch: 7},
			{ID: idA, Addr: "10.0.0.2:7001", BusAddr: "10.0.0.2:17001", Voter: true, Connected: true, Match: 40, LastHeard: 2 * time.Second},
			{ID: idB, Addr: "10.0.0.3:7002", BusAddr: "10.0.0.3:17002", Voter: false, Connected: false, Match: 0},
		},
	}
}

func (f *fakeCluster) set(fn func(f *fakeCluster)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeCluster) Nodes() []cluster.Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []cluster.Node
	for _, n := range f.members {
		// As cluster.Nodes: this node leads only once it takes writes.
		n.Self, n.Leader = n.ID == f.self, n.ID == f.leader && (n.ID != f.self || f.writable)
		if n.Self {
			n.Connected = true
		}
		if n.Leader {
			out = append([]cluster.Node{n}, out...)
		} else {
			out = append(out, n)
		}
	}
	return out
}

func (f *fakeCluster) find(id string) (cluster.Node, bool) {
	for _, n := range f.Nodes() {
		if n.ID == id {
			return n, true
		}
	}
	return cluster.Node{}, false
}

func (f *fakeCluster) Self() cluster.Node { n, _ := f.find(f.self); return n }
func (f *fakeCluster) Leader() (cluster.Node, bool) {
	for _, n := range f.Nodes() {
		if n.Leader {
			return n, true
		}
	}
	return cluster.Node{}, false
}
func (f *fakeCluster) LastLeader() (cluster.Node, bool) {
	f.mu.Lock()
	id := f.last
	f.mu.Unlock()
	if _, ok := f.Leader(); ok || id == "" || id == f.self {
		return cluster.Node{}, false
	}
	return f.find(id)
}
func (f *fakeCluster) Writable() bool    { f.mu.Lock(); defer f.mu.Unlock(); return f.writable }
func (f *fakeCluster) Term() uint64      { return f.term }
func (f *fakeCluster) LastIndex() uint64 { f.mu.Lock(); defer f.mu.Unlock(); return f.index }
func (f *fakeCluster) WaitReplicas(index uint64, n int, timeout time.Duration) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.waits = append(f.waits, fmt.Sprint(index, n, timeout))
	return f.waitResult
}
func (f *fakeCluster) Meet(host string, port int) error {
	f.calls = append(f.calls, fmt.Sprint("meet ", host, " ", port))
	return f.err
}
func (f *fakeCluster) Join(id, busAddr, addr string) error {
	f.calls = append(f.calls, "join "+id+" "+busAddr+" "+addr)
	return f.err
}
func (f *fakeCluster) Forget(id string) error {
	f.calls = append(f.calls, "forget "+id)
	return f.err
}

// lineWriter records replies one element a line: +status, -error, :int,
// $bulk, _ (null), *n (array, or nil array *-1), %n (map; *2n in RESP2),
// =verbatim.
type lineWriter struct {
	lines []string
	proto int
}

func (w *lineWriter) add(s string)        { w.lines = append(w.lines, s) }
func (w *lineWriter) Status(s string)     { w.add("+" + s) }
func (w *lineWriter) Error(s string)      { w.add("-" + s) }
func (w *lineWriter) Int(n int64)         { w.add(":" + strconv.FormatInt(n, 10)) }
func (w *lineWriter) Bulk(b []byte)       { w.add("$" + string(b)) }
func (w *lineWriter) BulkString(s string) { w.add("$" + s) }
func (w *lineWriter) Null()               { w.add("_") }
func (w *lineWriter) NullArray()          { w.add("*-1") }
func (w *lineWriter) Array(n int)         { w.add("*" + strconv.Itoa(n)) }
func (w *lineWriter) Verbatim(s string)   { w.add("=" + s) }
func (w *lineWriter) Push(n int)          { w.add(">" + strconv.Itoa(n)) }
func (w *lineWriter) Proto() int          { return w.proto }
func (w *lineWriter) SetProto(p int)      { w.proto = p }
func (w *lineWriter) Map(n int) {
	if w.proto == 2 {
		w.Array(2 * n)
		return
	}
	w.add("%" + strconv.Itoa(n))
}

// node is a dispatcher over a real engine, in cluster mode when fc is set.
type node struct {
	t   *testing.T
	d   *Dispatcher
	eng *engine.Engine
	fc  *fakeCluster
}

func newNode(t *testing.T, fc *fakeCluster) *node {
	t.Helper()
	eng, err := engine.New(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	opts := Options{Engine: eng, Config: map[string]string{}, Port: 7001}
	if fc != nil {
		opts.Cluster = fc
	}
	return &node{t: t, d: New(opts), eng: eng, fc: fc}
}

func (n *node) client() *Client { return n.d.NewClient(&lineWriter{proto: 2}, "10.0.0.9:5000") }

// do runs one command and returns its reply, lines joined with " ".
func (n *node) do(c *Client, a ...string) string {
	w := c.W.(*lineWriter)
	w.lines = w.lines[:0]
	n.d.Exec(c, args(a...))
	return strings.Join(w.lines, " ")
}

const (
	movedFoo = "-MOVED 12182 10.0.0.1:7000"
	down     = "-" + errClusterDown
	cross    = "-" + errCrossSlot
	roErr    = "-" + errReadOnlyReplica
)

func TestRouting(t *testing.T) {
	type step struct {
		cmd  []string
		want string // the reply, or a prefix of it ending in "…"
	}
	for _, tc := range []struct {
		name     string
		self     string
		leader   string
		writable bool
		readonly bool
		steps    []step
	}{
		{name: "leader runs writes and reads", self: idL, leader: idL, writable: true, steps: []step{
			{[]string{"RPUSH", "foo", "x"}, ":1"},
			{[]string{"LLEN", "foo"}, ":1"},
			{[]string{"FLUSHALL"}, "+OK"},
		}},
		{name: "follower redirects keyed commands", self: idA, leader: idL, steps: []step{
			{[]string{"DELAY.ADD", "foo", "0", "x"}, movedFoo},
			{[]string{"LLEN", "foo"}, movedFoo},
			{[]string{"WATCH", "foo"}, movedFoo},
			// The slot is foo's, not that of the timeout ("1") after it.
			{[]string{"DELAY.POP", "foo", "1"}, movedFoo},
			{[]string{"BLPOP", "{foo}a", "{foo}b", "0"}, movedFoo},
			{[]string{"lpush", "bar", "x"}, "-MOVED 5061 10.0.0.1:7000"},
		}},
		{name: "follower runs keyless commands, refuses keyless writes", self: idA, leader: idL, steps: []step{
			{[]string{"PING"}, "+PONG"},
			{[]string{"DBSIZE"}, ":0"},
			{[]string{"SCAN", "0"}, "*2 $0 *0"},
			{[]string{"KEYS", "*"}, "*0"},
			{[]string{"FLUSHALL"}, roErr},
			{[]string{"FLUSHDB"}, roErr},
			{[]string{"CLUSTER", "KEYSLOT", "foo"}, ":12182"},
		}},
		{name: "READONLY reads on a follower", self: idA, leader: idL, readonly: true, steps: []step{
			{[]string{"LLEN", "foo"}, ":0"},
			{[]string{"EXISTS", "foo", "{foo}x"}, ":0"},
			{[]string{"RPUSH", "foo", "x"}, movedFoo},
			{[]string{"WATCH", "foo"}, movedFoo}, // not a read: Redis redirects it too
			{[]string{"READWRITE"}, "+OK"},
			{[]string{"LLEN", "foo"}, movedFoo},
		}},
		{name: "no leader known", self: idA, readonly: true, steps: []step{
			{[]string{"RPUSH", "foo", "x"}, down},
			{[]string{"LLEN", "foo"}, down},
			{[]string{"FLUSHALL"}, roErr},
			{[]string{"PING"}, "+PONG"},
		}},
		// Until it takes writes it knows no leader, as in an election:
		// even a READONLY read is not served.
		{name: "elected, not writable yet", self: idL, leader: idL, readonly: true, steps: []step{
			{[]string{"RPUSH", "foo", "x"}, down},
			{[]string{"LLEN", "foo"}, down},
			{[]string{"FLUSHALL"}, roErr},
		}},
		{name: "keys in different slots", self: idL, leader: idL, writable: true, steps: []step{
			{[]string{"RPOPLPUSH", "a", "b"}, cross},
			{[]string{"RPOPLPUSH", "{t}a", "{t}b"}, "_"},
			{[]string{"DEL", "a", "{a}x", "b"}, cross},
			{[]string{"DEL", "a", "{a}x"}, ":0"},
			{[]string{"BLPOP", "a", "b", "0"}, cross},
			{[]string{"DELAY.ADD", "q", "0", "x", "DEADLETTER", "dlq"}, cross},
			{[]string{"DELAY.ADD", "q", "0", "x", "RETRY", "3", "deadletter", "{q}dlq"}, "$…"},
			// A payload or an id that reads DEADLETTER is no option.
			{[]string{"DELAY.ADD", "q", "0", "DEADLETTER", "ID", "DEADLETTER", "REPLACE"}, "$DEADLETTER"},
		}},
		{name: "keys in different slots, on a follower too", self: idA, leader: idL, steps: []step{
			{[]string{"DEL", "a", "b"}, cross},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := newFake(tc.self, tc.leader)
			fc.writable = tc.writable
			n := newNode(t, fc)
			c := n.client()
			if tc.readonly {
				if got := n.do(c, "READONLY"); got != "+OK" {
					t.Fatalf("READONLY: %q", got)
				}
			}
			for _, s := range tc.steps {
				got := n.do(c, s.cmd...)
				if p, ok := strings.CutSuffix(s.want, "…"); ok && strings.HasPrefix(got, p) {
					continue
				}
				if got != s.want {
					t.Errorf("%q: %q, want %q", s.cmd, got, s.want)
				}
			}
		})
	}
}

// Inside MULTI each command is checked as it is queued; the transaction as
// a whole at EXEC, which answers the redirection itself and discards it.
func TestRoutingMulti(t *testing.T) {
	t.Run("cross slot at EXEC", func(t *testing.T) {
		n := newNode(t, newFake(idL, idL))
		c := n.client()
		for _, s := range [][2]string{{"MULTI", "+OK"}, {"RPUSH a x", "+QUEUED"}, {"RPUSH b y", "+QUEUED"}, {"EXEC", cross}, {"EXEC", "-ERR EXEC without MULTI"}} {
			if got := n.do(c, strings.Fields(s[0])...); got != s[1] {
				t.Fatalf("%s: %q, want %q", s[0], got, s[1])
			}
		}
		if n.eng.Len([]byte("a")) != 0 {
			t.Fatal("a refused transaction ran")
		}
	})
	t.Run("redirected while queuing", func(t *testing.T) {
		n := newNode(t, newFake(idA, idL))
		c := n.client()
		for _, s := range [][2]string{{"MULTI", "+OK"}, {"RPUSH foo x", movedFoo}, {"PING", "+QUEUED"}, {"EXEC", "-" + errExecAbort}} {
			if got := n.do(c, strings.Fields(s[0])...); got != s[1] {
				t.Fatalf("%s: %q, want %q", s[0], got, s[1])
			}
		}
	})
	t.Run("keyless write while queuing on a follower", func(t *testing.T) {
		n := newNode(t, newFake(idA, idL))
		c := n.client()
		for _, s := range [][2]string{{"MULTI", "+OK"}, {"FLUSHALL", roErr}, {"EXEC", "-" + errExecAbort}} {
			if got := n.do(c, strings.Fields(s[0])...); got != s[1] {
				t.Fatalf("%s: %q, want %q", s[0], got, s[1])
			}
		}
	})
	t.Run("leadership lost before EXEC", func(t *testing.T) {
		fc := newFake(idL, idL)
		n := newNode(t, fc)
		c := n.client()
		for _, s := range [][2]string{{"MULTI", "+OK"}, {"RPUSH foo x", "+QUEUED"}, {"LLEN {foo}", "+QUEUED"}} {
			if got := n.do(c, strings.Fields(s[0])...); got != s[1] {
				t.Fatalf("%s: %q, want %q", s[0], got, s[1])
			}
		}
		fc.set(func(f *fakeCluster) { f.self, f.writable = idL, false; f.leader = idA })
		if got, want := n.do(c, "EXEC"), "-MOVED 12182 10.0.0.2:7001"; got != want {
			t.Fatalf("EXEC: %q, want %q", got, want)
		}
		if got := n.do(c, "EXEC"); got != "-ERR EXEC without MULTI" {
			t.Fatalf("the transaction was not discarded: %q", got)
		}
		if n.eng.Len([]byte("foo")) != 0 {
			t.Fatal("a redirected transaction ran")
		}
	})
	t.Run("keyless write transaction after leadership is lost", func(t *testing.T) {
		fc := newFake(idL, idL)
		n := newNode(t, fc)
		c := n.client()
		n.do(c, "MULTI")
		n.do(c, "FLUSHALL")
		fc.set(func(f *fakeCluster) { f.writable, f.leader = false, idA })
		want := "-EXECABORT Transaction discarded because of: " + errReadOnlyReplica
		if got := n.do(c, "EXEC"); got != want {
			t.Fatalf("EXEC: %q, want %q", got, want)
		}
	})
	t.Run("READONLY reads in a transaction on a follower", func(t *testing.T) {
		n := newNode(t, newFake(idA, idL))
		c := n.client()
		for _, s := range [][2]string{{"READONLY", "+OK"}, {"MULTI", "+OK"}, {"LLEN foo", "+QUEUED"}, {"EXISTS {foo}2", "+QUEUED"}, {"EXEC", "*2 :0 :0"}} {
			if got := n.do(c, strings.Fields(s[0])...); got != s[1] {
				t.Fatalf("%s: %q, want %q", s[0], got, s[1])
			}
		}
	})
}

// Leadership can move between route's check and the engine: the engine's
// ErrNotLeader is then answered as route would answer now.
func TestNotLeaderFromEngine(t *testing.T) {
	fc := newFake(idL, idA) // route still sees this node writable ...
	fc.writable = true
	n := newNode(t, fc)
	n.eng.Follow() // ... the engine already follows
	c := n.client()
	for _, s := range [][2]string{
		{"RPUSH foo x", "-MOVED 12182 10.0.0.2:7001"},
		{"DELAY.ADD foo 0 x", "-MOVED 12182 10.0.0.2:7001"},
		{"DELAY.POP foo 0", "-MOVED 12182 10.0.0.2:7001"},
		{"FLUSHALL", roErr},
	} {
		if got := n.do(c, strings.Fields(s[0])...); got != s[1] {
			t.Errorf("%s: %q, want %q", s[0], got, s[1])
		}
	}
	fc.set(func(f *fakeCluster) { f.leader = "" })
	if got := n.do(c, "RPUSH", "foo", "x"); got != down {
		t.Errorf("with no leader known: %q, want %q", got, down)
	}
}

func TestErrorLine(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{engine.ErrNotCommitted, "TRYAGAIN " + engine.ErrNotCommitted.Error()},
		{fmt.Errorf("batch 3: %w", engine.ErrNotCommitted), "TRYAGAIN batch 3: " + engine.ErrNotCommitted.Error()},
		{fmt.Errorf("%w: disk full", engine.ErrLog), "MISCONF Errors writing to the AOF file: disk full"},
		{errors.New("boom"), "ERR boom"},
	} {
		if got := ErrorLine(tc.err); got != tc.want {
			t.Errorf("ErrorLine(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// Without a cluster, CLUSTER and its companions are refused with Redis's
// words, and WAIT has no replica to wait for.
func TestSingleNode(t *testing.T) {
	n := newNode(t, nil)
	c := n.client()
	for _, s := range [][2]string{
		{"CLUSTER INFO", "-" + errNoCluster},
		{"CLUSTER KEYSLOT foo", "-" + errNoCluster},
		{"CLUSTER NOSUCH", "-" + errNoCluster},
		{"READONLY", "-" + errNoCluster},
		{"READWRITE", "-" + errNoCluster},
		{"ASKING", "-" + errNoCluster},
		{"WAIT 1 0", ":0"},
		{"WAIT x 0", "-" + errNotInteger},
		{"WAIT 1 -1", "-ERR timeout is negative"},
		// Keys in different slots are nothing to a single node.
		{"RPOPLPUSH a b", "_"},
		{"RPUSH foo x", ":1"},
	} {
		if got := n.do(c, strings.Fields(s[0])...); got != s[1] {
			t.Errorf("%s: %q, want %q", s[0], got, s[1])
		}
	}
	info := n.do(c, "INFO")
	for _, want := range []string{"redis_mode:standalone\r\n", "\r\n# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_failover_state:no-failover\r\n", "# Cluster\r\ncluster_enabled:0\r\n"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO lacks %q:\n%s", want, info)
		}
	}
	if got := n.do(c, "HELLO", "3"); !strings.Contains(got, "$mode $standalone $role $master") {
		t.Errorf("HELLO: %q", got)
	}
}

func TestClusterSubcommands(t *testing.T) {
	fc := newFake(idA, idL)
	n := newNode(t, fc)
	c := n.client()
	slots := "*1 *4 :0 :16383 *4 $10.0.0.1 :7000 $" + idL + " *0 *4 $10.0.0.2 :7001 $" + idA + " *0"
	shards := "*1 *4 $slots *2 :0 :16383 $nodes *3 " +
		"*14 $id $" + idL + " $port :7000 $ip $10.0.0.1 $endpoint $10.0.0.1 $role $master $replication-offset :42 $health $online " +
		"*14 $id $" + idA + " $port :7001 $ip $10.0.0.2 $endpoint $10.0.0.2 $role $replica $replication-offset :42 $health $online " +
		"*14 $id $" + idB + " $port :7002 $ip $10.0.0.3 $endpoint $10.0.0.3 $role $replica $replication-offset :0 $health $fail"
	info := "=cluster_state:ok\r\ncluster_slots_assigned:16384\r\ncluster_slots_ok:16384\r\ncluster_slots_pfail:0\r\n" +
		"cluster_slots_fail:0\r\ncluster_known_nodes:3\r\ncluster_size:1\r\ncluster_current_epoch:7\r\ncluster_my_epoch:7\r\n" +
		"cluster_stats_messages_sent:0\r\ncluster_stats_messages_received:0\r\ntotal_cluster_links_buffer_limit_exceeded:0\r\n"
	for _, s := range [][2]string{
		{"CLUSTER MYID", "$" + idA},
		{"cluster myshardid", "$" + shardID},
		{"CLUSTER INFO", info},
		{"CLUSTER SLOTS", slots},
		{"CLUSTER SHARDS", shards},
		{"CLUSTER KEYSLOT {user1000}.following", ":3443"},
		{"CLUSTER KEYSLOT", "-ERR wrong number of arguments for 'cluster|keyslot' command"},
		{"CLUSTER NOSUCH", "-ERR unknown subcommand 'NOSUCH'. Try CLUSTER HELP."},
		{"CLUSTER COUNTKEYSINSLOT x", "-" + errNotInteger},
		{"CLUSTER COUNTKEYSINSLOT 16384", "-ERR Invalid slot"},
		{"CLUSTER COUNTKEYSINSLOT -1", "-ERR Invalid slot"},
		{"CLUSTER GETKEYSINSLOT 1 -1", "-ERR Invalid slot or number of keys"},
		{"CLUSTER GETKEYSINSLOT 16384 1", "-ERR Invalid slot or number of keys"},
		{"CLUSTER MEET 10.0.0.4 x", "-ERR Invalid TCP base port specified: x"},
		{"CLUSTER MEET 10.0.0.4 7003 70000", "-ERR Invalid TCP bus port specified: 70000"},
		{"CLUSTER MEET 10.0.0.4", "-ERR wrong number of arguments for 'cluster|meet' command"},
		{"CLUSTER MEET 10.0.0.4 7003 17003", "+OK"},
		{"CLUSTER FORGET nosuch", "-ERR Unknown node nosuch"},
		{"CLUSTER FORGET " + idA, "-ERR I tried hard but I can't forget myself..."},
		{"CLUSTER FORGET " + idL, "-ERR Can't forget my master!"},
		{"CLUSTER FORGET " + idB, "+OK"},
		{"CLUSTER JOIN " + idB + " nohost 10.0.0.3:7002", "-ERR Invalid node address specified: nohost"},
		{"CLUSTER JOIN " + idB + " 10.0.0.3:17002 10.0.0.3:7002", "+OK"},
	} {
		if got := n.do(c, strings.Fields(s[0])...); got != s[1] {
			t.Errorf("%s:\n got %q\nwant %q", s[0], got, s[1])
		}
	}
	if got, want := strings.Join(fc.calls, "; "), "meet 10.0.0.4 7003; forget "+idB+"; join "+idB+" 10.0.0.3:17002 10.0.0.3:7002"; got != want {
		t.Errorf("calls: %q, want %q", got, want)
	}
	fc.err = errors.New("no quorum")
	if got := n.do(c, "CLUSTER", "MEET", "10.0.0.4", "7003"); got != "-ERR no quorum" {
		t.Errorf("failed MEET: %q", got)
	}
	if got := n.do(c, "CLUSTER", "HELP"); !strings.HasPrefix(got, "*29 +CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are: +COUNTKEYSINSLOT <slot>") {
		t.Errorf("HELP: %q", got)
	}
	// RESP3: SHARDS's shard and nodes are maps.
	c.W.SetProto(3)
	if got := n.do(c, "CLUSTER", "SHARDS"); !strings.HasPrefix(got, "*1 %2 $slots *2 :0 :16383 $nodes *3 %7 $id") {
		t.Errorf("SHARDS in RESP3: %q", got)
	}
}

// CLUSTER NODES: the leader first as master with every slot, then the
// followers as its replicas; fail? and disconnected for a member the leader
// has not heard from, nofailover for a non-voter.
func TestClusterNodes(t *testing.T) {
	fc := newFake(idA, idL)
	n := newNode(t, fc)
	got := strings.TrimPrefix(n.do(n.client(), "CLUSTER", "NODES"), "=")
	want := regexp.MustCompile(`^` +
		idL + ` 10\.0\.0\.1:7000@17000 master - 0 (\d+) 7 connected 0-16383\n` +
		idA + ` 10\.0\.0\.2:7001@17001 myself,slave ` + idL + ` 0 0 7 connected\n` +
		idB + ` 10\.0\.0\.3:7002@17002 slave,fail\?,nofailover ` + idL + ` 0 0 7 disconnected\n$`)
	m := want.FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("CLUSTER NODES:\n%s", got)
	}
	if pong, _ := strconv.ParseInt(m[1], 10, 64); time.Since(time.UnixMilli(pong)) > time.Minute {
		t.Errorf("pong-recv %s is not the time the leader was last heard from", m[1])
	}
}

// A node names itself master only while it takes writes. With no leader
// that takes writes (an election, a restart, or this node elected and not
// ready yet) no node is shown master but the one being replaced, flagged
// fail?; SLOTS and SHARDS answer CLUSTERDOWN, as RedisRaft answers them (a
// client then keeps its map and asks another node), CLUSTER INFO says fail,
// and INFO replication and HELLO say replica.
func TestClusterWithoutLeader(t *testing.T) {
	nodesRe := func(lines ...string) *regexp.Regexp {
		return regexp.MustCompile("^=" + strings.Join(lines, `\n`) + `\n$`)
	}
	for _, tc := range []struct {
		name         string
		self, leader string
		last         string
		nodes        *regexp.Regexp
		masterHost   string
	}{
		{name: "the leader was lost", self: idA, last: idL, masterHost: "10.0.0.1",
			nodes: nodesRe(
				idL+` 10\.0\.0\.1:7000@17000 master,fail\? - 0 0 7 disconnected 0-16383`,
				idA+` 10\.0\.0\.2:7001@17001 myself,slave `+idL+` 0 0 7 connected`,
				idB+` 10\.0\.0\.3:7002@17002 slave,fail\?,nofailover `+idL+` 0 0 7 disconnected`)},
		{name: "no leader seen since the start", self: idA,
			nodes: nodesRe(
				idL+` 10\.0\.0\.1:7000@17000 slave - 0 \d+ 0 connected`,
				idA+` 10\.0\.0\.2:7001@17001 myself,slave - 0 0 0 connected`,
				idB+` 10\.0\.0\.3:7002@17002 slave,fail\?,nofailover - 0 0 0 disconnected`)},
		{name: "elected, the barrier not yet applied", self: idL, leader: idL, last: idL,
			nodes: nodesRe(
				idL+` 10\.0\.0\.1:7000@17000 myself,slave - 0 0 0 connected`,
				idA+` 10\.0\.0\.2:7001@17001 slave - 0 \d+ 0 connected`,
				idB+` 10\.0\.0\.3:7002@17002 slave,fail\?,nofailover - 0 0 0 disconnected`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := newFake(tc.self, tc.leader)
			fc.writable, fc.last = false, tc.last
			n := newNode(t, fc)
			c := n.client()
			if got := n.do(c, "CLUSTER", "INFO"); !strings.Contains(got, "cluster_state:fail\r\n") || !strings.Contains(got, "cluster_slots_ok:0\r\n") {
				t.Errorf("CLUSTER INFO: %q", got)
			}
			for _, sub := range []string{"SLOTS", "SHARDS"} {
				if got := n.do(c, "CLUSTER", sub); got != down {
					t.Errorf("CLUSTER %s: %q, want %q", sub, got, down)
				}
			}
			if got := n.do(c, "CLUSTER", "NODES"); !tc.nodes.MatchString(got) {
				t.Errorf("CLUSTER NODES:\n%s\nwant %s", got, tc.nodes)
			}
			if got := n.do(c, "INFO", "replication"); !strings.Contains(got, "role:slave\r\nmaster_host:"+tc.masterHost+"\r\n") ||
				!strings.Contains(got, "master_link_status:down\r\n") {
				t.Errorf("INFO replication: %q", got)
			}
			if got := n.do(c, "HELLO", "3"); !strings.Contains(got, "$role $replica") {
				t.Errorf("HELLO: %q", got)
			}
			if got := n.do(c, "DELAY.ADD", "foo", "0", "x"); got != down {
				t.Errorf("DELAY.ADD: %q, want %q", got, down)
			}
		})
	}
}

func TestClusterKeysInSlot(t *testing.T) {
	n := newNode(t, newFake(idL, idL))
	c := n.client()
	for _, k := range []string{"foo", "{foo}a", "{foo}b", "bar"} {
		n.do(c, "RPUSH", k, "x")
	}
	for _, s := range [][2]string{
		{"CLUSTER COUNTKEYSINSLOT 12182", ":3"},
		{"CLUSTER COUNTKEYSINSLOT 5061", ":1"},
		{"CLUSTER COUNTKEYSINSLOT 0", ":0"},
		{"CLUSTER GETKEYSINSLOT 5061 10", "*1 $bar"},
		{"CLUSTER GETKEYSINSLOT 12182 0", "*0"},
	} {
		if got := n.do(c, strings.Fields(s[0])...); got != s[1] {
			t.Errorf("%s: %q, want %q", s[0], got, s[1])
		}
	}
	got := n.do(c, "CLUSTER", "GETKEYSINSLOT", "12182", "2")
	if parts := strings.Fields(got); len(parts) != 3 || parts[0] != "*2" {
		t.Errorf("GETKEYSINSLOT 12182 2: %q", got)
	}
}

func TestWait(t *testing.T) {
	fc := newFake(idL, idL)
	fc.waitResult = 2
	n := newNode(t, fc)
	c := n.client()
	n.do(c, "RPUSH", "foo", "x")
	if got := n.do(c, "WAIT", "2", "100"); got != ":2" {
		t.Fatalf("WAIT 2 100: %q", got)
	}
	if got, want := strings.Join(fc.waits, ";"), "42 2 100ms"; got != want {
		t.Fatalf("WaitReplicas calls %q, want %q", got, want)
	}
	// Nothing to wait for: the followers holding the log now (A holds 40
	// of 42, B nothing), without waiting.
	fc.set(func(f *fakeCluster) { f.index = 40 })
	if got := n.do(c, "WAIT", "0", "0"); got != ":1" {
		t.Fatalf("WAIT 0 0: %q", got)
	}
	// Inside a transaction WAIT must not block while EXEC holds the engine.
	for _, s := range [][2]string{{"MULTI", "+OK"}, {"WAIT 2 0", "+QUEUED"}, {"EXEC", "*1 :1"}} {
		if got := n.do(c, strings.Fields(s[0])...); got != s[1] {
			t.Fatalf("%s: %q, want %q", s[0], got, s[1])
		}
	}
	if len(fc.waits) != 1 {
		t.Fatalf("WaitReplicas called again: %q", fc.waits)
	}
	for _, s := range [][2]string{
		{"WAIT x 0", "-" + errNotInteger},
		{"WAIT 1 x", "-ERR timeout is not an integer or out of range"},
		{"WAIT 1 -1", "-ERR timeout is negative"},
	} {
		if got := n.do(c, strings.Fields(s[0])...); got != s[1] {
			t.Errorf("%s: %q, want %q", s[0], got, s[1])
		}
	}
	fc.set(func(f *fakeCluster) { f.writable, f.leader = false, idA })
	if got := n.do(c, "WAIT", "1", "0"); got != "-"+errWaitReplica {
		t.Errorf("WAIT on a follower: %q", got)
	}
}

func TestInfoInClusterMode(t *testing.T) {
	t.Run("leader", func(t *testing.T) {
		n := newNode(t, newFake(idL, idL))
		got := n.do(n.client(), "INFO")
		for _, want := range []string{
			"redis_mode:cluster\r\n",
			"# Replication\r\nrole:master\r\nconnected_slaves:1\r\n" +
				"slave0:ip=10.0.0.2,port=7001,state=online,offset=40,lag=2\r\n" +
				"master_failover_state:no-failover\r\nmaster_replid:" + idL + "\r\n" +
				"master_replid2:0000000000000000000000000000000000000000\r\nmaster_repl_offset:42\r\n",
			"# Cluster\r\ncluster_enabled:1\r\n",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("INFO lacks %q:\n%s", want, got)
			}
		}
	})
	t.Run("follower", func(t *testing.T) {
		n := newNode(t, newFake(idA, idL))
		c := n.client()
		got := n.do(c, "INFO", "replication")
		want := "=# Replication\r\nrole:slave\r\nmaster_host:10.0.0.1\r\nmaster_port:7000\r\n" +
			"master_link_status:up\r\nmaster_last_io_seconds_ago:0\r\nmaster_sync_in_progress:0\r\n" +
			"slave_read_repl_offset:42\r\nslave_repl_offset:42\r\nslave_priority:100\r\nslave_read_only:1\r\n" +
			"replica_announced:1\r\nconnected_slaves:0\r\nmaster_failover_state:no-failover\r\n" +
			"master_replid:" + idL + "\r\nmaster_replid2:0000000000000000000000000000000000000000\r\n" +
			"master_repl_offset:42\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:1\r\nrepl_backlog_size:1048576\r\n" +
			"repl_backlog_first_byte_offset:0\r\nrepl_backlog_histlen:0\r\n"
		if got != want {
			t.Errorf("INFO replication:\n got %q\nwant %q", got, want)
		}
		if got := n.do(c, "HELLO", "3"); !strings.Contains(got, "$mode $cluster $role $replica") {
			t.Errorf("HELLO: %q", got)
		}
	})
	t.Run("no leader", func(t *testing.T) {
		n := newNode(t, newFake(idA, ""))
		got := n.do(n.client(), "INFO", "replication")
		if !strings.Contains(got, "role:slave\r\nmaster_host:\r\nmaster_port:0\r\nmaster_link_status:down\r\nmaster_last_io_seconds_ago:-1\r\n") ||
			!strings.Contains(got, "master_link_down_since_seconds:-1\r\n") {
			t.Errorf("INFO replication: %q", got)
		}
	})
}

func TestReadOnlyFlagInClientList(t *testing.T) {
	n := newNode(t, newFake(idA, idL))
	c := n.client()
	n.do(c, "READONLY")
	if got := n.do(c, "CLIENT", "INFO"); !strings.Contains(got, " flags=r ") {
		t.Errorf("CLIENT INFO after READONLY: %q", got)
	}
	n.do(c, "READWRITE")
	if got := n.do(c, "CLIENT", "INFO"); !strings.Contains(got, " flags=N ") {
		t.Errorf("CLIENT INFO after READWRITE: %q", got)
	}
	if got := n.do(c, "ASKING"); got != "+OK" {
		t.Errorf("ASKING: %q", got)
	}
}

// A node that stops leading answers every parked pop with the role change
// error, which client libraries retry against the new leader.
func TestUnblockAll(t *testing.T) {
	n := newNode(t, newFake(idL, idL))
	a, b := n.client(), n.client()
	if got := n.do(a, "DELAY.POP", "foo", "0"); got != "" || a.Block == nil {
		t.Fatalf("DELAY.POP on an empty queue: %q, parked %v", got, a.Block != nil)
	}
	blk := a.Block
	a.Block = nil
	n.do(b, "PING")
	if got := n.d.UnblockAll(ErrUnblockedRole); got != 1 {
		t.Fatalf("UnblockAll ended %d pops, want 1", got)
	}
	select {
	case msg := <-blk.Unblocked():
		blk.Unblock(a, msg)
	default:
		t.Fatal("the parked pop was not told to end")
	}
	if got, want := strings.Join(a.W.(*lineWriter).lines, " "), "-"+ErrUnblockedRole; got != want {
		t.Fatalf("reply %q, want %q", got, want)
	}
	if got := n.d.UnblockAll(ErrUnblockedRole); got != 0 {
		t.Fatalf("a second UnblockAll ended %d pops", got)
	}
	// The queue has no waiter left: a job added now stays ready.
	n.do(b, "RPUSH", "foo", "x")
	if got := n.eng.Len([]byte("foo")); got != 1 {
		t.Fatalf("ready length %d after the unblock, want 1", got)
	}
}

// While its log loads a node already routes: a follower sends keyed
// commands to the leader, and CLUSTER answers what needs no engine.
func TestClusterWhileLoading(t *testing.T) {
	d := New(Options{Loading: &engine.Loading{}, Config: map[string]string{}, Cluster: newFake(idA, idL)})
	c := d.NewClient(&lineWriter{proto: 2}, "a")
	n := &node{t: t, d: d}
	for _, s := range [][2]string{
		{"RPUSH foo x", movedFoo},
		{"DBSIZE", "-" + errLoading},
		{"CLUSTER MYID", "$" + idA},
		{"CLUSTER COUNTKEYSINSLOT 1", "-" + errLoading},
		{"CLUSTER GETKEYSINSLOT 1 1", "-" + errLoading},
		{"READONLY", "+OK"},
	} {
		if got := n.do(c, strings.Fields(s[0])...); got != s[1] {
			t.Errorf("%s: %q, want %q", s[0], got, s[1])
		}
	}
}

// WAIT covers the client's writes of the same pipeline: it knows the
// ticket of the last one (and waits for it to be durable before it reads
// the log's last index), blocking pops included.
func TestWaitKnowsTheClientsLastWrite(t *testing.T) {
	eng, err := engine.New(engine.Options{AppendOnly: true, Dir: t.TempDir(), Fsync: engine.FsyncNo})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	fc := newFake(idL, idL)
	n := &node{t: t, d: New(Options{Engine: eng, Config: map[string]string{}, Cluster: fc}), eng: eng}
	c := n.client()
	n.do(c, "RPUSH", "foo", "x")
	first := c.Ticket
	if first == 0 || c.woff != first {
		t.Fatalf("after RPUSH: ticket %d, woff %d", first, c.woff)
	}
	c.Ticket = 0 // as the connection does before each command
	n.do(c, "LLEN", "foo")
	if c.woff != first {
		t.Fatalf("a read moved woff from %d to %d", first, c.woff)
	}
	n.do(c, "DELAY.POP", "foo", "0")
	if c.woff <= first {
		t.Fatalf("a pop's ticket %d is not WAIT's (woff %d)", c.Ticket, c.woff)
	}
	if got := n.do(c, "WAIT", "1", "0"); got != ":0" || len(fc.waits) != 1 {
		t.Fatalf("WAIT: %q, calls %q", got, fc.waits)
	}
}

func TestCommandGetKeys(t *testing.T) {
	n := newNode(t, nil)
	c := n.client()
	for _, tc := range []struct{ args, want string }{
		{"COMMAND GETKEYS DELAY.ADD q 0 p DEADLETTER dlq", "$q $dlq"},
		{"COMMAND GETKEYS DELAY.POP a b 0", "$a $b"},
		{"COMMAND GETKEYS LMOVE src dst LEFT RIGHT", "$src $dst"},
		{"COMMAND GETKEYS PING", "-ERR The command has no key arguments"},
		{"COMMAND GETKEYS NOPE x", "-ERR Invalid command specified"},
		{"COMMAND GETKEYS DELAY.ADD q", "-ERR Invalid number of arguments specified for command"},
	} {
		if got := n.do(c, strings.Fields(tc.args)...); !strings.Contains(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.args, got, tc.want)
		}
	}
}

// In a TLS-only cluster (port 0) the announced ports are TLS ports: SHARDS
// names them tls-port, as Redis does for a node without a plain port, so
// clients that read SHARDS over TLS (rueidis) pick them.
func TestClusterShardsTLSOnly(t *testing.T) {
	fc := newFake(idA, idL)
	n := newNode(t, fc)
	n.d.opts.ClusterTLS = true
	got := n.do(n.client(), "CLUSTER", "SHARDS")
	if !strings.Contains(got, "*14 $id $"+idL+" $tls-port :7000 $ip $10.0.0.1 ") || strings.Contains(got, "$port") {
		t.Errorf("CLUSTER SHARDS, TLS only: %q", got)
	}
}
