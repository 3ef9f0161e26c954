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

// BenchmarkIndexFileMany is BenchmarkIndexFile through fileAll, a run's
// worth of ids (150k) at a time as a start files them: compare the two at a
// size whose index is far larger than the caches (-benchtime 100000000x).
func BenchmarkIndexFileMany(b *testing.B) {
	var x index
	var f filer
	defer x.reset()
	x.presize(b.N)
	const run = 150_000
	sids, locs := make([]uint64, 0, run), make([]uint32, 0, run)
	b.ResetTimer()
	for i := range b.N {
		sids, locs = append(sids, mix(uint64(i+1)*0x9e3779b97f4a7c15)|1), append(locs, uint32(i))
		if len(sids) == cap(sids) || i == b.N-1 {
			x.fileAll(&f, sids, locs)
			sids, locs = sids[:0], locs[:0]
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(x.bytes())/float64(b.N), "B/job")
}
