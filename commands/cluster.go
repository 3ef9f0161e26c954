package commands

import (
	"crypto/sha1"
	"encoding/hex"
	"net"
	"strconv"
	"strings"
	"time"
)

// The Redis Cluster protocol over one Raft group: one shard holds all 16384
// slots; its master is the Raft leader and its replicas the followers.
// Replies have Redis 7's shapes (cluster.c, cluster_legacy.c), so cluster
// clients (go-redis, ioredis, redis-py, rueidis, redis-cli -c) find the
// leader the way they find a Redis master.
//
// A node calls itself master only while it takes writes (ClusterView's
// Leader): a node Raft has just elected, one restarted, or a follower that
// lost its leader never shows "myself,master" and then answers CLUSTERDOWN.
// While no leader is known, CLUSTER INFO says cluster_state:fail, NODES
// shows the master being replaced flagged fail? (as a Redis node shows the
// master it lost) or, when none was seen since the start, every node a
// replica of nobody, and SLOTS and SHARDS answer CLUSTERDOWN, as RedisRaft
// answers them. Every cluster client treats that error as a node it could
// not ask and keeps its map until another node gives one; an empty map
// would be taken: ioredis drops every connection on it and redis-py 4.3
// raises IndexError.

// shardIDOf is group g's shard id (CLUSTER MYSHARDID): the same on every
// node, as Redis's shard id is on a master and its replicas; shardID is
// the one of a one-group cluster.
var shardID = shardIDOf(0)

func shardIDOf(g int) string {
	sum := sha1.Sum([]byte("delayd shard " + strconv.Itoa(g)))
	return hex.EncodeToString(sum[:])
}

// versioned is a ClusterView with a version gate (cluster.Cluster; the
// tests' fakes have none).
type versioned interface {
	Version() int
	NodeVersion() int
}

type clusterSub struct {
	arity int // counts CLUSTER and the subcommand; negative: at least
	run   func(d *Dispatcher, c *Client, cl ClusterView, args [][]byte)
}

var clusterSubs map[string]clusterSub

func init() {
	clusterSubs = map[string]clusterSub{
		"info":            {2, clusterInfo},
		"myid":            {2, func(d *Dispatcher, c *Client, cl ClusterView, args [][]byte) { c.W.BulkString(cl.Self().ID) }},
		"myshardid":       {2, func(d *Dispatcher, c *Client, cl ClusterView, args [][]byte) { c.W.BulkString(shardIDOf(d.opts.Group)) }},
		"nodes":           {2, clusterNodes},
		"slots":           {2, clusterSlots},
		"shards":          {2, clusterShards},
		"keyslot":         {3, func(d *Dispatcher, c *Client, cl ClusterView, args [][]byte) { c.W.Int(int64(KeySlot(args[2]))) }},
		"countkeysinslot": {3, clusterCountKeys},
		"getkeysinslot":   {4, clusterGetKeys},
		"meet":            {-4, clusterMeet},
		"forget":          {3, clusterForget},
		"reset":           {-2, clusterReset},
		"replicate":       {3, clusterReplicate},
		"join":            {5, clusterJoin},
		"groups":          {2, clusterGroups},
		"failover":        {-2, clusterFailover},
		"handover":        {3, clusterHandOver},
		"slotchange":      {3, clusterSlotChange},
		"slotindex":       {2, clusterSlotIndex},
		"setslot":         {-4, clusterSetSlot},
		"addslots":        {-3, clusterAddSlots},
		"delslots":        {-3, clusterDelSlots},
		"bumpepoch":       {2, clusterBumpEpoch},
		"help":            {2, func(d *Dispatcher, c *Client, cl ClusterView, args [][]byte) { writeHelp(c.W, "CLUSTER", clusterHelp) }},
	}
}

var clusterHelp = []string{
	"ADDSLOTS <slot> [<slot> ...]",
	"    Assign slots to current node.",
	"BUMPEPOCH",
	"    Advance the cluster config epoch.",
	"COUNTKEYSINSLOT <slot>",
	"    Return the number of keys in <slot>.",
	"DELSLOTS <slot> [<slot> ...]",
	"    Delete slots information from current node.",
	"FAILOVER [FORCE|TAKEOVER]",
	"    Promote current replica node to being a master.",
	"FORGET <node-id>",
	"    Remove a node from the cluster.",
	"GETKEYSINSLOT <slot> <count>",
	"    Return key names stored by current node in a slot.",
	"GROUPS",
	"    Return the Raft groups: each one's number, the address this node serves it at, its slot ranges, its voters (and 1 for a group added by add-node).",
	"HANDOVER <node-id>",
	"    Make <node-id> the leader of its Raft group (what FAILOVER sends the leader).",
	"INFO",
	"    Return information about the cluster.",
	"JOIN <node-id> <bus-addr> <client-addr>",
	"    Add a node to the Raft group (what a node started with --cluster-join sends).",
	"KEYSLOT <key>",
	"    Return the hash slot for <key>.",
	"MEET <ip> <port> [<bus-port>]",
	"    Connect nodes into a working cluster.",
	"MYID",
	"    Return the node id.",
	"MYSHARDID",
	"    Return the node's shard id.",
	"NODES",
	"    Return cluster configuration seen by node. Output format:",
	"    <id> <ip:port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
	"REPLICATE <node-id>",
	"    Configure current node as replica to <node-id>.",
	"RESET [HARD|SOFT]",
	"    Reset current node (default: soft).",
	"SLOTCHANGE <json>",
	"    Commit a change of the slot map through the leader of Raft group 0 (what SETSLOT sends it).",
	"SLOTINDEX",
	"    At the leader of Raft group 0: the log index it applied (what a new leader of another group waits for).",
	"SLOTS",
	"    Return information about slots range mappings. Each range is made of:",
	"    start, end, master and replicas IP addresses, ports and ids",
	"SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
	"    Set slot state.",
	"SHARDS",
	"    Return information about slot range mappings and the nodes associated with them.",
}

func cmdCluster(d *Dispatcher, c *Client, args [][]byte) {
	cl := d.opts.Cluster
	if cl == nil {
		c.W.Error(errNoCluster)
		return
	}
	name := strings.ToLower(string(args[1]))
	sub, ok := clusterSubs[name]
	switch {
	case !ok:
		c.W.Error("ERR unknown subcommand '" + clip(args[1]) + "'. Try CLUSTER HELP.")
	case (sub.arity > 0 && len(args) != sub.arity) || (sub.arity < 0 && len(args) < -sub.arity):
		c.W.Error("ERR wrong number of arguments for 'cluster|" + name + "' command")
	default:
		sub.run(d, c, cl, args)
	}
}

// failoverer is a ClusterView that hands leadership over on demand
// (cluster.Cluster; the tests' fakes have none).
type failoverer interface {
	Failover() error
	HandOver(id string) error
}

// clusterFailover is CLUSTER FAILOVER [FORCE|TAKEOVER] sent to a replica:
// the group's leader hands leadership over to it once it holds the whole
// log (Raft's leadership transfer), so unlike Redis's FORCE and TAKEOVER
// it never loses a write; both options are taken and mean the same. It
// answers once the old leader stepped down; the new one takes writes a
// moment later, as after any election.
func clusterFailover(d *Dispatcher, c *Client, cl ClusterView, args [][]byte) {
	if len(args) > 3 || (len(args) == 3 && !strings.EqualFold(string(args[2]), "force") && !strings.EqualFold(string(args[2]), "takeover")) {
		c.W.Error(errSyntax)
		return
	}
	f, ok := cl.(failoverer)
	if !ok {
		c.W.Error("ERR CLUSTER FAILOVER is not supported here")
		return
	}
	if err := f.Failover(); err != nil {
		c.W.Error(codedErr(err))
		return
	}
	c.W.Status("OK")
}

// clusterHandOver is CLUSTER HANDOVER node-id, delayd's own: the leader
// hands leadership over to node-id (what FAILOVER sends it); a follower
// passes it on to the leader.
func clusterHandOver(d *Dispatcher, c *Client, cl ClusterView, args [][]byte) {
	f, ok := cl.(failoverer)
	if !ok {
		c.W.Error("ERR CLUSTER HANDOVER is not supported here")
		return
	}
	if err := f.HandOver(string(args[2])); err != nil {
		c.W.Error(codedErr(err))
		return
	}
	c.W.Status("OK")
}

// codedErr is err's line as it is when it starts with an error code (ERR,
// CLUSTERDOWN, a leader's own reply passed on), else as ErrorLine words it.
func codedErr(err error) string {
	s := err.Error()
	code, _, _ := strings.Cut(s, " ")
	if len(code) >= 3 && strings.Trim(code, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") == "" {
		return s
	}
	return ErrorLine(err)
}

// clusterGroups is CLUSTER GROUPS, delayd's own: per Raft group, [number,
// the address this node serves it at ("" when it holds no replica of it),
// [start, end, ...], its voters], and a fifth element, 1, for a group
// added since the bootstrap (add-node): a node that joins learns the
// bootstrap's split from it. A node that joins reads it to start the
// groups that have room (docs/decisions/raft-groups.md); with one group it
// is that group, at this address, with every slot (and no voter count).
func clusterGroups(d *Dispatcher, c *Client, cl ClusterView, args [][]byte) {
	gs := d.opts.Groups
	if gs == nil {
		c.W.Array(1)
		c.W.Array(3)
		c.W.Int(0)
		c.W.BulkString(cl.Self().Addr)
		c.W.Array(2)
		c.W.Int(0)
		c.W.Int(Slots - 1)
		return
	}
	base := gs.Count()
	if b, ok := gs.(interface{ Base() int }); ok {
		base = b.Base()
	}
	c.W.Array(gs.Count())
	for g := 0; g < gs.Count(); g++ {
		v, addr, voters := cl, "", 0
		if g != d.opts.Group {
			v = gs.View(g)
		}
		if v != nil {
			addr = v.Self().Addr
			for _, n := range v.Nodes() {
				if n.Voter {
					voters++
				}
			}
		}
		ranges := gs.Ranges(g)
		if g >= base {
			c.W.Array(5)
		} else {
			c.W.Array(4)
		}
		c.W.Int(int64(g))
		c.W.BulkString(addr)
		c.W.Array(2 * len(ranges))
		for _, r := range ranges {
			c.W.Int(int64(r[0]))
			c.W.Int(int64(r[1]))
		}
		c.W.Int(int64(voters))
		if g >= base {
			c.W.Int(1)
		}
	}
}

// keysInSlot lists up to limit keys (queues holding a job; with several
// groups, also those holding only a schedule, limit or pause) of a slot; the
// engine does not index keys by slot, so it is a scan of every queue name,
// O(queues), which is what these admin commands are for.
func keysInSlot(d *Dispatcher, c *Client, slot, limit int) ([]string, bool) {
	eng := d.engineFor(c)
	if eng == nil {
		c.W.Error(errLoading)
		return nil, false
	}
	match := func(name string) bool { return KeySlot(name) == slot }
	var keys []string
	for cursor := uint64(0); len(keys) < limit; {
		var chunk []string
		cursor, chunk = eng.Scan(cursor, 1024, match)
		keys = append(keys, chunk...)
		if cursor == 0 {
			break
		}
	}
	if d.opts.Groups != nil && len(keys) < limit {
		// A queue with a schedule, a limit or a pause and no job is no
		// key, but a slot's move must take it (MIGRATE), and SETSLOT NODE
		// must not leave it behind: with several groups it is listed.
		have := make(map[string]bool, len(keys))
		for _, k := range keys {
			have[k] = true
		}
		for _, k := range eng.QueuesWithState(match) {
			if !have[k] {
				keys = append(keys, k)
			}
		}
	}
	return keys[:min(len(keys), limit)], true
}

func clusterCountKeys(d *Dispatcher, c *Client, cl ClusterView, args [][]byte) {
	slot, ok := parseInt(args[2])
	if !ok {
		c.W.Error(errNotInteger)
		return
	}
	if slot < 0 || slot >= Slots {
		c.W.Error("ERR Invalid slot")
		return
	}
	if keys, ok := keysInSlot(d, c, int(slot), 1<<62); ok {
		c.W.Int(int64(len(keys)))
	}
}

func clusterGetKeys(d *Dispatcher, c *Client, cl ClusterView, args [][]byte) {
	slot, ok1 := parseInt(args[2])
	count, ok2 := parseInt(args[3])
	if !ok1 || !ok2 {
		c.W.Error(errNotInteger)
		return
	}
	if slot < 0 || slot >= Slots || count < 0 {
		c.W.Error("ERR Invalid slot or number of keys")
		return
	}
	keys, ok := keysInSlot(d, c, int(slot), int(min(count, 1<<30)))
	if !ok {
		return
	}
	c.W.Array(len(keys))
	for _, k := range keys {
		c.W.BulkString(k)
	}
}

func validPort(b []byte) (int, bool) {
	n, ok := parseInt(b)
	return int(n), ok && n >= 0 && n <= 65535
}

// clusterMeet is CLUSTER MEET ip port [bus-port]: the node serving clients
// at ip:port joins the group. The bus port is checked and otherwise unused:
// the node tells its own bus address when asked.
func clusterMeet(d *Dispatcher, c *Client, cl ClusterView, args [][]byte) {
	if len(args) > 5 {
		c.W.Error("ERR unknown subcommand or wrong number of arguments for 'meet'. Try CLUSTER HELP.")
		return
	}
	port, ok := validPort(args[3])
	if !ok {
		c.W.Error("ERR Invalid TCP base port specified: " + clip(args[3]))
		return
	}
	if len(args) == 5 {
		if _, ok := validPort(args[4]); !ok {
			c.W.Error("ERR Invalid TCP bus port specified: " + clip(args[4]))
			return
		}
	}
	if err := cl.Meet(string(args[2]), port); err != nil {
		c.W.Error(ErrorLine(err))
		return
	}
	c.W.Status("OK")
}

// clusterForget is CLUSTER FORGET node-id, with Redis's refusals; unlike
// Redis's, it removes the node from the group for good (no 60 second ban
// to repeat on every node): Raft membership is one decision.
func clusterForget(d *Dispatcher, c *Client, cl ClusterView, args [][]byte) {
	id := string(args[2])
	if gf, ok := d.opts.Groups.(groupForgetter); ok {
		if handled, err := gf.ForgetGroupNode(id); handled {
			if err != nil {
				c.W.Error(codedErr(err))
				return
			}
			c.W.Status("OK")
			return
		}
	}
	var found bool
	for _, n := range cl.Nodes() {
		found = found || n.ID == id
	}
	leader, known := cl.Leader()
	f, _ := cl.(forgetter)
	switch {
	case !found && f != nil && (f.Forgotten(id) || cl.Forget(id) == nil):
		// redis-cli --cluster del-node sends FORGET to every node: the
		// first removed it from the group for all. A follower may have
		// applied the configuration without the member entry yet: the
		// leader, asked, knows.
		c.W.Status("OK")
	case !found:
		c.W.Error("ERR Unknown node " + clip(args[2]))
	case id == cl.Self().ID:
		c.W.Error("ERR I tried hard but I can't forget myself...")
	case known && leader.ID == id:
		c.W.Error("ERR Can't forget my master!")
	default:
		if err := cl.Forget(id); err != nil {
			c.W.Error(ErrorLine(err))
			return
		}
		c.W.Status("OK")
	}
}

// groupForgetter is a Groups that removes a group added by add-node when
// FORGET names its master (del-node of that node; docs/decisions/
// add-node.md); handled is false for any other id, which FORGET treats
// as always.
type groupForgetter interface {
	ForgetGroupNode(id string) (handled bool, err error)
	// Gone says whether id is an address of a group removed so.
	Gone(id string) bool
}

// groupGone says whether this address's group has left the map (del-node
// removed it): its addresses answer a moment more, for redis-cli's last
// commands.
func (d *Dispatcher) groupGone() bool {
	gs := d.opts.Groups
	if gs == nil {
		return false
	}
	if gf, ok := gs.(groupForgetter); ok && d.opts.Cluster != nil && gf.Gone(d.opts.Cluster.Self().ID) {
		return true // the node removed, which may never apply its removal
	}
	return d.opts.Group >= gs.Count()
}

// clusterReplicate is CLUSTER REPLICATE node-id. An address replicates
// its own group's leader, always: REPLICATE of that leader answers OK, as
// Redis answers a replica already following it. So does REPLICATE at a
// replica of a group that owns no slot or has left the map: what redis-cli
// --cluster del-node sends the replicas of the master it removes, before
// it FORGETs it. Anything else is refused.
func clusterReplicate(d *Dispatcher, c *Client, cl ClusterView, args [][]byte) {
	id := string(args[2])
	if id == cl.Self().ID {
		c.W.Error("ERR Can't replicate myself")
		return
	}
	leader, ok := cl.Leader()
	gs := d.opts.Groups
	switch {
	case ok && leader.ID == id && !leader.Self:
		c.W.Status("OK")
	case gs != nil && !cl.Writable() && (d.groupGone() || len(gs.Ranges(d.opts.Group)) == 0):
		c.W.Status("OK")
	default:
		c.W.Error("ERR this address replicates its own Raft group's leader only: a node's role follows its group (docs/decisions/raft-groups.md)")
	}
}

// forgetter is what FORGET and RESET read of a Raft group beyond
// ClusterView (cluster.Cluster has it; the views of groups a node does not
// hold and the tests' fakes need not).
type forgetter interface {
	Forgotten(id string) bool
	Removed() bool
}

// clusterReset is CLUSTER RESET [HARD|SOFT], what redis-cli --cluster
// del-node sends the node it removed: Redis's node forgets every other
// node and becomes an empty master. A delayd node removed from its group
// (CLUSTER FORGET at another node) is alone already: OK, and nothing
// changes. A member is refused: its group's membership changes only
// through the group (FORGET it elsewhere first).
func clusterReset(d *Dispatcher, c *Client, cl ClusterView, args [][]byte) {
	if len(args) > 3 {
		c.W.Error("ERR syntax error")
		return
	}
	if len(args) == 3 {
		if m := strings.ToLower(string(args[2])); m != "hard" && m != "soft" {
			c.W.Error("ERR syntax error")
			return
		}
	}
	if f, ok := cl.(forgetter); ok && len(cl.Nodes()) > 1 && !d.groupGone() && !f.Removed() {
		c.W.Error("ERR this node is a member of its Raft group: CLUSTER FORGET it at another node first (redis-cli --cluster del-node does)")
		return
	}
	c.W.Status("OK")
}

// clusterJoin is CLUSTER JOIN node-id bus-addr client-addr, delayd's own:
// what a node started with --cluster-join sends a member to be added.
func clusterJoin(d *Dispatcher, c *Client, cl ClusterView, args [][]byte) {
	for _, a := range args[3:5] {
		if _, _, err := net.SplitHostPort(string(a)); err != nil {
			c.W.Error("ERR Invalid node address specified: " + clip(a))
			return
		}
	}
	if err := cl.Join(string(args[2]), string(args[3]), string(args[4])); err != nil {
		c.W.Error(ErrorLine(err))
		return
	}
	c.W.Status("OK")
}

// READONLY and READWRITE set whether a follower serves the client's reads
// (route.go); ASKING has nothing to do with one shard (there is never an
// ASK redirection) and only answers OK for clients that send it. Without
// cluster mode the three are refused, as Redis refuses them.
func cmdReadOnly(d *Dispatcher, c *Client, args [][]byte) {
	if d.opts.Cluster == nil {
		c.W.Error(errNoCluster)
		return
	}
	c.readonly.Store(strings.EqualFold(string(args[0]), "readonly"))
	c.W.Status("OK")
}

func cmdAsking(d *Dispatcher, c *Client, args [][]byte) {
	if d.opts.Cluster == nil {
		c.W.Error(errNoCluster)
		return
	}
	c.asking = true
	c.W.Status("OK")
}

const errWaitReplica = "ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated."

// cmdWait is WAIT numreplicas timeout: how many followers hold the
// client's writes, waiting up to timeout milliseconds (0: forever) for
// numreplicas of them. It blocks only this connection's goroutine. A single
// node has no replica, and never will, so it answers 0 at once where Redis
// would sit out the timeout first.
func cmdWait(d *Dispatcher, c *Client, args [][]byte) {
	n, ok := parseInt(args[1])
	if !ok {
		c.W.Error(errNotInteger)
		return
	}
	ms, ok := parseInt(args[2])
	if !ok {
		c.W.Error("ERR timeout is not an integer or out of range")
		return
	}
	if ms < 0 {
		c.W.Error(errNegTimeout)
		return
	}
	cl := d.opts.Cluster
	if cl == nil {
		c.W.Int(0)
		return
	}
	if !cl.Writable() {
		c.W.Error(errWaitReplica)
		return
	}
	if n <= 0 || c.tx.eng != nil {
		// Nothing to wait for, or inside EXEC, which must not block while
		// it holds the engine: Redis answers at once there too.
		c.W.Int(int64(replicasHolding(cl, cl.LastIndex())))
		return
	}
	// The client's writes of this very pipeline may not be in the Raft log
	// yet (the engine proposes batches as it flushes them): once the last
	// one is durable, LastIndex covers them all. A failed write does not
	// change what WAIT counts.
	d.Durable(c.woff)
	got := cl.WaitReplicas(cl.LastIndex(), int(min(n, 1<<30)), time.Duration(min(ms, 1<<40))*time.Millisecond)
	c.W.Int(int64(got))
}

// wrote remembers the ticket of the command's write, if it made one, as
// Redis's c->woff: what WAIT waits for.
func (c *Client) wrote() {
	if c.Ticket != 0 {
		c.woff = c.Ticket
	}
}

// replicasHolding counts the followers known to hold the log up to index.
func replicasHolding(cl ClusterView, index uint64) int {
	n := 0
	for _, node := range cl.Nodes() {
		if !node.Self && !node.Leader && node.Match >= index {
			n++
		}
	}
	return n
}

// clusterReplication is INFO replication in cluster mode, with the fields
// of a Redis 7 master (the leader, its followers as slaveN lines) or
// replica (a follower, its leader as master_host). Offsets are Raft log
// indexes; lag is seconds since the leader last heard from a follower.
func (d *Dispatcher) clusterReplication(cl ClusterView) [][2]string {
	itoa := strconv.Itoa
	utoa := func(n uint64) string { return strconv.FormatUint(n, 10) }
	last := cl.LastIndex()
	leader, known := cl.Leader()
	replID := d.replID
	if known {
		replID = leader.ID // one id per leadership, the same on every node
	} else if lost, ok := cl.LastLeader(); ok {
		leader = lost // a Redis replica names the master it lost, link down
	}
	var f [][2]string
	if known && leader.Self {
		f = append(f, [2]string{"role", "master"})
		var slaves [][2]string
		for _, n := range cl.Nodes() {
			if n.Self || !n.Connected {
				continue
			}
			host, port := hostPort(n.Addr)
			state := "online"
			if n.Match == 0 {
				state = "wait_bgsave" // catching up from a snapshot
			}
			slaves = append(slaves, [2]string{"slave" + itoa(len(slaves)),
				"ip=" + host + ",port=" + itoa(port) + ",state=" + state +
					",offset=" + utoa(n.Match) + ",lag=" + strconv.FormatInt(int64(n.LastHeard/time.Second), 10)})
		}
		f = append(f, [2]string{"connected_slaves", itoa(len(slaves))})
		f = append(f, slaves...)
	} else {
		host, port := hostPort(leader.Addr)
		link, lastIO := "down", "-1"
		if known && leader.Connected {
			link, lastIO = "up", strconv.FormatInt(int64(leader.LastHeard/time.Second), 10)
		}
		f = append(f,
			[2]string{"role", "slave"},
			[2]string{"master_host", host},
			[2]string{"master_port", itoa(port)},
			[2]string{"master_link_status", link},
			[2]string{"master_last_io_seconds_ago", lastIO},
			[2]string{"master_sync_in_progress", "0"},
			[2]string{"slave_read_repl_offset", utoa(last)},
			[2]string{"slave_repl_offset", utoa(last)},
		)
		if link == "down" {
			f = append(f, [2]string{"master_link_down_since_seconds", "-1"})
		}
		f = append(f,
			[2]string{"slave_priority", "100"},
			[2]string{"slave_read_only", "1"},
			[2]string{"replica_announced", "1"},
			[2]string{"connected_slaves", "0"},
		)
	}
	return append(f,
		[2]string{"master_failover_state", "no-failover"},
		[2]string{"master_replid", replID},
		[2]string{"master_replid2", strings.Repeat("0", 40)},
		[2]string{"master_repl_offset", utoa(last)},
		[2]string{"second_repl_offset", "-1"},
		[2]string{"repl_backlog_active", "1"},
		[2]string{"repl_backlog_size", "1048576"},
		[2]string{"repl_backlog_first_byte_offset", "0"},
		[2]string{"repl_backlog_histlen", "0"},
	)
}
