// Package bucket owns the jobs due beyond the horizon that left memory:
// time buckets on disk (sorted runs of fixed-size entries, each with the
// job's data), the open bucket that gathers jobs in memory until it is
// sealed into a run, the compact index from a server id to its bucket and
// entry, what is due by a time in (due, add order), a queue's far jobs in
// that order, the merging of mostly dead runs, and the checkpoint that
// names the runs, their loaded and dead entries and the log position they
// cover (docs/decisions/far-future-buckets.md).
//
// It is a leaf: no goroutines, no import of the engine, no callbacks. A Set
// decides and answers under its owner's lock; the file work (WriteFrozen,
// ReadDue, WriteCheckpoint) is split from the decisions so that the owner
// can run it without the lock, as it reads a payload on disk today. A job's
// head (the job without its payload: the owner's encoding, a restatement's
// add record) is opaque bytes here.
//
// The index holds 12 bytes a cell, mapped outside the Go heap (package
// offheap); nothing else per job stays in memory once its bucket is a run.
package bucket
