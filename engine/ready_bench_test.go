package engine

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
)

// Benchmarks of the ready order's hot paths: the common case (no priority,
// no group, no limit) must cost what one intrusive list did. Run with
// `go test ./engine -run '^$' -bench 'Pop|Push|Add' -benchtime 200000x`.

func flowBenchEngine(b *testing.B) *Engine {
	e, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	return e
}

var flowBenchPayload = []byte("payload-of-a-job")

// BenchmarkAddReady adds jobs that are ready at once.
func BenchmarkAddReady(b *testing.B) {
	e := flowBenchEngine(b)
	q := []byte("q")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Add(AddArgs{Queue: q, Payload: flowBenchPayload, AckTimeout: -1, Retry: -1}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPopPlain pops from a queue filled beforehand.
func BenchmarkPopPlain(b *testing.B) {
	e := flowBenchEngine(b)
	q := [][]byte{[]byte("q")}
	for range b.N {
		e.Add(AddArgs{Queue: q[0], Payload: flowBenchPayload, AckTimeout: -1, Retry: -1})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, ok := e.Pop(q); !ok {
			b.Fatal("empty")
		}
	}
}

// BenchmarkPopReserveAck pops jobs with an ack timeout and acks them.
func BenchmarkPopReserveAck(b *testing.B) {
	e := flowBenchEngine(b)
	q := [][]byte{[]byte("q")}
	for range b.N {
		e.Add(AddArgs{Queue: q[0], Payload: flowBenchPayload, AckTimeout: 30000, Retry: -1})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		d, ok := e.Pop(q)
		if !ok {
			b.Fatal("empty")
		}
		e.Ack(q[0], [][]byte{d.ID})
	}
}

// BenchmarkPushListPop is RPUSH then LPOP.
func BenchmarkPushListPop(b *testing.B) {
	e := flowBenchEngine(b)
	q := []byte("q")
	ps := [][]byte{flowBenchPayload}
	b.ReportAllocs()
	for b.Loop() {
		e.Push(q, ps, false)
		e.ListPop(q, 1, false)
	}
}

// BenchmarkAddPopManyQueues spreads adds over queues and pops across them.
func BenchmarkAddPopManyQueues(b *testing.B) {
	e := flowBenchEngine(b)
	var names [][]byte
	for i := range 64 {
		names = append(names, []byte("q"+strconv.Itoa(i)))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		e.Add(AddArgs{Queue: names[i%64], Payload: flowBenchPayload, AckTimeout: -1, Retry: -1})
		e.Pop(names[i%64 : i%64+1])
		i++
	}
}

// BenchmarkPopGroups pops from a queue whose jobs are spread over 10k
// groups and 3 priorities: round-robin costs O(1) per pop whatever the
// number of groups.
func BenchmarkPopGroups(b *testing.B) {
	e := flowBenchEngine(b)
	q := [][]byte{[]byte("q")}
	var groups [][]byte
	for i := range 10_000 {
		groups = append(groups, []byte("tenant-"+strconv.Itoa(i)))
	}
	for i := range b.N {
		e.Add(AddArgs{Queue: q[0], Payload: flowBenchPayload, AckTimeout: -1, Retry: -1,
			Group: groups[i%len(groups)], Priority: uint8(i % 3)})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, ok := e.Pop(q); !ok {
			b.Fatal("empty")
		}
	}
}

// BenchmarkAddDelayed and BenchmarkPushOne set what DELAY.ADD costs the
// engine against a list push (the pinned harness's DELAY.ADD vs LPUSH row,
// without the network): a delayed job with a server id goes into its
// queue's push run and the wheel; a pushed one into the push run and the
// ready list. Delays are 1 to 100 s, as the harness's, so none fires. Run with
// `taskset -c 0 go test ./engine -run '^$' -bench 'AddDelayed|PushOne' -benchtime 1000000x`.
func BenchmarkAddDelayed(b *testing.B) {
	e := flowBenchEngine(b)
	q := []byte("q")
	rng := rand.New(rand.NewPCG(1, 2))
	var sc Scratch
	b.ReportAllocs()
	for b.Loop() {
		a := AddArgs{Queue: q, Payload: flowBenchPayload, Delay: 1000 + rng.Int64N(99_000), AckTimeout: -1, Retry: -1, Into: &sc}
		if _, err := e.Add(a); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAddDelayedManyQueues is the pinned harness's DELAY.ADD row over
// 1,000 keys without the network: random queues, delays of 0 to 999 ms, on
// the real clock, so jobs fire while it runs (the wheel's fire and cascade,
// the ready lists) and each add appends to another queue's push run. Run
// with `taskset -c 0 go test ./engine -run '^$' -bench
// 'AddDelayedManyQueues' -benchtime 3000000x`.
func BenchmarkAddDelayedManyQueues(b *testing.B) {
	e := flowBenchEngine(b)
	var names [][]byte
	for i := range 1000 {
		names = append(names, []byte(fmt.Sprintf("q:%012d", i)))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var sc Scratch
	b.ReportAllocs()
	for b.Loop() {
		a := AddArgs{Queue: names[rng.IntN(len(names))], Payload: flowBenchPayload, Delay: rng.Int64N(1000),
			AckTimeout: -1, Retry: -1, Into: &sc}
		if _, err := e.Add(a); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPushOne(b *testing.B) {
	e := flowBenchEngine(b)
	q := []byte("q")
	ps := [][]byte{flowBenchPayload}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := e.PushAt(q, ps, false, 0); err != nil {
			b.Fatal(err)
		}
	}
}
