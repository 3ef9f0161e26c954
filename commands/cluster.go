package commands

import (
	"crypto/sha1"
	"encoding/hex"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/delayd/delayd/cluster"
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
		"join":            {5, clusterJoin},
		"groups":          {2, clusterGroups},
		"failover":        {-2, clusterFailover},
		"handover":        {3, clusterHandOver},
		"help":            {2, func(d *Dispatcher, c *Client, cl ClusterView, args [][]byte) { writeHelp(c.W, "CLUSTER", clusterHelp) }},
	}
}

var clusterHelp = []string{
	"COUNTKEYSINSLOT <slot>",
	"    Return the number of keys in <slot>.",
	"FAILOVER [FORCE|TAKEOVER]",
	"    Promote current replica node to being a master.",
	"FORGET <node-id>",
	"    Remove a node from the cluster.",
	"GETKEYSINSLOT <slot> <count>",
	"    Return key names stored by current node in a slot.",
	"GROUPS",
	"    Return the Raft groups: each one's number, the address this node serves it at, and its slot ranges.",
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
	"SLOTS",
	"    Return information about slots range mappings. Each range is made of:",
	"    start, end, master and replicas IP addresses, ports and ids",
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

// shardView is the one shard as the protocol shows it.
type shardView struct {
	// master is the leader when known; else the last leader, marked not
	// Connected, when hasMaster; else nothing.
	master    cluster.Node
	hasMaster bool
	known     bool // a leader takes writes: the slots are served
	replicas  []cluster.Node
}

// groupShard is one group's shard, with what the views need beside it.
type groupShard struct {
	shardView
	cl     ClusterView // the group's view; nil: not started on this node
	ranges [][2]int
}

// shards lists the cluster's shards, one per group in group order, each
// with its slots; with one group, the one shard of all slots. A group this
// address does not serve shows this node as a member like any other: this
// address is not that member.
func (d *Dispatcher) shards(cl ClusterView) []groupShard {
	gs := d.opts.Groups
	if gs == nil {
		return []groupShard{{shardView: shard(cl), cl: cl, ranges: [][2]int{{0, Slots - 1}}}}
	}
	out := make([]groupShard, gs.Count())
	for g := range out {
		out[g].ranges = gs.Ranges(g)
		v := cl
		if g != d.opts.Group {
			v = gs.View(g)
		}
		if v == nil {
			continue
		}
		out[g].cl, out[g].shardView = v, shard(v)
		if g != d.opts.Group {
			out[g].master.Self = false
			for i := range out[g].replicas {
				out[g].replicas[i].Self = false
			}
		}
	}
	return out
}

// allKnown says whether every shard has a leader taking writes.
func allKnown(shards []groupShard) bool {
	for _, s := range shards {
		if !s.known {
			return false
		}
	}
	return true
}

// slotRange writes a range as CLUSTER NODES does: "5" or "0-5460".
func slotRange(r [2]int) string {
	if r[0] == r[1] {
		return strconv.Itoa(r[0])
	}
	return strconv.Itoa(r[0]) + "-" + strconv.Itoa(r[1])
}

// shard is the shard now: the leader as master and the other members, in
// Nodes' order, as its replicas. Both come from one Nodes call: a leader
// elected between two calls would be listed twice, or not at all.
func shard(cl ClusterView) shardView {
	var v shardView
	nodes := cl.Nodes()
	for _, n := range nodes {
		if n.Leader {
			v.master, v.known, v.hasMaster = n, true, true
			break
		}
	}
	if !v.known {
		if last, ok := cl.LastLeader(); ok {
			last.Connected, last.Leader = false, false
			v.master, v.hasMaster = last, true
		}
	}
	for _, n := range nodes {
		if !v.hasMaster || n.ID != v.master.ID {
			v.replicas = append(v.replicas, n)
		}
	}
	return v
}

// hostPort splits a node's address; a port that does not parse is 0.
func hostPort(addr string) (string, int) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, 0
	}
	port, _ := strconv.Atoi(p)
	return host, port
}

// offset is a node's replication offset: the last log index it holds.
func offset(cl ClusterView, n cluster.Node) uint64 {
	if n.Self {
		return cl.LastIndex()
	}
	return n.Match
}

// clusterInfo is CLUSTER INFO. With several groups: ok only while every
// group has a leader; the slots of the groups that have one are ok, the
// others' fail; each group's members are known nodes (one address each);
// the size is the number of groups; the current epoch the highest term.
func clusterInfo(d *Dispatcher, c *Client, cl ClusterView, args [][]byte) {
	master, known := cl.Leader()
	myEpoch := master.ConfigEpoch
	if !known {
		myEpoch = 0
	}
	ok, nodes, size, epoch := 0, 0, 1, cl.Term()
	if gs := d.opts.Groups; gs == nil {
		if known {
			ok = Slots
		}
		nodes = len(cl.Nodes())
	} else {
		size = gs.Count()
		for g := 0; g < size; g++ {
			v := cl
			if g != d.opts.Group {
				v = gs.View(g)
			}
			if v == nil {
				continue
			}
			nodes += len(v.Nodes())
			epoch = max(epoch, v.Term())
			if _, known := v.Leader(); known {
				for _, r := range gs.Ranges(g) {
					ok += r[1] - r[0] + 1
				}
			}
		}
	}
	state := "ok"
	if ok < Slots {
		state = "fail"
	}
	var sb strings.Builder
	for _, f := range [][2]string{
		{"cluster_state", state},
		{"cluster_slots_assigned", strconv.Itoa(Slots)},
		{"cluster_slots_ok", strconv.Itoa(ok)},
		{"cluster_slots_pfail", "0"},
		{"cluster_slots_fail", strconv.Itoa(Slots - ok)},
		{"cluster_known_nodes", strconv.Itoa(nodes)},
		{"cluster_size", strconv.Itoa(size)},
		{"cluster_current_epoch", strconv.FormatUint(epoch, 10)},
		{"cluster_my_epoch", strconv.FormatUint(myEpoch, 10)},
		// Raft's traffic is not counted in Redis's message types.
		{"cluster_stats_messages_sent", "0"},
		{"cluster_stats_messages_received", "0"},
		{"total_cluster_links_buffer_limit_exceeded", "0"},
	} {
		sb.WriteString(f[0] + ":" + f[1] + "\r\n")
	}
	if v, ok := cl.(versioned); ok {
		// The version gate (cluster/versions.go): what the cluster writes,
		// and what this node reads, which the leader asks here.
		sb.WriteString("delayd_cluster_version:" + strconv.Itoa(v.Version()) + "\r\n")
		sb.WriteString("delayd_node_version:" + strconv.Itoa(v.NodeVersion()) + "\r\n")
	}
	c.W.Verbatim(sb.String())
}

// clusterNodes is CLUSTER NODES, one line per node as Redis's
// clusterGenNodeDescription writes it:
//
//	<id> <ip:port@cport> <flags> <master> <ping-sent> <pong-recv> <config-epoch> <link-state> [<slots>]
//
// flags: myself, master or slave, fail? for a member the leader has not
// heard from lately (or the master this node lost), nofailover for a
// non-voter (it cannot be elected). A replica shows its master's config
// epoch, as in Redis; a replica of no known master shows "-" for it. With
// several groups, each group's members follow one another, a group this
// node has not started yet shows nothing.
func clusterNodes(d *Dispatcher, c *Client, cl ClusterView, args [][]byte) {
	now := time.Now()
	var sb strings.Builder
	for _, v := range d.shards(cl) {
		master := v.master
		line := func(n cluster.Node, isMaster bool) {
			host, port := hostPort(n.Addr)
			_, bus := hostPort(n.BusAddr)
			sb.WriteString(n.ID + " " + host + ":" + strconv.Itoa(port) + "@" + strconv.Itoa(bus) + " ")
			var flags []string
			if n.Self {
				flags = append(flags, "myself")
			}
			if isMaster {
				flags = append(flags, "master")
			} else {
				flags = append(flags, "slave")
			}
			if !n.Self && !n.Connected {
				flags = append(flags, "fail?")
			}
			if !n.Voter {
				flags = append(flags, "nofailover")
			}
			sb.WriteString(strings.Join(flags, ","))
			if isMaster || !v.hasMaster {
				sb.WriteString(" -")
			} else {
				sb.WriteString(" " + master.ID)
			}
			var pong int64 // Redis shows 0 for itself
			if !n.Self && (n.Connected || n.LastHeard > 0) {
				pong = now.Add(-n.LastHeard).UnixMilli()
			}
			sb.WriteString(" 0 " + strconv.FormatInt(pong, 10) + " " + strconv.FormatUint(master.ConfigEpoch, 10))
			if n.Self || n.Connected {
				sb.WriteString(" connected")
			} else {
				sb.WriteString(" disconnected")
			}
			if isMaster {
				for _, r := range v.ranges {
					sb.WriteString(" " + slotRange(r))
				}
			}
			sb.WriteByte('\n')
		}
		if v.hasMaster {
			line(master, true)
		}
		for _, n := range v.replicas {
			line(n, false)
		}
	}
	c.W.Verbatim(sb.String())
}

// clusterSlots is CLUSTER SLOTS: each group's slot ranges, its master
// first, then the replicas a client may read from (READONLY): those the
// leader hears from. Each node is [ip, port, id, {}] as Redis 7 writes it
// (the map holds a hostname when one is announced; delayd announces
// addresses). While any group knows no leader it answers CLUSTERDOWN (the
// header comment).
func clusterSlots(d *Dispatcher, c *Client, cl ClusterView, args [][]byte) {
	shards := d.shards(cl)
	if !allKnown(shards) {
		c.W.Error(errClusterDown)
		return
	}
	n := 0
	for _, v := range shards {
		n += len(v.ranges)
	}
	w := c.W
	w.Array(n)
	for _, v := range shards {
		nodes := []cluster.Node{v.master}
		for _, n := range v.replicas {
			if n.Connected {
				nodes = append(nodes, n)
			}
		}
		for _, r := range v.ranges {
			w.Array(2 + len(nodes))
			w.Int(int64(r[0]))
			w.Int(int64(r[1]))
			for _, n := range nodes {
				host, port := hostPort(n.Addr)
				w.Array(4)
				w.BulkString(host)
				w.Int(int64(port))
				w.BulkString(n.ID)
				w.Map(0)
			}
		}
	}
}

// clusterShards is CLUSTER SHARDS: one shard per group, {slots: [start,
// end, ...], nodes: [...]}, each node a map as Redis 7's
// addNodeDetailsToShardReply writes it. health is fail for a member the
// leader has not heard from, loading for a replica that holds nothing yet,
// else online (rueidis skips nodes that are not online). While any group
// knows no leader it answers CLUSTERDOWN.
func clusterShards(d *Dispatcher, c *Client, cl ClusterView, args [][]byte) {
	shards := d.shards(cl)
	if !allKnown(shards) {
		c.W.Error(errClusterDown)
		return
	}
	w := c.W
	w.Array(len(shards))
	for _, v := range shards {
		master, replicas := v.master, v.replicas
		w.Map(2)
		w.BulkString("slots")
		w.Array(2 * len(v.ranges))
		for _, r := range v.ranges {
			w.Int(int64(r[0]))
			w.Int(int64(r[1]))
		}
		w.BulkString("nodes")
		w.Array(1 + len(replicas))
		node := func(n cluster.Node, isMaster bool) {
			host, port := hostPort(n.Addr)
			off := offset(v.cl, n)
			role, health := "master", "online"
			if !isMaster {
				role = "replica"
			}
			switch {
			case !n.Self && !n.Connected:
				health = "fail"
			case !isMaster && off == 0:
				health = "loading"
			}
			w.Map(7)
			w.BulkString("id")
			w.BulkString(n.ID)
			if d.opts.ClusterTLS {
				w.BulkString("tls-port")
			} else {
				w.BulkString("port")
			}
			w.Int(int64(port))
			w.BulkString("ip")
			w.BulkString(host)
			w.BulkString("endpoint")
			w.BulkString(host)
			w.BulkString("role")
			w.BulkString(role)
			w.BulkString("replication-offset")
			w.Int(int64(off))
			w.BulkString("health")
			w.BulkString(health)
		}
		node(master, true)
		for _, n := range replicas {
			node(n, false)
		}
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
// the address this node serves it at, [start, end, ...]]. A node that
// joins reads it to start the same groups (docs/decisions/raft-groups.md);
// with one group it is that group, at this address, with every slot.
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
	c.W.Array(gs.Count())
	for g := 0; g < gs.Count(); g++ {
		v, addr := cl, ""
		if g != d.opts.Group {
			v = gs.View(g)
		}
		if v != nil {
			addr = v.Self().Addr
		}
		ranges := gs.Ranges(g)
		c.W.Array(3)
		c.W.Int(int64(g))
		c.W.BulkString(addr)
		c.W.Array(2 * len(ranges))
		for _, r := range ranges {
			c.W.Int(int64(r[0]))
			c.W.Int(int64(r[1]))
		}
	}
}

// keysInSlot lists up to limit keys (queues holding a job) of a slot; the
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
	var found bool
	for _, n := range cl.Nodes() {
		found = found || n.ID == id
	}
	leader, known := cl.Leader()
	switch {
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
