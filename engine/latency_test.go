package engine

import (
	"reflect"
	"testing"
	"testing/synctest"
	"time"
)

// Latency is now minus the due time of the oldest head of the ready order:
// 0 with no ready job, growing while jobs wait, the next head's once the
// head is taken; with lanes, the oldest of their heads.
func TestLatencyOfTheOldestReadyJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		lat := func(q string) int64 { return e.QueueStats(b(q)).Latency }
		if l := lat("q"); l != 0 {
			t.Fatalf("no queue: %d", l)
		}
		addOpts(t, e, AddArgs{Queue: b("q"), ID: b("late"), Payload: b("p"), Delay: 100, Retry: -1})
		sleep(50 * time.Millisecond)
		addOpts(t, e, AddArgs{Queue: b("q"), ID: b("now"), Payload: b("p"), Retry: -1})
		if l := lat("q"); l != 0 {
			t.Fatalf("a job ready this instant: %d", l)
		}
		sleep(30 * time.Millisecond)
		if l := lat("q"); l != 30 {
			t.Fatalf("waited 30 ms: %d", l)
		}
		sleep(40 * time.Millisecond) // late fell due 20 ms ago, behind now
		if l := lat("q"); l != 70 {
			t.Fatalf("the head has waited 70 ms: %d", l)
		}
		mustPop(t, e, "q")
		if l := lat("q"); l != 20 {
			t.Fatalf("the next head fell due 20 ms ago: %d", l)
		}
		// Paused, it keeps growing: nothing takes the job.
		e.SetPaused(b("q"), true)
		sleep(time.Second)
		if l := lat("q"); l != 1020 {
			t.Fatalf("paused a second: %d", l)
		}
		e.SetPaused(b("q"), false)
		mustPop(t, e, "q")
		if l := lat("q"); l != 0 {
			t.Fatalf("empty: %d", l)
		}

		// Lanes: a low-priority job waiting behind busier ones shows.
		addOpts(t, e, AddArgs{Queue: b("p"), ID: b("low"), Payload: b("p"), Retry: -1})
		sleep(500 * time.Millisecond)
		addOpts(t, e, AddArgs{Queue: b("p"), ID: b("high"), Payload: b("p"), Priority: 9, Retry: -1})
		addOpts(t, e, AddArgs{Queue: b("p"), ID: b("tenant"), Payload: b("p"), Group: b("t"), Retry: -1})
		sleep(10 * time.Millisecond)
		if l := lat("p"); l != 510 {
			t.Fatalf("the low-priority job has waited 510 ms: %d", l)
		}
		if d := mustPop(t, e, "p"); string(d.ID) != "high" {
			t.Fatalf("popped %s", d.ID)
		}
		if l := lat("p"); l != 510 {
			t.Fatalf("after the high-priority pop: %d", l)
		}
	})
}

// Latencies lists the queues with ready jobs, the oldest first, up to n,
// and the largest of all; /metrics' _other gets the largest of the rest.
func TestLatenciesTopAndMost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		for _, q := range []string{"a", "b", "c"} {
			addOpts(t, e, AddArgs{Queue: b(q), Payload: b("p"), Retry: -1})
			sleep(100 * time.Millisecond)
		}
		addOpts(t, e, AddArgs{Queue: b("d"), Payload: b("p"), Delay: 60000, Retry: -1}) // nothing ready
		top, most := e.Latencies(2)
		want := []QueueLatency{{Name: "a", Ready: 1, Latency: 300}, {Name: "b", Ready: 1, Latency: 200}}
		if most != 300 || !reflect.DeepEqual(top, want) {
			t.Fatalf("Latencies(2) = %v, %d; want %v, 300", top, most, want)
		}
		if top, most := e.Latencies(0); len(top) != 0 || most != 300 {
			t.Fatalf("Latencies(0) = %v, %d", top, most)
		}
		// Metrics' top is by job count: b gets two more jobs, d has one.
		addOpts(t, e, AddArgs{Queue: b("b"), Payload: b("p"), Retry: -1})
		addOpts(t, e, AddArgs{Queue: b("b"), Payload: b("p"), Retry: -1})
		m := e.Metrics(1)
		if len(m.Top) != 1 || m.Top[0].Name != "b" || m.Top[0].Latency != 200 || m.OtherLatency != 300 {
			t.Fatalf("Metrics(1): top %+v, other latency %d", m.Top, m.OtherLatency)
		}
	})
}
