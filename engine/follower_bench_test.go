package engine

import (
	"encoding/binary"
	"testing"
)

// BenchmarkFollowerApply is the most of a cluster follower's CPU a request
// (issue 34's F; docs/decisions/group-scaling.md): applying the batches a
// leader's DELAY.ADDs made (delays 0-100 s, 16-byte payloads), as Raft's
// state machine hands them over. It reports the follower's ns and the
// records it decodes for each add, the leader's batches as its flusher cut
// them.
//
//	taskset -c 1 go test ./engine -run '^$' -bench FollowerApply -benchtime 5x
func BenchmarkFollowerApply(b *testing.B) {
	const n = 200_000
	r := &fakeRepl{auto: true}
	lead, err := New(Options{Replicator: r})
	if err != nil {
		b.Fatal(err)
	}
	defer lead.Close()
	payload := []byte("0123456789abcdef")
	var last uint64
	for i := range n {
		res, err := lead.Add(AddArgs{Queue: []byte("q"), Delay: int64(i*7919) % 100_000, Payload: payload})
		if err != nil {
			b.Fatal(err)
		}
		last = res.Ticket
	}
	if err := lead.WaitDurable(last); err != nil {
		b.Fatal(err)
	}
	r.mu.Lock()
	log := r.log
	r.mu.Unlock()
	recs := 0
	for _, batch := range log {
		for p := batch; len(p) > 0; recs++ {
			l, k := binary.Uvarint(p)
			p = p[k+int(l):]
		}
	}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		f, err := New(Options{Replicator: &fakeRepl{}, Follower: true})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		for _, batch := range log {
			if err := f.ApplyBatch(batch); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		if got := f.QueueStats([]byte("q")); got.Delayed+got.Ready != n {
			b.Fatalf("the follower holds %d jobs, want %d", got.Delayed+got.Ready, n)
		}
		f.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/add")
	b.ReportMetric(float64(recs)/n, "records/add")
	b.ReportMetric(float64(n)/float64(len(log)), "adds/batch")
}
