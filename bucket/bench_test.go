package bucket

import "testing"

// BenchmarkIndexFile files b.N ids in a presized index, as a start does
// from its runs (a DRAM miss an id), and reports the index's bytes a job.
// go test ./bucket -run XXX -bench IndexFile -benchtime 8000000x
func BenchmarkIndexFile(b *testing.B) {
	var x index
	defer x.reset()
	x.presize(b.N)
	b.ResetTimer()
	for i := range b.N {
		x.put(mix(uint64(i+1)*0x9e3779b97f4a7c15)|1, uint32(i))
	}
	b.StopTimer()
	b.ReportMetric(float64(x.bytes())/float64(b.N), "B/job")
}
