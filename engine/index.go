package engine

import "github.com/delayd/delayd/offheap"

// Where a job lives and how (queue, id) finds it is package jobs' (a
// jobs.Table). Its calls that file or find an id take the queue's push run,
// which the engine's queue holds: e.jobs.Lookup(&e.queues[qi].run, qi, id).

// allocSlot returns a zeroed slot for a new job.
func (e *Engine) allocSlot() uint32 {
	if b := e.j.build; b != nil && e.jobs.AllocGrows() {
		// The replay's index builder reads the page table when its
		// table grows (a rehash reads each job's id): it must be idle
		// while the table of pages changes (replay.go).
		b.Sync()
	}
	return e.jobs.Alloc()
}

// MappedBytes is the memory every engine of the process holds outside the Go
// heap (job pages, arena chunks, index tables, wheel nodes): the runtime's
// statistics miss it, so --maxmemory and INFO's used_memory add it. The
// pages a cluster's capture copies jobs into for its time are left out, as
// Redis's used_memory leaves out what a BGSAVE's fork copies: a write is
// not refused for a snapshot being taken. O(1).
func MappedBytes() int64 { return offheap.Mapped() - captureMapped.Load() }
