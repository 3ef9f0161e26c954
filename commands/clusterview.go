package commands

import (
	"time"

	"github.com/delayd/delayd/cluster"
)

// ClusterView is what the commands need of the Raft group (cluster mode
// only; nil otherwise). The cluster package implements it; tests fake it.
type ClusterView interface {
	// Self is this node; Nodes every member, self included, leader first.
	Self() cluster.Node
	Nodes() []cluster.Node
	// Leader is the node that takes writes now; ok is false when none is
	// known (an election is running, this node is cut off, or it was
	// elected and cannot take writes yet). Self is the leader exactly while
	// Writable: a node never names itself master and answers CLUSTERDOWN.
	Leader() (n cluster.Node, ok bool)
	// LastLeader is, while no leader is known, the other node that led
	// last (the master an election replaces); ok is false otherwise.
	LastLeader() (n cluster.Node, ok bool)
	// Writable says whether this node leads and its engine takes writes.
	Writable() bool
	// Term is the current Raft term (CLUSTER INFO cluster_current_epoch).
	Term() uint64
	// LastIndex is the last log index this node has appended (committed or
	// not); WaitReplicas waits for followers to hold up to it.
	LastIndex() uint64
	// WaitReplicas blocks until n followers hold the log up to index, or
	// timeout passes (0: forever), and returns how many hold it.
	WaitReplicas(index uint64, n int, timeout time.Duration) int
	// Meet adds the node serving clients at host:port to the group (CLUSTER
	// MEET); Join adds a node known by id and addresses (CLUSTER JOIN, what
	// --cluster-join sends); Forget removes one (CLUSTER FORGET). On a
	// follower they are forwarded to the leader.
	Meet(host string, port int) error
	Join(id, busAddr, addr string) error
	Forget(id string) error
}

// Groups is, on a node whose cluster splits the slots over several Raft
// groups (--cluster-groups), every group as this node sees it. Each group
// has its own address and dispatcher on the node; the dispatcher's
// Options.Cluster is its group's view and Options.Group its number. Nil
// with one group, and then everything answers as it always did.
type Groups interface {
	// Count is how many groups the slots are split over.
	Count() int
	// Owner is the group owning slot; O(1), on the routing path.
	Owner(slot int) int
	// Ranges lists group g's slots as inclusive [start, end] ranges.
	Ranges(g int) [][2]int
	// Migrating is the group a slot moves to (CLUSTER SETSLOT MIGRATING at
	// its owner) and Importing the group taking it in (SETSLOT IMPORTING);
	// ok is false while it is not moving. O(1).
	Migrating(slot int) (g int, ok bool)
	Importing(slot int) (g int, ok bool)
	// View is group g as this node sees it; nil while this node has not
	// started it.
	View(g int) ClusterView
}
