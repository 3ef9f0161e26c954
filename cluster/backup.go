package cluster

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"

	"github.com/delayd/delayd/engine"
)

// Backup and restore of a whole cluster (docs/decisions/backup.md).
//
// A backup is taken on the leader, at a moment when every write it applied
// has committed (engine.BackupLeader): the state is then exactly the
// committed log's up to the applied index, and holds every write
// acknowledged before the request. A follower's state is a prefix of that,
// exact at no index a client can name, so a follower refuses.
//
// A restore makes a new cluster: `delayd restore --cluster` leaves the
// backup's snapshot in the data directory (RestoreFile); the node started
// there with --cluster-bootstrap bootstraps a one-node group as usual, and
// once it leads, installs the snapshot through Raft.Restore, which writes it
// as a Raft snapshot under the new group's configuration at an index past
// its log. Nodes that join later get it as they get any snapshot.

// RestoreFile is the name, in a node's raft/ directory, of a snapshot that
// waits to be restored: the engine's records (engine.Snapshot's stream).
const RestoreFile = "restore.snap"

// RestorePath is where `delayd restore --cluster` leaves the snapshot for
// the node whose data directory is dir.
func RestorePath(dir string) string { return filepath.Join(dir, "raft", RestoreFile) }

// Backup captures the state for a backup on the leader, exact at the Raft
// index it returns in the capture (engine.BackupLeader). With --cluster-ack
// leader it also waits until every answered batch has committed. It gives
// up after timeout.
func (c *Cluster) Backup(prefix int, timeout time.Duration) (engine.Capture, error) {
	if !c.Writable() {
		return engine.Capture{}, engine.ErrNotLeader
	}
	deadline := time.Now().Add(timeout)
	return c.eng.BackupLeader(prefix, timeout, func() (uint64, error) {
		// The engine's lock is held: no batch is proposed meanwhile, so
		// the answered ones only drain.
		for c.unacked.Load() > 0 {
			if time.Now().After(deadline) {
				return 0, engine.ErrBackupBusy
			}
			time.Sleep(100 * time.Microsecond)
		}
		if c.lost.Load() || !c.Writable() {
			return 0, engine.ErrNotLeader
		}
		// Every engine batch is applied (its future answered after the
		// state machine applied it); entries after the last of them up to
		// this index hold no engine records (membership, no-ops).
		return c.r().AppliedIndex(), nil
	})
}

// checkRestore decides, at start, what a waiting restore file means: to be
// restored once this node leads (a new group's first node, with no Raft
// state yet), or a refusal in one line.
func (c *Cluster) checkRestore(hasState bool) error {
	path := RestorePath(c.cfg.Dir)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	switch {
	case hasState:
		return fmt.Errorf("%s waits to be restored, but this node already holds Raft state (a start that did not finish the restore?): "+
			"run delayd restore --cluster again into an empty directory", path)
	case !c.cfg.Bootstrap:
		return fmt.Errorf("%s waits to be restored: start this node with --cluster-bootstrap yes, as the new cluster's first node "+
			"(the others join it empty)", path)
	}
	c.restorePath = path
	return nil
}

// restorePending installs the waiting snapshot as this new leader's state,
// before it takes writes. Called by becomeLeader after the barrier, without
// the state machine's lock (Raft.Restore calls its Restore).
func (c *Cluster) restorePending() error {
	path := c.restorePath
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	// The state machine's snapshot is the members' header, then the
	// engine's records (fsm.go): the members are the new group's.
	ms, err := json.Marshal(c.fsm.memberList())
	if err != nil {
		return err
	}
	var hdr [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(hdr[:], uint64(len(ms)))
	size := int64(k + len(ms) + len(data))
	r := io.MultiReader(bytes.NewReader(hdr[:k]), bytes.NewReader(ms), bytes.NewReader(data))
	start := time.Now()
	if err := c.r().Restore(&raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Size: size}, r, 0); err != nil {
		return fmt.Errorf("restoring %s: %w", path, err)
	}
	// The snapshot is Raft's now; without the file a restart is an
	// ordinary one.
	if err := os.Remove(path); err != nil {
		c.log.Warn().Err(err).Str("file", path).Msg("cluster: restored, but the restore file was not removed (remove it before the next start)")
	}
	c.restorePath = ""
	c.log.Info().Str("file", path).Int64("bytes", size).Uint64("index", c.r().AppliedIndex()).
		Dur("took_ms", time.Since(start)).Msg("cluster: the backup is restored; nodes that join get it by snapshot")
	return nil
}
