package engine

import (
	"math/rand/v2"
	"testing"
	"testing/synctest"

	"github.com/delayd/delayd/jobs"
)

// TestJobSeqFixedWhileInWheel checks what the job wheel's NewOrdered relies
// on: a job's seq (j.seq) does not change while the wheel holds the job,
// so the wheel can read it from the job instead of storing it. With
// wheelKeepsSeqs the wheel stores the seq each Add gave it; after every
// operation of the mix (adds, pops, acks, nacks, reschedules, promotions,
// moves, expiries), every job in the wheel must still carry that seq, and
// the wheel must hold exactly the delayed and reserved jobs.
func TestJobSeqFixedWhileInWheel(t *testing.T) {
	wheelKeepsSeqs = true
	defer func() { wheelKeepsSeqs = false }()
	for seed := range uint64(3) {
		synctest.Test(t, func(t *testing.T) {
			e := newEngine(t, Options{})
			rng := rand.New(rand.NewPCG(seed, 77))
			var ids []string
			inWheel := 0
			for op := range 3000 {
				mixChurn(t, e, rng, 1, &ids)
				e.mu.Lock()
				for s := range e.jobs.Len() {
					j := e.jobs.At(s)
					seq, ok := e.wheel.Seq(s)
					want := j.State == jobs.StateDelayed || j.State == jobs.StateReserved
					if ok != want {
						e.mu.Unlock()
						t.Fatalf("op %d: slot %d in state %s: in the wheel %v", op, s, jobs.StateNames[j.State], ok)
					}
					if ok && seq != j.Seq {
						e.mu.Unlock()
						t.Fatalf("op %d: slot %d (%s): the wheel has seq %d, the job %d", op, s, jobs.StateNames[j.State], seq, j.Seq)
					}
					if ok {
						inWheel++
					}
				}
				e.mu.Unlock()
			}
			if inWheel == 0 {
				t.Fatal("no job was ever in the wheel: the test checked nothing")
			}
		})
	}
}
