// Package dirlock keeps a data directory to one process at a time.
//
// Two servers on one directory each append to the same log as if it were
// theirs alone: both accept writes, and the file that results is corrupt at
// the first interleaved record, so every job is lost at the next start. In
// cluster mode the second node waits on Raft's bolt files and gives up with
// "timeout", which says nothing of the cause. Acquire takes an exclusive
// advisory lock on a file named LOCK in the directory, as etcd's data dir
// and Redis Cluster's nodes.conf do, and writes the holder's pid into it so
// the refusal can name the process to look at.
//
// The lock is flock(2): it belongs to the open file, so the kernel drops it
// when the holder exits in any way, kill -9 included, and a restart after a
// crash never waits or needs a stale file cleaned up. For the same reason
// the file itself is never removed: unlinking it on release would let a
// process that had just opened the old file and one that creates a new one
// both hold "the" lock.
//
// Usage, first thing at start, before anything in the directory is opened:
//
//	lk, err := dirlock.Acquire(dir)
//	if err != nil {
//		return err // *dirlock.InUseError when another process holds it
//	}
//	defer lk.Release()
//
// # Caveats
//
// The lock is advisory: it keeps out processes that ask for it (every
// delayd, and delayd check-log), not a cp or an rm. flock over NFS is
// emulated with byte-range locks on Linux and unreliable elsewhere; keep
// data directories on local disks. On platforms without flock (see
// lock_other.go) Acquire writes the pid and locks nothing.
package dirlock
