package queue

import (
	"testing"
	"time"
)

func TestDoomedFreesOldestFirst(t *testing.T) {
	var d Doomed
	d.Doom(3, 10)
	d.Doom(7, 5)
	if d.Pending != 15 || d.Len() != 2 {
		t.Fatalf("pending %d, queues %d", d.Pending, d.Len())
	}
	qi, scan := d.Oldest()
	if qi != 3 || *scan != 0 {
		t.Fatalf("oldest %d at %d, want 3 at 0", qi, *scan)
	}
	*scan = 42
	if _, s := d.Oldest(); *s != 42 {
		t.Fatal("the scan position was not kept")
	}
	d.Freed()
	if qi, _ := d.Oldest(); qi != 7 {
		t.Fatalf("next %d, want 7", qi)
	}
	d.Reset()
	if d.Len() != 0 || d.Pending != 0 {
		t.Fatal("Reset kept something")
	}
}

func TestOverBoundsABatch(t *testing.T) {
	now := time.Now()
	if Over(Batch-1, now) || !Over(Batch, now) {
		t.Fatal("the job bound is not Batch")
	}
	old := now.Add(-2 * Hold)
	if Over(62, old) || !Over(63, old) {
		t.Fatal("the clock is not read once in 64 jobs")
	}
}
