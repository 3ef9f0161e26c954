package jobs

import "unsafe"

// Job states.
const (
	StateFree uint8 = iota
	StateDelayed
	StateReady
	StateReserved
)

// StateNames are the states as DELAY.GET and DEBUG name them.
var StateNames = [...]string{"free", "delayed", "ready", "reserved"}

// Size is the bytes of one Job: the memory every pending job costs in the
// slab (TestJobSize holds it at 64).
const Size = unsafe.Sizeof(Job{})

// Job is one slab record. It holds no pointers so that millions of them cost
// the garbage collector nothing; links are slot numbers plus one (0 = none).
type Job struct {
	Due int64 // unix ms the job became or becomes ready
	// Data is the arena ref of the client id bytes then the payload bytes,
	// with the payload's length in bits the ref leaves free (PackData, Plen).
	Data       uint64
	SID        uint64 // server-made id, when IDLen == 0
	Seq        uint64 // add order, breaks ties between equal due times
	Next, Prev uint32 // ready list links; Next also chains free slots
	Queue      uint32 // the engine's queue index
	Deliveries uint32
	AckTimeout uint32 // ms; 0: a pop removes the job
	Retry      int32  // redeliveries allowed; -1: unlimited
	IDLen      uint16 // 0: server-made id in SID
	State      uint8
	Flags      uint8 // FlagDL, FlagUnique, ...: which side tables hold more of the job
	// Lane places a ready job within its queue's ready order (priority and
	// group; 0: the default lane). The record is 64 bytes (TestJobSize).
	Lane uint32
}

// Plen is the payload's length, kept in Data's spare bits.
func (j *Job) Plen() uint32 { return PlenOf(j.Data) }

// Job flags: each says a side table (keyed by slot) holds more of the job,
// so the few jobs that use an option pay for it and the rest do not.
// Table.Free clears the tables a job's flags name.
const (
	FlagDL       uint8 = 1 << iota // a dead-letter queue is named in Table.DeadLetters
	FlagUnique                     // its id stays taken for a while after it ends (UNIQUE; Table.Idents)
	FlagDebounce                   // re-adds push it out, up to a limit (DEBOUNCE; Table.Idents)
	FlagOrigin                     // dead-lettered: its origin queue and options are in Table.Origins
	FlagInRun                      // its server id is filed in its queue's push run, not in the sids table (pushrun.go)
	FlagReason                     // its last failure reason is in Table.Reasons
	FlagTimedOut                   // its last failure reason is the ack timeout, kept in this bit alone
)

// ServerID is j's server-made id, 0 for a client id's job (whose SID may
// hold its payload's locator: disk.go).
func (j *Job) ServerID() uint64 {
	if j.IDLen > 0 {
		return 0
	}
	return j.SID
}
