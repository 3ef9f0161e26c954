package engine

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayd/delayd/aof"
)

func TestLatenessAndAckTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		add(t, e, "q", 100, "a") // due in 100 ms, popped 150 ms late
		addOpts(t, e, AddArgs{Queue: b("q"), Delay: 100, Payload: b("b"), AckTimeout: 60000, Retry: -1})
		sleep(250 * time.Millisecond)
		popPayload(e, "q")
		d, _ := e.Pop([][]byte{b("q")})
		sleep(30 * time.Millisecond)
		if n, _, _ := e.Ack(b("q"), [][]byte{d.ID}); n != 1 {
			t.Fatal("ack failed")
		}
		m := e.Metrics(10)
		if m.Lateness.Count != 2 || m.Lateness.Sum != 300*time.Millisecond {
			t.Fatalf("lateness: %+v, want 2 pops 150 ms late", m.Lateness)
		}
		// 150 ms: in the bucket le 200 ms, not in le 100 ms.
		if at := func(ms int64) uint64 {
			for i, b := range m.Lateness.Bounds {
				if b == time.Duration(ms)*time.Millisecond {
					return m.Lateness.Counts[i]
				}
			}
			t.Fatalf("no bound %d ms", ms)
			return 0
		}; at(100) != 0 || at(200) != 2 {
			t.Fatalf("lateness buckets %v", m.Lateness.Counts)
		}
		if m.AckTime.Count != 1 || m.AckTime.Sum != 30*time.Millisecond {
			t.Fatalf("ack time: %+v, want one ACK 30 ms after the pop", m.AckTime)
		}
		if l := e.Lateness(); l.Count != 2 || l.Sum != m.Lateness.Sum {
			t.Fatalf("Lateness() %+v", l)
		}

		// A redelivery (the reservation expired) counts no lateness: its due
		// time is the first one.
		addOpts(t, e, AddArgs{Queue: b("r"), Payload: b("c"), AckTimeout: 10, Retry: -1})
		e.Pop([][]byte{b("r")})
		sleep(time.Second)
		d, _ = e.Pop([][]byte{b("r")})
		if d.Deliveries != 2 {
			t.Fatalf("redelivery %+v", d)
		}
		if l := e.Lateness(); l.Count != 3 || l.Sum != 300*time.Millisecond {
			t.Fatalf("after a redelivery: %+v, want one more pop, 0 ms late", l)
		}
	})
}

func TestMetricsTopQueues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Options{})
		// big: 3 jobs; b2 and a2: 2 each (a tie, broken by name); one: 1.
		for q, n := range map[string]int{"big": 3, "b2": 2, "a2": 2, "one": 1} {
			for i := range n {
				add(t, e, q, 60000, fmt.Sprint(i))
			}
		}
		addOpts(t, e, AddArgs{Queue: b("one"), Payload: b("r"), AckTimeout: 1000, Retry: 0, DeadLetter: b("dl")})
		add(t, e, "gone", 0, "x")
		if _, ok := popPayload(e, "gone"); !ok {
			t.Fatal("pop gone")
		}
		e.Pop([][]byte{b("one")}) // reserved
		m := e.Metrics(3)
		var names []string
		for _, q := range m.Top {
			names = append(names, q.Name)
		}
		if fmt.Sprint(names) != "[big a2 b2]" {
			t.Fatalf("top 3: %v, want [big a2 b2]", names)
		}
		if m.Jobs.Delayed != 8 || m.Jobs.Reserved != 1 || m.Jobs.Ready != 0 || m.Queues != 4 {
			t.Fatalf("jobs %+v queues %d", m.Jobs, m.Queues)
		}
		if m.Top[0].Added != 3 || m.Top[0].Delayed != 3 || m.Added != 10 || m.Delivered != 2 {
			t.Fatalf("counters: top %+v, totals %+v", m.Top[0], m.Stats)
		}
		// A queue's counters are DELAY.STATS's.
		if st := e.QueueStats(b("one")); st.Added != 2 || st.Deliveries != 1 || st.Reserved != 1 {
			t.Fatalf("DELAY.STATS one: %+v", st)
		}
		sleep(2 * time.Second) // one's reservation expires with no retry left: dead-lettered
		m = e.Metrics(0)
		if len(m.Top) != 0 || m.Expired != 1 || m.DeadLettered != 1 || m.Jobs.Ready != 1 || m.Queues != 5 {
			t.Fatalf("after the dead letter: %+v", m)
		}
		if m = e.Metrics(100); len(m.Top) != 5 || m.Top[4].Name != "one" {
			t.Fatalf("every queue: %+v", m.Top)
		}
	})
}

func TestLogMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, logged(aof.SlowSync(fs, time.Millisecond), FsyncAlways))
		defer e.Close()
		res, err := e.Add(AddArgs{Queue: b("q"), Delay: 1000, Payload: b("x")})
		if err != nil || e.WaitDurable(res.Ticket) != nil {
			t.Fatal(err)
		}
		lm := e.LogMetrics()
		if !lm.On || lm.Size == 0 || lm.Fsync.Count == 0 || lm.Rewrites != 0 {
			t.Fatalf("log metrics %+v", lm)
		}
		// Each fsync takes 1 ms of fake time: in the bucket le 1 ms.
		if lm.Fsync.Sum != time.Duration(lm.Fsync.Count)*time.Millisecond || lm.Fsync.Counts[3] != lm.Fsync.Count || lm.Fsync.Counts[2] != 0 {
			t.Fatalf("fsync histogram %+v", lm.Fsync)
		}
		if err := e.Rewrite(); err != nil {
			t.Fatal(err)
		}
		for e.LogMetrics().Rewrites == 0 {
			sleep(10 * time.Millisecond)
		}
		if lm := newEngine(t, Options{}).LogMetrics(); lm.On {
			t.Fatalf("no log: %+v", lm)
		}
	})
}
