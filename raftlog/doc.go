// Package raftlog is a cluster node's Raft log: hashicorp/raft's LogStore
// as append-only segments of the AOF's format, where raft-boltdb kept a
// B-tree (docs/decisions/raft-log-store.md).
//
// A log is a manifest and segments, as a single node's AOF is
// (aof.OpenSegments, aof.WriteManifest): path is the manifest, path.<id>
// the segments, each a file of checksummed records, one Raft entry a
// record (encoding in entry.go; one over 16 MiB is split over records
// that follow each other). The entries are contiguous across the
// segments in the manifest's order; each segment's first index is its
// first record's. What is in memory is an index, the file offset of every
// entry, 8 bytes an entry: GetLog is one pread and a checksum, never a
// search. hashicorp/raft's LogCache in front serves recent entries without
// that.
//
// The operations Raft makes, and what each costs on disk:
//   - StoreLogs appends a batch with one write(2), and with Sync on
//     (appendfsync always) one fsync before it returns. A segment past
//     Options.SegmentSize is sealed (fsynced) and the next begins, between
//     batches.
//   - DeleteRange of a prefix (compaction after a snapshot) drops the
//     segments wholly inside it: a manifest change, then unlinks. Entries
//     of the prefix in the segment that also holds later ones stay on disk
//     until that segment goes; after a restart FirstIndex names the first
//     of them (older entries, still true ones: Raft only asks less often
//     for a snapshot).
//   - DeleteRange of a suffix (a follower's entries that conflict with a
//     new leader) drops the segments wholly inside it from the manifest,
//     then cuts the segment that holds its first entry with ftruncate, and
//     fsyncs it, before any entry is appended after it.
//   - DeleteRange of everything (Raft installed a snapshot: the store says
//     it is monotonic, so Raft drops the whole log rather than leave a gap)
//     starts a new empty segment and makes it the manifest's only one.
//
// Crashes. The manifest is the commit point of every change of the set of
// segments. A crash in the middle of a suffix deletion leaves a prefix of
// the old log at least as long as the new one: entries that conflicted
// with the leader, which a leader never counted as committed, and which
// Raft deletes again. A torn tail of the last segment is cut at open as
// the AOF's is (aof.ReplayAt); a sealed segment was fsynced before the
// next began, so only the last can be torn; damage before the tail (a
// flipped bit) refuses the open. Under Options.NoSync a crash loses the
// entries written since the last Sync, as a crash of the AOF under
// everysec does.
//
// Concurrency: Raft appends and deletes from its main goroutine while its
// replication goroutines read; Sync may be called from another goroutine
// (appendfsync everysec). Reads wait for a deletion, never for an append's
// write or fsync. The package starts no goroutines and reads no clock.
package raftlog
