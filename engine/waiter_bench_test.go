package engine

import "testing"

// BenchmarkWaitServe is a worker's blocking pop on an empty queue: park,
// a ready job arrives and serves it, the worker takes it. Its allocations
// are the waiter's (the job's copies are the pop's).
func BenchmarkWaitServe(b *testing.B) {
	e := flowBenchEngine(b)
	q := [][]byte{[]byte("q")}
	b.ReportAllocs()
	for b.Loop() {
		_, w, err := e.PopOrWait(q, PopLeft)
		if err != nil || w == nil {
			b.Fatal("no waiter", err)
		}
		if _, err := e.Add(AddArgs{Queue: q[0], Payload: flowBenchPayload, AckTimeout: -1, Retry: -1}); err != nil {
			b.Fatal(err)
		}
		<-w.Ready()
		if _, ok := w.Result(); !ok {
			b.Fatal("released without a job")
		}
	}
}
