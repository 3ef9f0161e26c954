package engine

// Sizing for a replay, in one place: the structures a replay fills are
// sized once from the log instead of growing through every power of two,
// and the large blocks the job table grows by are mapped in by the kernel in
// one call instead of one page fault per 4 KiB (offheap.Populate, in slab.add).

// logBytesPerJob is about what an add record of a small job takes in the
// log (61 bytes for a 16-byte payload and a server id, bench/mklog): the
// log's size over it bounds the jobs a replay can make from an unrewritten
// log of adds, and a log with larger payloads or with acks gets a smaller
// share of its size than its records.
const logBytesPerJob = 56

// presize sizes the index for a replay of a log of logBytes. The builder
// (replay.go) calls it, on its own goroutine, before its first insert, so
// that clearing a table of hundreds of MB overlaps the first records.
// Only an empty index is sized.
func (e *Engine) presize(logBytes int64) {
	if n := logBytes / logBytesPerJob; n > 1024 {
		e.jobs.ReserveSIDs(int(n))
	}
}
