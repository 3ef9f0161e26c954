package commands

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delayd/delayd/engine"
)

// CLUSTER's subcommands, WAIT, INFO and CLIENT LIST in cluster mode, against
// the fakeCluster of cluster_test.go.

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
	if got := n.do(c, "CLUSTER", "HELP"); !strings.HasPrefix(got, "*51 +CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are: +ADDSLOTS <slot> [<slot> ...]") {
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

// A pop the engine parked while it led, but that the connection registers
// only after the engine followed (and so after the role change's
// UnblockAll), is ended with the role change error all the same: a waiter
// on a follower is never served, and would otherwise wait out its timeout.
func TestBlockAfterStepDownUnblocked(t *testing.T) {
	n := newNode(t, newFake(idL, idL))
	a := n.client()
	_, w, err := n.eng.PopOrWait([][]byte{[]byte("foo")}, engine.PopDelay)
	if err != nil || w == nil {
		t.Fatalf("PopOrWait on an empty queue: waiter %v, %v", w, err)
	}
	n.eng.Follow()
	if got := n.d.UnblockAll(ErrUnblockedRole); got != 0 {
		t.Fatalf("UnblockAll found %d pops before the client registered its block", got)
	}
	blk := newBlock(a, n.eng, w, 0, engine.PopDelay)
	select {
	case msg := <-blk.Unblocked():
		if msg != ErrUnblockedRole {
			t.Fatalf("unblocked with %q, want the role change error", msg)
		}
	default:
		t.Fatal("a block registered on a follower was left waiting")
	}
}
