package record

import (
	"errors"
	"testing"

	"github.com/delayd/delayd/queue"
	"github.com/delayd/delayd/schedule"
)

// An export reads back as written; a payload of another version, of
// another queue's records or of a kind an export never holds is refused.
func TestExportReadsBackAndRefusesWhatItNeverHolds(t *testing.T) {
	var buf []byte
	out := NewExport()
	for _, r := range []Rec{
		{Op: Add, Time: 5, Queue: []byte("q"), SID: 7, Due: 9, Payload: []byte("p")},
		{Op: Pause, Time: 5, Queue: []byte("q"), Flags: 1},
	} {
		out = AppendExport(out, &r, &buf)
	}
	recs, err := ReadExport([]byte("q"), out)
	if err != nil || len(recs) != 2 || recs[0].SID != 7 || string(recs[0].Payload) != "p" || recs[1].Op != Pause {
		t.Fatalf("ReadExport = %+v, %v", recs, err)
	}
	cancel := AppendExport(NewExport(), &Rec{Op: Cancel, Time: 5, Queue: []byte("q"), SID: 7}, &buf)
	for name, p := range map[string][]byte{
		"empty": nil, "another version": append([]byte{9}, out[1:]...),
		"cut short": out[:len(out)-1], "a cancel": cancel,
	} {
		if _, err := ReadExport([]byte("q"), p); !errors.Is(err, ErrBadExport) {
			t.Errorf("%s: %v, want ErrBadExport", name, err)
		}
	}
	if _, err := ReadExport([]byte("other"), out); !errors.Is(err, ErrBadExport) {
		t.Errorf("another queue's export: %v, want ErrBadExport", err)
	}
}

// QueueDrop undoes what QueueState writes: a DEL for the jobs, the limit
// zeroed, the pause lifted, each schedule removed; other names untouched.
func TestQueueDropClearsQueueState(t *testing.T) {
	var ls queue.Limits
	ls.SetSpec("q", queue.Spec{Concurrency: 2})
	ls.SetPaused("q", true)
	ls.SetSpec("other", queue.Spec{Rate: 1, Per: 1000})
	var st schedule.Table
	rec, spec, err := schedule.NewRec("", "", 60_000, schedule.MisfireSkip, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	st.Put(&schedule.Sched{Key: schedule.Key{Queue: "q", Name: "s"}, St: rec, Spec: spec})
	st.Put(&schedule.Sched{Key: schedule.Key{Queue: "other", Name: "s"}, St: rec, Spec: spec})
	if got := QueueState([]byte("q"), 1, &ls, &st); len(got) != 3 || got[0].Op != Limit || got[1].Op != Pause || got[2].Op != Schedule {
		t.Fatalf("QueueState = %+v", got)
	}
	got := QueueDrop([]byte("q"), 1, true, &ls, &st)
	want := []Rec{{Op: Del}, {Op: Limit}, {Op: Pause}, {Op: Unschedule, ID: []byte("s")}}
	if len(got) != len(want) {
		t.Fatalf("QueueDrop = %+v", got)
	}
	for i, r := range got {
		if r.Op != want[i].Op || string(r.Queue) != "q" || r.Time != 1 || !r.Limit.IsZero() || r.Flags != 0 || string(r.ID) != string(want[i].ID) {
			t.Errorf("record %d: %+v, want %+v of q at 1", i, r, want[i])
		}
	}
}
