// Package cluster replicates the engine through a Raft group (hashicorp/raft)
// and says who leads, for the Redis Cluster protocol the commands answer.
// It sits between commands and engine, and only with --cluster-enabled.
//
// The engine is the state machine. The leader's engine decides every effect
// (which job a pop takes, deadlines, ids) and its flusher proposes each
// group-commit batch of records as one Raft entry; followers apply committed
// entries as replay applies the log. Snapshots are the engine's encoded jobs.
// A leader that loses leadership with entries in flight rebuilds its engine
// from its last snapshot and the committed log, since those entries may never
// commit. While nodes of an older release are members, the cluster's format
// version holds the leader to what they read (versions.go). With several
// groups, group 0's log also keeps the slot map, which slot each group owns
// and which slots are moving (slots.go); each group has at most
// --cluster-replicas voters (members.go), and each process hands over the
// leadership of groups it leads beyond its share (placement.go). On the bus,
// AppendEntries go in frames of this package's own once every member reads
// them (bus.go); every other RPC is hashicorp/raft's NetworkTransport.
package cluster
