// Package jobs owns where a job lives and how (queue, id) finds it: the
// 64-byte pointer-free job record and its states, the paged slab of records
// addressed by slot, the arena of ids and payloads, the free slot list, the
// id index (server ids, client ids, and the push runs of list-pushed jobs),
// the side tables by slot that hold what only a few jobs have, and the
// order and cursor of a listing of one queue's delayed or reserved jobs.
//
// It is a leaf: no goroutines, no import of the engine, and no callbacks.
// A Table answers and changes its own state; the engine, which holds one
// under its lock, applies what the answers mean (timers, the log, waiters).
// Freeing a slot clears every side table its flags name, in this package.
//
// Everything per job is mapped outside the Go heap (package offheap) and
// holds no pointers, so 10M pending jobs cost the garbage collector nothing.
// The accessors on the hot paths (Slab.At, Arena.Bytes, Job.Plen, ParseSID)
// are small enough to inline into the engine; keep them so.
package jobs
