package cluster

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayd/delayd/engine"
)

// BenchmarkClusterAdd is DELAY.ADD through a 3-node group in one process,
// without the protocol: what a reply waits for once the leader applied it.
// Compare with the engine's own BenchmarkAdd* to see the cost of Raft.
//
//	go test -run X -bench ClusterAdd -cpu 1,2 ./cluster
func BenchmarkClusterAdd(b *testing.B) {
	nodes := startGroup(b, 3)
	l := nodes[0]
	for _, n := range nodes {
		if n.c.Writable() {
			l = n
		}
	}
	var waits atomic.Int64
	start := time.Now()
	b.SetParallelism(64)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := l.eng.Add(engine.AddArgs{Queue: []byte("q"), Payload: []byte("hello"), Delay: 1000, AckTimeout: -1, Retry: -1})
			if err != nil {
				b.Error(err)
				return
			}
			w := time.Now()
			if err := l.eng.WaitDurable(res.Ticket); err != nil {
				b.Error(err)
				return
			}
			waits.Add(int64(time.Since(w)))
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "adds/s")
	b.ReportMetric(float64(waits.Load())/float64(b.N)/1e3, "us-commit-wait")
}
