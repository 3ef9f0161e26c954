package commands

import (
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/delayd/delayd/cluster"
)

// The views of the cluster a client reads: CLUSTER INFO, NODES, SLOTS and
// SHARDS, one shard per Raft group (see cluster.go for the protocol's rules).

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
	shards := d.shards(cl)
	for g, v := range shards {
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
				if n.Self {
					d.movingSlots(&sb, shards, g)
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

// movingSlots writes, on the myself line of group g's master, its slots
// moving out, "[slot->-target-id]", and in, "[slot-<-source-id]", as Redis
// writes its open slots (redis-cli --cluster check and fix read them); the
// ids are the other group's master's.
func (d *Dispatcher) movingSlots(sb *strings.Builder, shards []groupShard, g int) {
	gs := d.opts.Groups
	if gs == nil {
		return
	}
	for s := 0; s < Slots; s++ {
		if to, ok := gs.Migrating(s); ok && gs.Owner(s) == g && to < len(shards) && shards[to].hasMaster {
			sb.WriteString(" [" + strconv.Itoa(s) + "->-" + shards[to].master.ID + "]")
		}
		if in, ok := gs.Importing(s); ok && in == g {
			if from := gs.Owner(s); from < len(shards) && shards[from].hasMaster {
				sb.WriteString(" [" + strconv.Itoa(s) + "-<-" + shards[from].master.ID + "]")
			}
		}
	}
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
