package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/rs/zerolog"
	"go.etcd.io/bbolt"

	"github.com/delayd/delayd/raftlog"
)

// boltLog is the Raft log of releases before raftlog: raft-boltdb's file.
// Once its entries are copied it is renamed boltLog+".migrated", kept for
// inspection and never read again (docs/decisions/raft-log-store.md).
const boltLog = "raft.db"

// migrateBolt copies the entries of a raft.db an earlier release left in
// dir into log, once. While raft.db keeps its name no copy has finished:
// what log holds is a copy cut short, which is emptied and made again. The
// copy is fsynced before the rename, the rename before the directory
// fsync returns: a crash anywhere leaves raft.db or a whole copy.
//
// raft-boltdb is not monotonic: a follower that installed a snapshot kept
// the entries before it, then a gap, then the entries after. Only the run
// that ends at the last entry is copied: the entries before a gap are
// older than a snapshot this node holds, and the new log takes no gaps.
func migrateBolt(dir string, log *raftlog.Store, logger zerolog.Logger) error {
	path := filepath.Join(dir, boltLog)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	start := time.Now()
	if first, _ := log.FirstIndex(); first != 0 {
		last, _ := log.LastIndex()
		if err := log.DeleteRange(first, last); err != nil {
			return err
		}
	}
	old, err := raftboltdb.New(raftboltdb.Options{
		Path:        path,
		BoltOptions: &bbolt.Options{Timeout: 10 * time.Second, ReadOnly: true},
	})
	if err != nil {
		return fmt.Errorf("the raft log of an earlier release, %s: %w", path, err)
	}
	defer old.Close()
	first, err := old.FirstIndex()
	if err != nil {
		return err
	}
	last, err := old.LastIndex()
	if err != nil {
		return err
	}
	from := last + 1 // the first entry of the run that ends at last
	var l raft.Log
	for from > first && first != 0 {
		if err := old.GetLog(from-1, &l); errors.Is(err, raft.ErrLogNotFound) {
			break
		} else if err != nil {
			return fmt.Errorf("%s: entry %d: %w", path, from-1, err)
		}
		from--
	}
	batch := make([]*raft.Log, 0, 256)
	for i := from; i <= last; i++ {
		e := new(raft.Log)
		if err := old.GetLog(i, e); err != nil {
			return fmt.Errorf("%s: entry %d: %w", path, i, err)
		}
		if batch = append(batch, e); len(batch) == cap(batch) || i == last {
			if err := log.StoreLogs(batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	if err := log.Sync(); err != nil {
		return err
	}
	old.Close()
	if err := os.Rename(path, path+".migrated"); err != nil {
		return err
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	ev := logger.Info().Str("from", path).Uint64("entries", last+1-from).Dur("took_ms", time.Since(start))
	if from > first && first != 0 {
		ev = ev.Uint64("skipped_before_gap", from-first)
	}
	ev.Msg("cluster: the raft log of an earlier release is copied into raft.log; raft.db is kept as raft.db.migrated")
	return nil
}

// syncDir fsyncs a directory: the renames in it are on disk.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
