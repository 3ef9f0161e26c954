package cluster

import (
	"errors"
	"fmt"
	"io"
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
// inspection and never read again (docs/decisions/raft-log-store.md), and
// a short text takes its name (boltMarker): an earlier release started on
// the directory finds no bolt file there and refuses to start, where an
// absent raft.db would have made it a node with an empty log.
const boltLog = "raft.db"

// boltMarker is what raft.db holds on this release: bbolt refuses it
// ("invalid database").
const boltMarker = "delayd: this node's Raft log is raft.log, which delayd 0.3.0 and later read; " +
	"raft.db.migrated, if any, is the log an earlier release kept, copied into raft.log\n"

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
	head := make([]byte, len(boltMarker))
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return writeMarker(dir) // a new node, or a crash after the rename
	} else if err != nil {
		return err
	}
	n, _ := io.ReadFull(f, head)
	f.Close()
	if string(head[:n]) == boltMarker {
		return nil
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
	if err := writeMarker(dir); err != nil {
		return err
	}
	ev := logger.Info().Str("from", path).Uint64("entries", last+1-from).Dur("took_ms", time.Since(start))
	if from > first && first != 0 {
		ev = ev.Uint64("skipped_before_gap", from-first)
	}
	ev.Msg("cluster: the raft log of an earlier release is copied into raft.log; the old file is kept as raft.db.migrated")
	return nil
}

// writeMarker puts boltMarker at raft.db: written beside, fsynced, renamed,
// the directory fsynced (which makes an earlier rename durable too).
func writeMarker(dir string) error {
	tmp := filepath.Join(dir, boltLog+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.WriteString(boltMarker)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, boltLog))
	}
	if err != nil {
		return err
	}
	return syncDir(dir)
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
