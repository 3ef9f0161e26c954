package bucket

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/delayd/delayd/aof"
)

// v1Jobs are the jobs of testdata/run-v1, a run written by the first
// format (its data in index order), in index order: 200 jobs of three
// queues, dues out of order, heads and payloads of many sizes (some over
// 1 KiB, some empty).
func v1Jobs() []Job {
	var js []Job
	for i := range 200 {
		sid := uint64(i + 1)
		js = append(js, Job{
			Due:     int64(5_000_000 + (i*7919)%3_000),
			Seq:     uint64(100 + i),
			SID:     sid,
			Queue:   queueOf(sid),
			Head:    fmt.Appendf(nil, "head-%d", i),
			Payload: bytes.Repeat([]byte{byte(i)}, (i*53)%1200),
		})
	}
	return js
}

// A run of the first format (data in index order, testdata/run-v1, written
// by that build) still opens and reads: each job by id, a load's span of
// sorted entries, and a checkpoint's walk (Each).
func TestFirstFormatRunsRead(t *testing.T) {
	b, err := os.ReadFile("testdata/run-v1")
	if err != nil {
		t.Fatal(err)
	}
	fs := aof.NewMemFS()
	fs.WriteFile(RunPath(testPath, 1), b)
	want := v1Jobs()
	var order []Sorted
	r, err := OpenRun(fs, testPath, 1, func(pos int, s Sorted) { order = append(order, s) })
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.inOrder || r.N != len(want) || len(order) != len(want) {
		t.Fatalf("run of %d jobs (want %d), data in sorted order %v", r.N, len(want), r.inOrder)
	}
	same := func(how string, i uint32, j runJob) {
		t.Helper()
		w := want[i]
		if j.Due != w.Due || j.Seq != w.Seq || j.SID != w.SID || r.Names[j.Queue] != w.Queue || !bytes.Equal(j.Head, w.Head) || !bytes.Equal(j.Payload, w.Payload) {
			t.Fatalf("%s: job %d read as due %d seq %d id %d queue %s head %q, %d payload bytes; want %+v", how, i, j.Due, j.Seq, j.SID, r.Names[j.Queue], j.Head, len(j.Payload), w)
		}
	}
	for i := range uint32(r.N) {
		j, err := r.ReadData(i)
		if err != nil {
			t.Fatal(err)
		}
		same("ReadData", i, j)
	}
	n := 0
	if err := r.readJobs(50, order[50:120], func() {}, func(k int, j runJob) {
		same("readJobs", order[50+k].Index, j)
		n++
	}); err != nil || n != 70 {
		t.Fatalf("readJobs read %d of 70: %v", n, err)
	}
	n = 0
	if err := r.each(make([]uint64, (r.N+63)/64), func(j *Job) error {
		if j.SID != uint64(n+1) {
			t.Fatalf("each gave id %d at %d: the first format's order is the index's", j.SID, n)
		}
		same("each", uint32(n), runJob{Due: j.Due, Seq: j.Seq, SID: j.SID, Queue: uint32(slices.Index(r.Names, j.Queue)), Head: j.Head, Payload: j.Payload})
		n++
		return nil
	}); err != nil || n != r.N {
		t.Fatalf("each gave %d of %d: %v", n, r.N, err)
	}
}

// A load reads a span of a run's jobs, whose data lie in sorted order, a
// window at a time: every job whole from any start, those larger than a
// window too, and a damaged byte is an error, not a wrong job.
func TestReadSpan(t *testing.T) {
	fs := aof.NewMemFS()
	const n = 600
	jobs := make([]runJob, n)
	for i := range jobs {
		size := (i * 7919) % 3000
		if i%97 == 0 {
			size = spanWindow + i*13 // longer than a window
		}
		jobs[i] = runJob{Due: int64(10_000 - i*3%1000), Seq: uint64(i), SID: uint64(i + 1), Head: fmt.Appendf(nil, "h%d", i), Payload: bytes.Repeat([]byte{byte(i)}, size)}
	}
	r, err := writeRunJobs(fs, testPath, 4, []string{"q"}, n, func(i int) (runJob, error) { return jobs[i], nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	all, err := r.ReadSorted(0, n, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, from := range []int{0, 1, 96, 97, 300, n - 1} {
		got := 0
		err := r.readSpan(from, all[from:], func() {}, func(k int, j runJob) {
			w := jobs[all[from+k].Index]
			if j.SID != w.SID || !bytes.Equal(j.Head, w.Head) || !bytes.Equal(j.Payload, w.Payload) {
				t.Fatalf("from %d: sorted %d read as id %d, %d payload bytes; want id %d, %d", from, from+k, j.SID, len(j.Payload), w.SID, len(w.Payload))
			}
			got++
		})
		if err != nil || got != n-from {
			t.Fatalf("from %d: %d jobs read of %d: %v", from, got, n-from, err)
		}
	}
	b, _ := fs.ReadFile(RunPath(testPath, 4))
	b[headerSize+5000] ^= 1
	fs.WriteFile(RunPath(testPath, 4), b)
	bad, err := OpenRun(fs, testPath, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if err := bad.readSpan(0, all, func() {}, func(int, runJob) {}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a damaged span read: %v, want ErrCorrupt", err)
	}
}
