package cluster

import "time"

// Node is one member of the group as the commands show it (CLUSTER NODES,
// SLOTS, SHARDS, INFO replication, MOVED).
type Node struct {
	ID          string // 40 hex characters, as Redis node ids
	Addr        string // host:port clients reach (announced)
	BusAddr     string // host:port of its Raft traffic (announced)
	Leader      bool
	Self        bool
	Voter       bool
	Connected   bool          // the leader heard from it lately (always true for self)
	Match       uint64        // last log index known replicated to it (leader's view)
	LastHeard   time.Duration // since the leader last heard from it (0: self or unknown)
	ConfigEpoch uint64        // the Raft term it led in, for the leader; else 0
}
