package engine

import (
	"unsafe"

	"github.com/delayd/delayd/bucket"
	"github.com/delayd/delayd/jobs"
	"github.com/delayd/delayd/queue"
)

// Reading: DELAY.GET, DELAY.STATS, DELAY.PEEK, EXISTS, INFO.

// JobInfo is what DELAY.GET shows.
type JobInfo struct {
	ID, Queue, Payload []byte
	State              string
	Due                int64
	Deliveries         uint32
	AckDeadline        int64  // 0 unless reserved
	Group              []byte // nil: the queue's default group
	Priority           uint8
	Origin             []byte // a dead-lettered job's queue before (DELAY.REQUEUE's default target); nil otherwise
	Reason             string // its last failure reason (NACK's ERROR text, or ReasonAckTimeout); "" if none
}

// Get returns a job's fields. O(1).
func (e *Engine) Get(queueName, id []byte) (JobInfo, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	qi, ok := e.queueFor(queueName, false)
	if !ok {
		return JobInfo{}, false
	}
	s, ok := e.jobs.Lookup(&e.queues[qi].run, qi, id)
	if !ok {
		return e.farInfo(qi, id) // far.go
	}
	return e.infoOf(s, queueName), true
}

// infoOf is DELAY.GET's view of the job in slot s of the named queue, all
// of it copied. Called with mu held.
func (e *Engine) infoOf(s uint32, queueName []byte) JobInfo {
	j := e.jobs.At(s)
	var buf [jobs.SIDLen]byte
	info := JobInfo{
		ID:         append([]byte(nil), e.jobs.ID(j, &buf)...),
		Queue:      append([]byte(nil), queueName...),
		Payload:    append([]byte(nil), e.jobs.Payload(j)...),
		State:      jobs.StateNames[j.State],
		Due:        j.Due,
		Deliveries: j.Deliveries,
	}
	if j.State == jobs.StateReserved {
		info.AckDeadline, _ = e.wheel.Due(s)
	}
	if j.Lane != 0 {
		g, p := e.laneOf(s)
		info.Group, info.Priority = append([]byte(nil), g...), p
	}
	if j.Flags&jobs.FlagOrigin != 0 {
		info.Origin = append([]byte{}, e.jobs.Origins[s].Queue...)
	}
	info.Reason = e.jobs.Reason(s)
	return info
}

// QueueStats counts a queue's jobs by state, and what happened to them while
// the queue existed (queue.Stats).
type QueueStats = queue.Stats

// QueueStats returns the counts of one queue (zeros when it does not exist).
func (e *Engine) QueueStats(queueName []byte) QueueStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	qi, ok := e.queueFor(queueName, false)
	if !ok {
		return QueueStats{Paused: e.pausedLocked(queueName)}
	}
	st := e.queues[qi].Stats(&e.jobs.Slab, e.nowMs())
	st.Paused = e.pausedLocked(queueName)
	return st
}

// Pair is an id and a payload.
type Pair struct{ ID, Payload []byte }

// Peek returns up to count ready jobs from the head of a queue, not removed.
// O(count).
func (e *Engine) Peek(queueName []byte, count int) []Pair {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advanceLocked(e.nowMs())
	qi, ok := e.queueFor(queueName, false)
	if !ok {
		return nil
	}
	var out []Pair
	var buf [jobs.SIDLen]byte
	if count <= 0 {
		return nil
	}
	e.queues[qi].Order.Each(&e.jobs.Slab, func(s uint32) bool {
		j := e.jobs.At(s)
		out = append(out, Pair{
			ID:      append([]byte(nil), e.jobs.ID(j, &buf)...),
			Payload: append([]byte(nil), e.jobs.Payload(j)...),
		})
		return len(out) < count
	})
	return out
}

// Exists reports whether a queue holds a job in any state.
func (e *Engine) Exists(queueName []byte) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	qi, ok := e.queueFor(queueName, false)
	if !ok {
		return false
	}
	q := &e.queues[qi]
	return q.Jobs() > 0
}

// Info is a snapshot for INFO and DBSIZE.
type Info struct {
	Jobs, Queues             int // queues holding at least one job
	Delayed, Ready, Reserved int
	Waiters                  int
	MemoryBytes              int64 // slabs, arena and index, approximately
	PayloadBytes             int64
	LazyfreePending          int // jobs of deleted queues not freed yet
	// Payloads on disk (spill.go): the horizon (ms; 0: off), the jobs whose
	// payload is in the log, their bytes, and the reads of payloads back.
	Horizon, DiskJobs, DiskBytes int64
	DiskReads                    uint64
	Far                          bucket.Info // the far-future jobs' buckets (far.go)
	Stats
}

// Info returns a snapshot of counts. O(queues).
func (e *Engine) Info() Info {
	e.mu.Lock()
	defer e.mu.Unlock()
	in := Info{Jobs: e.njobs, Stats: e.stats, LazyfreePending: e.lazy.Pending}
	var runs int64
	for i := range e.queues {
		q := &e.queues[i]
		runs += q.run.Bytes()
		if !q.live {
			continue
		}
		if q.Jobs() > 0 {
			in.Queues++
		}
		in.Delayed += q.Delayed
		in.Ready += q.Ready
		in.Reserved += q.Reserved
	}
	in.Waiters = e.stats.WaitersNow // clients, not client-key pairs
	// The wheel's slab grows with the job slab; its node is about 32 bytes.
	in.MemoryBytes = e.jobs.Bytes() + int64(e.jobs.Len())*32 + e.jobs.Arena.Footprint() +
		e.jobs.IndexBytes() + runs + int64(cap(e.queues))*int64(unsafe.Sizeof(queueEntry{}))
	if e.far.set != nil {
		in.Far = e.far.set.Info()
		in.MemoryBytes += in.Far.IndexBytes + in.Far.MemBytes
	}
	in.PayloadBytes = e.jobs.Arena.InUse
	d := e.jobs.DiskInfo()
	in.Horizon, in.DiskJobs, in.DiskBytes, in.DiskReads = e.opts.Horizon, d.Jobs, d.Bytes, d.Reads
	if e.journal != nil {
		in.DiskReads = e.journal.PayloadReads()
	}
	return in
}
