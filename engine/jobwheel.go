package engine

import "github.com/delayd/delayd/wheel"

// newJobWheel returns the job wheel, empty, its clock at now. Its handles
// are slots, and it keeps no seq of its own: a job's add order is j.seq,
// which the engine changes only while the job is out of the wheel (detach
// comes first), so the wheel reads it from the job (wheel.NewOrdered) and
// each pending job costs 16 bytes of wheel instead of 24.
func (c *core) newJobWheel(now int64) *wheel.Wheel {
	if wheelKeepsSeqs {
		return wheel.New(c.opts.Tick, now)
	}
	return wheel.NewOrdered(c.opts.Tick, now, c.jobSeq)
}

// wheelKeepsSeqs makes job wheels store the seqs they are given, so that a
// test can compare them with the jobs' (TestJobSeqFixedWhileInWheel).
var wheelKeepsSeqs bool

// jobSeq is the job wheel's seq of slot s: the job's add order.
func (c *core) jobSeq(s uint32) uint64 { return c.jobs.At(s).Seq }
