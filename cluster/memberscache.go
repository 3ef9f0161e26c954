package cluster

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// The members' client addresses are state-machine state: a node learns
// them by applying the log. A node that restarts applies its log only once
// the leader tells it the commit index, and a leader that has failed to
// reach a down peer for a while sends it entries only every 10 s
// (hashicorp/raft's replication backoff), though its heartbeats get through
// at once. Until then the restarted node knew the leader's id but not where
// its clients connect, so it answered CLUSTERDOWN and showed only itself in
// CLUSTER NODES for up to 10 s while the cluster was healthy. So each node
// keeps the members it last applied in a file beside its Raft log, and at
// start reads it as where members' clients connect until the log catches
// up. The file is a hint, never the truth: who is a member is Raft's
// configuration, and an entry the log applies replaces what the file said.
const membersCacheFile = "members.json"

// loadMembersCache reads the members a node applied before it stopped; a
// missing or unreadable file is no hint at all.
func loadMembersCache(dir string) map[string]member {
	b, err := os.ReadFile(filepath.Join(dir, membersCacheFile))
	if err != nil {
		return nil
	}
	var ms map[string]member
	if json.Unmarshal(b, &ms) != nil {
		return nil
	}
	return ms
}

// saveMembersCache writes ms whole (a new file renamed over the old, so a
// crash leaves one or the other). It is not fsynced: after a power loss the
// node waits for its log, as it did before the file existed.
func saveMembersCache(dir string, ms map[string]member) error {
	b, err := json.Marshal(ms)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, membersCacheFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, membersCacheFile))
}
