package engine

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/jobs"
)

// farBuckets is horizoned (a minute) with the far-future buckets on.
func farBuckets(fs aof.FS) Options {
	o := horizoned(fs, FsyncAlways)
	o.FarBuckets = true
	return o
}

// delayedView renders every queue's delayed jobs, in memory or in the
// buckets, in (due, add order), with their ids, payloads and dues, and its
// counts: what must not change when jobs go out to disk and come back.
func delayedView(t *testing.T, e *Engine) string {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	type job struct {
		due  int64
		seq  uint64
		id   string
		data string
	}
	var names []string
	for name := range e.byName {
		names = append(names, name)
	}
	slices.Sort(names)
	var sb strings.Builder
	var buf [jobs.SIDLen]byte
	fmt.Fprintf(&sb, "jobs %d\n", e.njobs)
	for _, name := range names {
		qi := e.byName[name]
		var js []job
		for i := range e.jobs.Len() {
			if j := e.jobs.At(i); j.State == jobs.StateDelayed && j.Queue == qi {
				js = append(js, job{j.Due, j.Seq, string(e.jobs.ID(j, &buf)), string(e.jobs.Payload(j))})
			}
		}
		if e.far.set != nil {
			fs, err := e.far.set.Earliest(name, math.MinInt64, 0, math.MaxInt32)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range fs {
				js = append(js, job{f.Due, f.Seq, string(jobs.RenderSID(&buf, f.SID)), string(f.Payload)})
			}
		}
		slices.SortFunc(js, func(a, b job) int { return cmp.Or(cmp.Compare(a.due, b.due), cmp.Compare(a.seq, b.seq)) })
		q := &e.queues[qi]
		fmt.Fprintf(&sb, "%s delayed %d ready %d:", name, q.Delayed, q.Ready)
		for _, j := range js {
			fmt.Fprintf(&sb, " %s=%s@%d", j.id, strings.TrimSpace(j.data), j.due)
		}
		sb.WriteString("\n")
	}
	return sb.String()
}

// inMemory is the jobs in the slab.
func inMemory(e *Engine) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for i := range e.jobs.Len() {
		if e.jobs.At(i).State != jobs.StateFree {
			n++
		}
	}
	return n
}

func farLen(e *Engine) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.far.set.Len()
}

// Jobs due beyond the horizon leave memory for the buckets and keep their
// counts; cancel, reschedule and REPLACE find them by id on disk; a
// checkpoint and a restart (replay over it) keep every one; they come back
// ahead of their time and are handed out never early, in (due, add order);
// DEL and FLUSHALL drop them, for good.
func TestFarBuckets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := aof.NewMemFS()
		e := mustNew(t, farBuckets(fs))
		far := addFar(t, e, 60, 200)
		// Ten more far jobs of q0 due in the same millisecond: their add
		// order must hold.
		same := e.Now() + 900_000
		for i := range 10 {
			res, err := e.Add(AddArgs{Queue: b("q0"), At: true, Due: same, Payload: []byte(fmt.Sprint("same", i))})
			if err != nil || e.WaitDurable(res.Ticket) != nil {
				t.Fatal(err)
			}
		}
		before := delayedView(t, e)
		settleSpill()
		if n := farLen(e); n != 70 {
			t.Fatalf("%d jobs in the buckets after a spill round, want 70", n)
		}
		if n := inMemory(e); n != 60 {
			t.Fatalf("%d jobs in memory, want the 60 near ones", n)
		}
		if after := delayedView(t, e); after != before {
			t.Fatalf("jobs out on disk read differently\n%s", diffLines(before, after))
		}
		id := func(i int) (q, id []byte) {
			qs, ids, _ := strings.Cut(far[i], "/")
			return b(qs), b(ids)
		}
		// By id on disk: a cancel, reschedules (beyond the horizon and
		// near), a REPLACE.
		if q, x := id(0); true {
			if n, _, err := e.Cancel(q, [][]byte{x}); n != 1 || err != nil {
				t.Fatalf("cancel of a far job: %d %v", n, err)
			}
		}
		if q, x := id(1); true {
			if ok, _, err := e.Reschedule(RescheduleArgs{Queue: q, ID: x, Delay: 700_000}); !ok || err != nil {
				t.Fatalf("reschedule of a far job: %v %v", ok, err)
			}
		}
		if q, x := id(2); true {
			if ok, _, err := e.Reschedule(RescheduleArgs{Queue: q, ID: x, Delay: 10_000}); !ok || err != nil {
				t.Fatalf("reschedule of a far job near: %v %v", ok, err)
			}
		}
		if q, x := id(3); true {
			res, err := e.Add(AddArgs{Queue: q, ID: x, Replace: true, Delay: 800_000, Payload: b("replaced")})
			if err != nil || !res.Added {
				t.Fatalf("REPLACE of a far job: %+v %v", res, err)
			}
			if res, _ := e.Add(AddArgs{Queue: q, ID: x, Delay: 5, Payload: b("not")}); res.Added {
				t.Fatal("an add of a far job's id without REPLACE added")
			}
		}
		if farLen(e) != 66 {
			t.Fatalf("%d in the buckets after 4 operations by id, want 66", farLen(e))
		}
		settleSpill() // the rescheduled and replaced jobs go out again
		if err := e.checkpoint(); err != nil {
			t.Fatal(err)
		}
		// After the checkpoint, a cancel of a job its runs hold: replay
		// must apply it over them.
		if q, x := id(4); true {
			if n, _, _ := e.Cancel(q, [][]byte{x}); n != 1 {
				t.Fatal("cancel of a far job in a run")
			}
		}
		before = delayedView(t, e)
		e.Close()
		e = mustNew(t, farBuckets(fs))
		if after := delayedView(t, e); after != before {
			t.Fatalf("after a restart over a checkpoint\n%s", diffLines(before, after))
		}
		if n := farLen(e); n == 0 {
			t.Fatal("a restart over a checkpoint brought every far job into memory")
		}
		// Near jobs fire; the far ones come back ahead of their time and
		// none is handed out early.
		time.Sleep(15 * time.Second)
		n := 0
		for {
			if _, ok := e.Pop([][]byte{b("q0"), b("q1"), b("q2")}); !ok {
				break
			}
			n++
		}
		if n != 61 {
			t.Fatalf("%d near jobs, want 61 (60 and one rescheduled near)", n)
		}
		time.Sleep(600_000*time.Millisecond - 15*time.Second - 20*time.Second)
		synctest.Wait()
		if d, ok := e.Pop([][]byte{b("q0"), b("q1"), b("q2")}); ok {
			t.Fatalf("a job handed out 20 s early: %s due %d at %d", d.ID, d.Due, e.Now())
		}
		// DEL of a queue with far jobs still out (the ten due together
		// and the rescheduled and replaced ones).
		if farLen(e) == 0 {
			t.Fatal("nothing left in the buckets to DEL")
		}
		if n, _, err := e.Del([][]byte{b("q1")}); n != 1 || err != nil {
			t.Fatalf("DEL q1: %d %v", n, err)
		}
		time.Sleep(10 * time.Minute)
		var last [2]int64
		var seqs [2]uint64
		popped := 0
		for {
			d, ok := e.Pop([][]byte{b("q0"), b("q2")})
			if !ok {
				break
			}
			if d.Due > e.Now() {
				t.Fatalf("a far job handed out early: due %d at %d", d.Due, e.Now())
			}
			if string(d.Queue) == "q1" {
				t.Fatal("a job of a deleted queue")
			}
			q := (d.Queue[1] - '0') / 2
			if d.Due < last[q] || d.Due == last[q] && d.seq < seqs[q] {
				t.Fatalf("out of order in %s: (%d, %d) after (%d, %d)", d.Queue, d.Due, d.seq, last[q], seqs[q])
			}
			last[q], seqs[q] = d.Due, d.seq
			popped++
		}
		if st := e.QueueStats(b("q1")); st.Delayed != 0 {
			t.Fatalf("q1 after DEL: %+v", st)
		}
		// q0's 20 far jobs and the ten, q2's 20, less the two cancelled.
		if popped != 48 {
			t.Fatalf("%d far jobs of q0 and q2 handed out, want 48", popped)
		}
		if n := farLen(e); n != 0 {
			t.Fatalf("%d jobs left in the buckets", n)
		}
		e.Close()
	})
}
