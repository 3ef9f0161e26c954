package journal

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/delayd/delayd/aof"
)

// segRecords replays every segment the manifest names, in order.
func segRecords(t *testing.T, fs aof.FS) []string {
	t.Helper()
	ids, legacy, err := aof.ReadManifest(fs, path)
	if err != nil || legacy {
		t.Fatalf("manifest: %v (legacy %v)", err, legacy)
	}
	var got []string
	for _, id := range ids {
		if _, err := aof.Replay(fs, aof.SegPath(path, id), func(p []byte) error {
			got = append(got, string(p))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return got
}

// A segmented journal rolls between batches when the active segment is
// full, to the segment PrepareNext made when there is one (else to one it
// makes), and drops the oldest on demand: the manifest's segments hold
// every record written since, in order, through a crash under always.
func TestSegmentsRollPrepareAndDrop(t *testing.T) {
	for _, prepare := range []bool{false, true} {
		t.Run(fmt.Sprint("prepare=", prepare), func(t *testing.T) {
			fs := aof.NewMemFS()
			ids, err := aof.OpenSegments(fs, path)
			if err != nil {
				t.Fatal(err)
			}
			j := New(Options{FS: fs, Path: path, Fsync: FsyncAlways, SegmentSize: 256},
				Env{Failed: func(uint64, error, bool) bool { return false }, Written: func(int64) {}})
			j.SetSegments(ids, 0)
			if err := j.Open(aof.HeaderSize); err != nil {
				t.Fatal(err)
			}
			var want []string
			for i := range 100 {
				rec := fmt.Sprintf("record-%03d-%s", i, "................................")
				want = append(want, rec)
				tk := j.Append([]byte(rec))
				j.Write()
				if err := j.WaitDurable(tk); err != nil {
					t.Fatal(err)
				}
				if prepare && j.WantNext() {
					j.PrepareNext()
				}
			}
			segs := j.Segments()
			if len(segs) < 8 || segs[len(segs)-1] != j.Active() {
				t.Fatalf("segments %v, active %d", segs, j.Active())
			}
			if got := segRecords(t, fs.CrashClone()); !slices.Equal(got, want) {
				t.Fatalf("after a crash: %d records, want %d", len(got), len(want))
			}
			if err := j.DropOldest(segs[1]); err == nil {
				t.Fatal("dropped a segment that is not the oldest")
			}
			if err := j.DropOldest(j.Active()); err == nil {
				t.Fatal("dropped the active segment")
			}
			// Dropping the first segment drops its records, and only them.
			first, _ := aof.Replay(fs, aof.SegPath(path, segs[0]), nil)
			if err := j.DropOldest(segs[0]); err != nil {
				t.Fatal(err)
			}
			if got := segRecords(t, fs.CrashClone()); !slices.Equal(got, want[first.Records:]) {
				t.Fatalf("after dropping segment %d: %d records, want %d", segs[0], len(got), len(want)-first.Records)
			}
			if _, err := fs.Stat(aof.SegPath(path, segs[0])); err == nil {
				t.Fatal("the dropped segment's file is still there")
			}
			if in := j.SegmentInfo(); in.Rolls != uint64(len(segs)-1) || in.Drops != 1 || in.Count != len(segs)-1 {
				t.Fatalf("SegmentInfo %+v after %d rolls and a drop", in, len(segs)-1)
			}
			j.Close()
		})
	}
}

// A long tail pauses (Env.Pause) after each tailSlice of work, so that on
// one CPU the network poller runs between its slices, and reads every
// record in order all the same; a short one does not pause.
func TestTailPausesInSlices(t *testing.T) {
	fs := aof.NewMemFS()
	ids, err := aof.OpenSegments(fs, path)
	if err != nil {
		t.Fatal(err)
	}
	pauses := 0
	// A fake clock: each reading is step later than the one before (Tail
	// reads it once every 16 records and after each pause).
	var clk time.Time
	var step time.Duration
	j := New(Options{FS: fs, Path: path, Fsync: FsyncNo, SegmentSize: 64 << 20},
		Env{Failed: func(uint64, error, bool) bool { return false }, Written: func(int64) {}, Pause: func() { pauses++ },
			Now: func() time.Time { clk = clk.Add(step); return clk }})
	j.SetSegments(ids, 0)
	if err := j.Open(aof.HeaderSize); err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	const n = 400
	for i := range n {
		tk := j.Append(fmt.Appendf(nil, "record-%04d", i))
		j.Write()
		if err := j.WaitDurable(tk); err != nil {
			t.Fatal(err)
		}
	}
	tail := func(work time.Duration) {
		t.Helper()
		step = 16 * work // 16 records' work between two readings
		var got int
		if _, err := j.Tail(func(_ uint64, _ int64, rec []byte) {
			if want := fmt.Sprintf("record-%04d", got); string(rec) != want {
				t.Fatalf("record %q, want %q", rec, want)
			}
			got++
		}); err != nil || got != n {
			t.Fatalf("tail read %d records (%v), want %d", got, err, n)
		}
		j.RetailFrom()
	}
	// 5 µs a record, the clock read every 16 (80 µs): the third reading
	// after a slice began is past 200 µs, so a pause every 48 records, 8
	// in 400 (2 ms of work).
	tail(5 * time.Microsecond)
	if pauses != 8 {
		t.Fatalf("%d pauses in a tail of 2 ms, want 8 (one a %v)", pauses, tailSlice)
	}
	pauses = 0
	tail(0)
	if pauses != 0 {
		t.Fatalf("%d pauses in a tail of %d records that took no time", pauses, n)
	}
}

// Warm reads a segment through in warmRead pieces with a pause between
// them: a compaction's read of 64 MiB on the server's goroutines must let
// the clients and the poller run, as its chunks do.
func TestWarmPausesBetweenReads(t *testing.T) {
	fs := aof.NewMemFS()
	fs.WriteFile(aof.SegPath(path, 3), make([]byte, 4*warmRead+100))
	j := New(Options{FS: fs, Path: path, Fsync: FsyncEverySec}, Env{})
	pauses := 0
	j.Warm(3, func() { pauses++ })
	if pauses != 4 {
		t.Fatalf("%d pauses reading %d bytes, want 4 (one after each %d read)", pauses, 4*warmRead+100, warmRead)
	}
	j.Warm(4, func() { t.Fatal("a pause warming a segment that is not there") })
}
