// Package record owns the log's record format: every record kind (op.go,
// the one place the op-byte space is allocated), the Rec that carries any
// of them, and their encoding. The append-only log, a rewrite, a cluster
// snapshot and the replication stream all hold these bytes, so the format
// never changes under a kind: old logs replay.
//
// The log holds effects, not requests (as Redis logs EXPIRE as PEXPIREAT):
// an add is logged with its absolute due time and add order, a blocking pop
// as the plain pop that happened, a NACK as where the job went. Every record
// sets a state rather than changing one, so applying a record twice, or on
// top of a newer snapshot of the same job (a rewrite's tail), converges on
// the same state. Firing and expired reservations are not logged; replay
// derives them from the times in the records.
//
// Every record but a unit starts with its op and the engine time (unix ms)
// it was applied at; replay advances the wheel to that time before applying
// it, as the live engine advanced before applying the write, so jobs become
// ready and reservations expire in the same order as they did live.
//
// A transaction (MULTI/EXEC, Engine.Atomic) is logged as a unit: its
// records, each as uvarint length then the record, make the unit's body,
// and the body goes into one unit record (part 0, more 0) under the log's
// one checksum, so a crash leaves all of it or, torn, none. A body larger
// than one log record may be (aof.MaxRecordSize) is cut into parts 0, 1, 2,
// ... with more = 1 on every part but the last, which is the commit. Replay
// applies a unit only when its commit is read; parts not followed by the
// next part or the commit (a crash cut the unit, and a restart went on
// logging after them) are dropped whole. part is a uvarint, more one byte,
// and the body the rest of the record.
//
// State as records is decided here too (state.go, job.go): the add record
// that recreates a job whole, the records of a queue name's limit, pause
// and schedules, a queue's export to another engine (MIGRATE) and its
// checks, and which record read back from the log offers a job's payload
// to disk. The engine walks its state and applies.
//
// It is a leaf: no goroutines, no import of the engine. What a record
// means, how it is applied and what a rewrite writes, is the engine's
// (engine/features.go registers each kind).
package record
