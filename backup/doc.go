// Package backup owns delayd's backup file: one file holding a server's
// whole state at one point (every job with its id, due time, state,
// reservation deadline, deliveries and options; schedules, limits, pauses
// and UNIQUE tombstones), what BGSAVE writes, SYNC and `delayd backup`
// stream, `delayd restore` reads and `delayd check-backup` verifies.
//
// The records are the engine's snapshot (record.AppendSnap framing: each
// record a uvarint length then the record, a zero length as the end mark),
// the same records a log rewrite and a cluster's Raft snapshot hold; this
// package frames them with what a file kept for months needs: a header that
// says what the file is and where it is exact, and a checksum over all of
// it, so a truncated or flipped file is refused before anything is
// restored (etcd's snapshot files carry a hash for the same reason).
//
// The package is a leaf: no goroutines, no clock (the caller passes the
// time), nothing from the engine, the commands or the cluster.
//
// # File format
//
// All integers little endian.
//
//	+------------------------+----------------------------+-----------+
//	| header (HeaderSize=96) | body: records and end mark |  crc32c   |
//	+------------------------+----------------------------+-----------+
//
//	header:
//	 0  8  magic "DLYDBKUP"
//	 8  2  format version (Version)
//	10  1  mode: 1 single node, 2 cluster
//	11  1  zero
//	12  8  created: unix ms, the server's wall clock at the capture
//	20  8  Raft index the state is exact at (cluster), 0 (single node)
//	28  8  body length in bytes, end mark included
//	36  8  records in the body
//	44  8  jobs in the body
//	52  1  length of the server's version string (at most 39)
//	53 39  the server's version, zero padded
//	92  4  CRC-32C (Castagnoli) of bytes 0..92
//
//	trailer: CRC-32C of the header and the body, every byte before it.
//
// The header's own checksum tells a damaged header from a damaged body
// (its lengths are not followed if it does not check out), and its body
// length tells a file cut short ("truncated: 1000 of 5000 bytes") from a
// flipped bit (a checksum mismatch). Magic and version are read before the
// header's checksum, so a file of a newer format is refused by its version
// number, whatever its header looks like.
//
// The version is this file's framing only: the records inside are the
// log's, whose kinds never change meaning (record/op.go), so a newer
// delayd restores an older backup. An older delayd refuses a newer
// backup's version, or a record kind it does not know (record.ErrBad).
package backup
