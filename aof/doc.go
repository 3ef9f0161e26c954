// Package aof is delayd's append-only log: a file of checksummed, length-prefixed
// records, written in batches and read back once at start-up.
//
// The package is a leaf data structure in the manner of etcd's wal and pebble's
// record packages. It frames opaque payloads; what a payload means (an add, a
// cancel, a pop) is the engine's business. It starts no goroutines, reads no
// clock and imports nothing from delayd. All file access goes through the small
// [FS] seam so that tests can run the real code on [MemFS] and crash it.
//
// # Usage
//
// At start-up the engine replays the log, then keeps appending to it:
//
//	res, err := aof.Replay(aof.OS, path, apply) // apply sees each payload once
//	if err != nil { ... }                        // *CorruptError: refuse to start, point at --repair
//	if res.TornBytes > 0 { log.Warn()... }       // a torn tail was cut off (the file is already truncated)
//	w, err := aof.OpenAppend(aof.OS, path, res.Size)
//
// [ReplayProgress] is Replay that also reports the offset reached about once
// per MiB, for a caller that shows a long replay's progress or gives it up
// (the engine logs it every second and answers INFO with it); the clock and
// any goroutine stay the caller's.
//
// The engine does group commit from its own goroutine: [Writer.Append] for each
// record in apply order (memory only), then one [Writer.Flush] (one write(2)) and,
// under appendfsync always, one [Writer.Sync] (one fsync) for the whole batch;
// every reply in the batch waits only for that fsync.
//
// A rewrite writes the live set to a new file beside the log and swaps it in:
//
//	w, tmp, err := aof.CreateTemp(aof.OS, path) // path + ".rewrite.tmp"
//	... w.Append(record) for every live job, then the tail of writes made meanwhile, w.Flush() ...
//	err = aof.Install(aof.OS, tmp, path)        // fsync tmp, rename over path, fsync the directory
//
// After Install the rewrite Writer may go on appending: its file descriptor
// follows the file to its new name. (Or Close it and OpenAppend(path, w.Size()).)
//
// # Segments
//
// A log is a manifest and segments beside it (segments.go): [OpenSegments]
// makes the manifest's path a segmented log (a log of an earlier release
// becomes segment 1), [WriteManifest] changes the set atomically, and each
// segment is a file of the format below, replayed in the manifest's order.
// Which segment to append to, roll or drop is the caller's business.
//
// # File format
//
// A log file is an 8-byte header followed by records, all integers little endian:
//
//	+--------+--------+--------------------------------------------------+
//	| "DLYD" | ver=1  |  record | record | record | ...                  |
//	+--------+--------+--------------------------------------------------+
//	 4 bytes  uint32
//
//	record:
//	+-----------+-----------+--------------------------+
//	|  length   |   crc     |  payload (length bytes)  |
//	+-----------+-----------+--------------------------+
//	  uint32 LE   uint32 LE
//
//	crc = CRC-32C (Castagnoli) over the 4 length bytes, then the payload
//
// The checksum covers the length, so a damaged length is detected rather than
// followed. A length of 0 is never written ([Writer.Append] refuses empty
// payloads), so a zero length marks zero-filled space, which is what a crash
// leaves when a file grew but its data never reached the disk. A length above
// [MaxRecordSize] is damage, never an allocation. The format is pinned byte for
// byte by testdata/golden.aof.
//
// Unlike pebble's record format there are no fixed-size blocks: a record is
// never split, so reading is one pass with no reassembly. The price is that a
// damaged length cannot be skipped by jumping to the next block; it does not
// need to be, because damage before the tail stops the start anyway.
//
// # Recovery
//
// [Replay] reads records until the first one that does not check out (fewer
// than 8 bytes left, a zero length, a length past the end of the file or over
// [MaxRecordSize], or a checksum mismatch), then decides whether that damage is
// a torn tail or corruption:
//
//   - Torn tail: what a crash in the middle of a write leaves. The damage is the
//     last thing in the file: a length that runs past the end of the file, a
//     checksum mismatch with nothing (or only zeros) after the record, zero-filled
//     space up to the end, or a partial header. In addition no record that checks
//     out may begin anywhere after the damage offset, so a bit flip in a length
//     in the middle of the log, which makes it "run past the end", is never
//     mistaken for a torn tail. Replay truncates the file to the good prefix,
//     fsyncs it, and reports the cut in [Result.TornBytes]; the caller logs a
//     warning and starts.
//   - Corruption: anything else, e.g. a flipped bit in a record followed by good
//     records, or a zeroed page in the middle. Replay returns a [*CorruptError]
//     naming the file and the offset and truncates nothing. An operator then
//     starts with --repair, which calls [Repair]: the bytes from the damage to
//     the end are kept in path+".broken", and the log is cut there.
//
// A file that holds only the start of our header, or only zeros, is a log torn
// at creation: Replay empties it and OpenAppend(fs, path, 0) writes a new
// header. A header that is not ours (bad magic, unknown version) is corruption
// at offset 0.
//
// Repair keeps the cut bytes in path+".broken"; if that exists (an earlier
// repair), in ".broken.1", ".broken.2" and so on, so nothing cut is ever lost.
//
// # Testing with crashes
//
// [MemFS] is an FS for tests, exported for the engine's and the integration
// tests' use. It remembers what was fsynced: [MemFS.Crash] drops every byte
// written since a file's last Sync and every create, rename and remove since
// its directory's last SyncDir, as a power loss would; [MemFS.Inject] fails a
// write part way, a Sync, a Rename, a SyncDir, so a test can check that a disk
// error fails the write and applies nothing.
//
// # Costs
//
// Append is O(len(payload)) with no syscall. Flush is one write(2) of everything
// buffered. Sync is one fsync. Replay is one sequential pass over the file in
// 1 MiB reads, O(size); see BenchmarkReplay for records per second. Classifying
// damage can scan the rest of the file after the damage offset once.
//
// # Caveats
//
//   - A Writer belongs to one goroutine. The exception is [Writer.Sync], which
//     may run on another goroutine while the owner goes on with Append and Flush
//     (a background fsync, as Redis does under everysec).
//   - After a failed fsync the kernel may have dropped the dirty pages and a retry
//     would report success for data that is gone (PostgreSQL's "fsyncgate").
//     So a Sync error is sticky: every later Flush and Sync of that Writer returns
//     [ErrWriterFailed]. The same happens if Flush cannot roll back a failed
//     write. A failed write that was rolled back is not sticky: Flush reports it,
//     drops the batch, and the next batch may succeed.
//   - A payload passed to the [Replay] callback is valid only during the call.
//   - Damage classification spends at most a fixed budget of checksum work
//     looking for good records after the damage; past it, the damage is called
//     corruption, which is the safe answer (nothing is cut without --repair).
//   - Only one Writer may append to a file at a time; nothing here locks the file.
//
// # Sources
//
// etcd server/storage/wal (format in the package doc, torn tails truncated,
// Repair keeping .broken, a corruption table in repair_test.go); pebble record
// and vfs.NewStrictMem (a filesystem that forgets what was not synced); Redis
// aof.c (effects are logged, flushed before the reply; aof-load-truncated).
package aof
