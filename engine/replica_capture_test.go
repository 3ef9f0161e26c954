package engine

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayd/delayd/record"
)

// A capture followed by the batches committed after it restores to
// exactly the state the group's log reaches later: on a leader whose
// clients go on writing, and on a follower that goes on applying. Jobs
// fire, are popped, nacked, cancelled, replaced and moved meanwhile.
func TestCaptureUnderWrites(t *testing.T) {
	for _, size := range []int{0, 1, 1500, 20_000} {
		for _, role := range []string{"leader", "follower"} {
			t.Run(fmt.Sprint(role, size), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { captureUnderWrites(t, size, role == "leader", false) })
			})
		}
	}
}

// The same, with the leader's clients writing, its jobs firing and its
// reservations expiring while the capture encodes its copy of the jobs,
// the lock let go: none of it may reach the capture (a job changed, freed,
// or its payload's bytes given to another job), all of it comes with the
// batches after.
func TestCaptureWritesWhileEncoding(t *testing.T) {
	for _, size := range []int{1500, 20_000} {
		for _, role := range []string{"leader", "follower"} { // a follower applies the batches meanwhile
			t.Run(fmt.Sprint(size, role), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { captureUnderWrites(t, size, role == "leader", true) })
			})
		}
	}
}

// A FLUSHALL while a capture encodes its copy stops the capture (the
// arena it reads is about to go) and waits for it; the capture fails and
// the engine goes on.
func TestCaptureStoppedByFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 2, Options{}, nil)
		ln := g.nodes[0]
		L := ln.e
		ln.r.setAuto(true)
		for i := range 5000 {
			if _, err := L.Add(AddArgs{Queue: b("q"), Payload: []byte(fmt.Sprint("p", i)), Delay: 60_000}); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		defer func(f func()) { captureStep = f }(captureStep)
		flushed := make(chan error, 1)
		captureStep = func() {
			captureStep = nil
			go func() { _, err := L.Flush(); flushed <- err }()
			synctest.Wait() // the flush waits for the capture to stop reading
		}
		_, ok, err := L.CaptureTo(true, time.Second, io.Discard, func() bool { return true }, nil)
		if !ok || err != errCaptureReset {
			t.Fatalf("capture: %v %v, want %v", ok, err, errCaptureReset)
		}
		if err := <-flushed; err != nil {
			t.Fatal(err)
		}
		if _, err := L.Add(AddArgs{Queue: b("q"), Payload: b("after"), Delay: 60_000}); err != nil {
			t.Fatal(err)
		}
		if n := L.njobs; n != 1 {
			t.Fatalf("%d jobs after the flush and an add, want 1", n)
		}
		if _, ok, err := L.CaptureTo(true, time.Second, io.Discard, func() bool { return true }, nil); !ok || err != nil {
			t.Fatalf("the next capture: %v %v", ok, err)
		}
	})
}

func captureUnderWrites(t *testing.T, size int, onLeader, during bool) {
	g := newGroup(t, 3, Options{}, nil)
	ln, fn := g.nodes[0], g.nodes[1]
	L := ln.e
	rng := rand.New(rand.NewPCG(uint64(size), 9))
	var ids []string
	step := func() {
		churn(t, L, rng, 1, &ids)
		if rng.IntN(8) == 0 {
			churnMove(t, L, rng, []byte(fmt.Sprintf("q%d", rng.IntN(3))))
		}
	}
	// Writes on the leader commit at once into its fakeRepl's log.
	ln.r.setAuto(true)
	for i := range size {
		a := AddArgs{Queue: []byte(fmt.Sprintf("q%d", i%3)), Payload: []byte(fmt.Sprint(i)),
			Delay: int64(rng.IntN(3) * rng.IntN(2_000)), AckTimeout: int64(rng.IntN(2) * 500)}
		if i%5 == 0 {
			a.ID = []byte(fmt.Sprint("c", i))
			ids = append(ids, string(a.ID))
		}
		if i%7 == 0 { // lanes: the ready order walks them
			a.Priority, a.Group = uint8(i%3), []byte(fmt.Sprint("g", i%2))
		}
		if _, err := L.Add(a); err != nil {
			t.Fatal(err)
		}
		if i%97 == 0 {
			step()
		}
	}
	for range 200 {
		step()
	}
	if during {
		// Jobs an hour out, over pages of the slab the capture reads
		// last: the writes meanwhile reach them first.
		for i := range 3 << 14 {
			a := AddArgs{Queue: []byte(fmt.Sprintf("q%d", i%3)), Payload: []byte(fmt.Sprint("far", i)), Delay: 3_600_000}
			if i%2 == 0 {
				a.ID = []byte(fmt.Sprint("far", i))
			}
			res, err := L.Add(a)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, string(res.ID))
		}
	}
	synctest.Wait()
	log := func() [][]byte { ln.r.mu.Lock(); defer ln.r.mu.Unlock(); return ln.r.log }
	F := fn.e
	for _, b := range log() {
		if err := F.ApplyBatch(b); err != nil {
			t.Fatal(err)
		}
	}
	applied := len(log())

	// The capture, on the chosen node; the group moves on after it.
	src, lead := F, false
	if onLeader {
		src, lead = L, true
	}
	between := func() {
		for range 1 + rng.IntN(20) {
			step()
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond) // jobs fire, reservations expire
		step()
		for ; applied < len(log()); applied++ {
			if err := F.ApplyBatch(log()[applied]); err != nil {
				t.Fatal(err)
			}
		}
	}
	from := -1
	captured := false // CaptureTo said the state is held
	var mark func() bool
	if lead {
		mark = func() bool { from = len(log()); return true }
	} else {
		mark = func() bool { from = applied; return true }
	}
	defer func(n int) { captureFlush = n }(captureFlush)
	captureFlush = 4 << 10
	// While the capture reads its copy, a second one (the old way: under
	// the lock) must be exact too.
	var out2 bytes.Buffer
	from2 := -1
	if during {
		defer func(f func(), n int) { captureStep, captureStepJobs = f, n }(captureStep, captureStepJobs)
		captureStepJobs = 4
		captureStep = func() {
			if from2 < 0 {
				if _, ok, err := L.CaptureTo(true, time.Second, &out2, func() bool { from2 = len(log()); return true }, nil); !ok || err != nil {
					t.Fatalf("a capture during a capture: %v %v", ok, err)
				}
			}
			churnKeepsState = true // no FLUSHALL: it would wait for this very capture
			defer func() { churnKeepsState = false }()
			step()
			time.Sleep(time.Duration(rng.IntN(50)) * time.Millisecond) // jobs fire, reservations expire
			if !lead && captured {
				for ; applied < len(log()); applied++ { // the follower's caller let its applies go
					if err := F.ApplyBatch(log()[applied]); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	var out bytes.Buffer
	w := &countingWriter{w: &out}
	gen, ok, err := src.CaptureTo(lead, time.Second, w, mark, func() { captured = true })
	if err != nil || !ok {
		t.Fatalf("capture: %v %v", ok, err)
	}
	if out.Len() > 2*captureFlush && w.writes < out.Len()/(2*captureFlush) {
		t.Fatalf("a capture of %d bytes went to its writer in %d piece(s): not streamed", out.Len(), w.writes)
	}
	if during && len(log()) < from+10 {
		t.Fatalf("%d batches committed while the capture encoded: the test tests nothing", len(log())-from)
	}
	if during && !lead && applied < from+10 {
		t.Fatalf("the follower applied %d batches while its capture encoded: the test tests nothing", applied-from)
	}
	if _, ok, _ := L.CaptureTo(false, time.Second, &bytes.Buffer{}, func() bool { return true }, nil); ok {
		t.Fatal("a leader took a follower's capture")
	}
	between() // the group moves on before the snapshot is labelled
	between()
	if src.Generation() != gen {
		t.Fatal("the generation moved without a Reset")
	}
	// The snapshot at the log's end: the capture, every batch after its
	// start, the end mark.
	// The leader's last writes (a Requeue's add, say) may still wait in
	// its journal for the flusher: the state compared is the committed
	// one, so they commit first.
	if !L.quiesce(time.Second, func() {}) {
		t.Fatal("the leader did not settle")
	}
	entries := log()
	if !lead {
		entries = entries[:applied]
	}
	for _, b := range entries[from:] {
		out.Write(b)
	}
	out.WriteByte(0)

	want := replDump(L)
	if !lead {
		want = replDump(F)
	}
	x := newEngine(t, Options{Replicator: &fakeRepl{closed: true}, Follower: true})
	if err := x.Restore(&out); err != nil {
		t.Fatal(err)
	}
	if got := replDump(x); got != want {
		t.Fatalf("restored state differs:\n%s", diffLines(want, got))
	}
	if during {
		for _, b := range entries[from2:] {
			out2.Write(b)
		}
		out2.WriteByte(0)
		x := newEngine(t, Options{Replicator: &fakeRepl{closed: true}, Follower: true})
		if err := x.Restore(&out2); err != nil {
			t.Fatal(err)
		}
		if got := replDump(x); got != want {
			t.Fatalf("the second capture's restored state differs:\n%s", diffLines(want, got))
		}
	}
}

// countingWriter counts the writes it is given.
type countingWriter struct {
	w      io.Writer
	writes int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes++
	return c.w.Write(p)
}

// A Reset moves the generation a capture is checked against; a mark that
// says no takes nothing.
func TestCaptureGeneration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 2, Options{}, nil)
		F := g.nodes[1].e
		gen, ok, err := F.CaptureTo(false, time.Second, &bytes.Buffer{}, func() bool { return true }, nil)
		if !ok || err != nil {
			t.Fatal(ok, err)
		}
		F.Reset()
		if F.Generation() == gen {
			t.Fatal("a Reset left the generation")
		}
		var out bytes.Buffer
		if _, ok, _ := F.CaptureTo(false, time.Second, &out, func() bool { return false }, nil); ok || out.Len() != 0 {
			t.Fatal("a capture its mark refused was taken")
		}
	})
}

// A restore files the capture's own jobs without looking each up (they are
// distinct, restored into an empty engine), and only those: an add in the
// batches after the capture that replaces a captured job still replaces it.
func TestRestoreReplacesAfterCapture(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 2, Options{}, nil)
		ln := g.nodes[0]
		L := ln.e
		ln.r.setAuto(true)
		for i := range 3000 {
			a := AddArgs{Queue: []byte(fmt.Sprintf("q%d", i%3)), Payload: []byte(fmt.Sprint("p", i)), Delay: 60_000}
			if i%2 == 0 {
				a.ID = []byte(fmt.Sprint("c", i))
			}
			if _, err := L.Add(a); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		log := func() [][]byte { ln.r.mu.Lock(); defer ln.r.mu.Unlock(); return ln.r.log }
		var from int
		var out bytes.Buffer
		if _, ok, err := L.CaptureTo(true, time.Second, &out, func() bool { from = len(log()); return true }, nil); !ok || err != nil {
			t.Fatal(ok, err)
		}
		for _, i := range []int{0, 1000, 2998} {
			a := AddArgs{Queue: []byte(fmt.Sprintf("q%d", i%3)), ID: []byte(fmt.Sprint("c", i)), Payload: b("new"),
				Delay: 1000, Replace: true}
			if res, err := L.Add(a); err != nil || !res.Added {
				t.Fatalf("replacing c%d: %+v %v", i, res, err)
			}
		}
		if !L.quiesce(time.Second, func() {}) {
			t.Fatal("the leader did not settle")
		}
		for _, b := range log()[from:] {
			out.Write(b)
		}
		out.WriteByte(0)
		x := newEngine(t, Options{Replicator: &fakeRepl{closed: true}, Follower: true})
		if err := x.Restore(&out); err != nil {
			t.Fatal(err)
		}
		if want, got := replDump(L), replDump(x); got != want {
			t.Fatalf("restored state differs:\n%s", diffLines(want, got))
		}
		if x.njobs != 3000 {
			t.Fatalf("%d jobs restored, want 3000", x.njobs)
		}
		if x.repl.snapJobs {
			t.Fatal("the restore still files without lookups")
		}
	})
}

// A snapshot without the size and end marks (one of the last release)
// restores as before, every add looked up; so does one with the marks
// restored on top of jobs already there (none is filed twice).
func TestRestoreWithoutMarks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		L := newEngine(t, Options{})
		for i := range 2000 {
			a := AddArgs{Queue: []byte(fmt.Sprintf("q%d", i%3)), Payload: []byte(fmt.Sprint("p", i)), Delay: int64(i % 2 * 60_000)}
			if i%2 == 0 {
				a.ID = []byte(fmt.Sprint("c", i))
			}
			if _, err := L.Add(a); err != nil {
				t.Fatal(err)
			}
		}
		snap := L.Snapshot()
		want := replDump(L)
		var old []byte
		marks := 0
		eachRecord(snap, func(p []byte) {
			if len(p) == 0 {
				return // the end mark
			}
			var r record.Rec
			if err := r.Decode(p); err != nil {
				t.Fatal(err)
			}
			if _, _, ok := record.SizeOf(&r); ok {
				r.Queue = nil // the meta record as the last release wrote it
				marks++
				p = r.Encode(nil)
			} else if record.IsJobsEnd(&r) {
				marks++
				return
			}
			old = record.AppendSnap(old, p)
		})
		if marks != 2 {
			t.Fatalf("%d snapshot marks, want 2", marks)
		}
		old = record.EndSnap(old)
		x := newEngine(t, Options{Replicator: &fakeRepl{closed: true}, Follower: true})
		if err := x.Restore(bytes.NewReader(old)); err != nil {
			t.Fatal(err)
		}
		if got := replDump(x); got != want {
			t.Fatalf("a snapshot without marks restored otherwise:\n%s", diffLines(want, got))
		}
		// Restored again on top: the marks are there, the engine is not
		// empty, so each add replaces the job it restates.
		if err := x.Restore(bytes.NewReader(snap)); err != nil {
			t.Fatal(err)
		}
		if got := replDump(x); got != want || x.njobs != 2000 {
			t.Fatalf("restored on top: %d jobs, state:\n%s", x.njobs, diffLines(want, got))
		}
	})
}

// The pages a capture copies its jobs into are not the engine's memory:
// --maxmemory and INFO's used_memory (MappedBytes) leave them out, so a
// snapshot being taken refuses no write.
func TestCaptureBuffersNotCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 2, Options{}, nil)
		ln := g.nodes[0]
		L := ln.e
		ln.r.setAuto(true)
		for i := range 40_000 {
			if _, err := L.Add(AddArgs{Queue: b("q"), Payload: []byte(fmt.Sprint("p", i)), Delay: 60_000}); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		defer func(f func()) { captureStep = f }(captureStep)
		before, during := MappedBytes(), int64(-1)
		captureStep = func() {
			if during < 0 {
				during = MappedBytes()
			}
		}
		if _, ok, err := L.CaptureTo(true, time.Second, io.Discard, func() bool { return true }, nil); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if during != before || MappedBytes() != before {
			t.Fatalf("mapped %d before, %d during, %d after the capture", before, during, MappedBytes())
		}
	})
}
