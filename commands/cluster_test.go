package commands

import (
	"errors"
	"fmt"
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

	change func(cluster.SlotChange) error        // ChangeSlots, when set
	send   func(addr string, cmds [][]any) error // Send, when set
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
		{errors.New("ERR cannot reach 127.0.0.1:7000: refused"), "ERR cannot reach 127.0.0.1:7000: refused"}, // CLUSTER MEET: not "ERR ERR"
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
