package jobs

import "testing"

// The job record is the unit of memory per pending job: a field that grows
// it costs 8 bytes of every job (issue 11's budget). Options used by few
// jobs go in side tables keyed by slot (Job.Flags says which).
func TestJobSize(t *testing.T) {
	if Size != 64 {
		t.Fatalf("Job is %d bytes, want 64", Size)
	}
}
