package chaos

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"
)

// fifo builds histories of sampled queues; times are plain numbers.
type fifo struct{ ops []Op }

func (f *fifo) op(client int, kind Kind, queue, job string, count int64, inv, ret int64, out Outcome) *fifo {
	f.ops = append(f.ops, Op{Index: len(f.ops), Client: client, Kind: kind, Queue: queue, Job: job,
		Count: count, Invoke: inv, Return: ret, Outcome: out})
	return f
}

func (f *fifo) add(c int, id string, inv, ret int64) *fifo {
	return f.op(c, KindAdd, "s", id, 1, inv, ret, OK)
}

// pop returns id ("" = null).
func (f *fifo) pop(c int, id string, inv, ret int64) *fifo {
	n := int64(0)
	if id != "" {
		n = 1
	}
	return f.op(c, KindPop, "s", id, n, inv, ret, OK)
}

func (f *fifo) check() porcupine.CheckResult {
	return CheckFIFO(f.ops, func(q string) bool { return strings.HasPrefix(q, "s") }, 0).Result
}

func TestFIFOLinearizable(t *testing.T) {
	cases := map[string]*fifo{
		"sequential": new(fifo).
			add(0, "a", 0, 10).add(0, "b", 11, 20).
			pop(1, "a", 21, 30).pop(1, "b", 31, 40).pop(1, "", 41, 50),
		// Concurrent adds may land in either order.
		"concurrent adds": new(fifo).
			add(0, "a", 0, 10).add(1, "b", 5, 15).
			pop(2, "b", 20, 30).pop(2, "a", 31, 40),
		// A pop that overlaps the add may see the list empty.
		"null pop concurrent with the add": new(fifo).
			add(0, "a", 0, 10).pop(1, "", 5, 8).pop(1, "a", 11, 20),
		"cancel then pop": new(fifo).
			add(0, "a", 0, 10).add(0, "b", 11, 20).
			op(1, KindCancel, "s", "a", 1, 21, 30, OK).
			pop(2, "b", 31, 40).
			op(1, KindCancel, "s", "a", 0, 41, 50, OK),
		// An add whose reply was lost may have landed late, or never.
		"unknown add landed": new(fifo).
			op(0, KindAdd, "s", "a", 0, 0, 10, Unknown).pop(1, "a", 100, 110),
		"unknown add never landed": new(fifo).
			op(0, KindAdd, "s", "a", 0, 0, 10, Unknown).pop(1, "", 100, 110),
		// A pop whose reply was lost may have taken the job.
		"unknown pop took it": new(fifo).
			add(0, "a", 0, 10).op(1, KindPop, "s", "", 0, 11, 12, Unknown).pop(2, "", 20, 30),
		"failed ops are left out": new(fifo).
			add(0, "a", 0, 10).op(1, KindPop, "s", "", 0, 11, 12, Fail).pop(2, "a", 20, 30),
		"queues are independent": new(fifo).
			add(0, "a", 0, 10).op(0, KindAdd, "s2", "x", 1, 0, 10, OK).
			op(1, KindPop, "s2", "x", 1, 11, 20, OK).pop(1, "a", 21, 30),
		"other queues are not sampled": new(fifo).
			add(0, "a", 0, 10).op(1, KindPop, "other", "a", 1, 11, 20, OK).pop(1, "a", 21, 30),
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			if got := f.check(); got != porcupine.Ok {
				t.Fatalf("got %v, want Ok", got)
			}
		})
	}
}

func TestFIFONotLinearizable(t *testing.T) {
	cases := map[string]*fifo{
		// b was added after a completed, yet came out first.
		"out of order": new(fifo).
			add(0, "a", 0, 10).add(0, "b", 11, 20).pop(1, "b", 21, 30),
		// a was in the list, acknowledged, and a later pop saw nothing.
		"stale null": new(fifo).
			add(0, "a", 0, 10).pop(1, "", 20, 30),
		// One at-most-once job handed out twice.
		"delivered twice": new(fifo).
			add(0, "a", 0, 10).pop(1, "a", 20, 30).pop(2, "a", 40, 50),
		// A cancel removed a job that a completed pop had already taken.
		"cancel after pop": new(fifo).
			add(0, "a", 0, 10).pop(1, "a", 20, 30).op(2, KindCancel, "s", "a", 1, 40, 50, OK),
		// The pop that returned a job completed before the add began: the
		// server handed out a job from the future.
		"pop before add": new(fifo).
			pop(1, "a", 0, 10).add(0, "a", 20, 30),
		// A pop returned b after a's pop returned null, though a was added
		// first and nothing removed it: whichever order the concurrent
		// pops take, a null while a is present is impossible.
		"null while present": new(fifo).
			add(0, "a", 0, 10).add(0, "b", 11, 20).
			pop(1, "", 30, 40).pop(2, "b", 25, 45).pop(3, "a", 50, 60),
		"one queue breaks, the other is fine": new(fifo).
			op(0, KindAdd, "s2", "x", 1, 0, 10, OK).op(1, KindPop, "s2", "x", 1, 11, 20, OK).
			add(0, "a", 0, 10).add(0, "b", 11, 20).pop(1, "b", 21, 30),
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			if got := f.check(); got != porcupine.Illegal {
				t.Fatalf("got %v, want Illegal", got)
			}
		})
	}
}

func TestFIFOVisualize(t *testing.T) {
	f := new(fifo).add(0, "a", 0, 10).add(0, "b", 11, 20).pop(1, "b", 21, 30)
	r := CheckFIFO(f.ops, func(string) bool { return true }, 0)
	if r.Result != porcupine.Illegal || r.Ops != 3 {
		t.Fatalf("%+v", r)
	}
	path := filepath.Join(t.TempDir(), "lin.html")
	if err := r.Visualize(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(b), `pop() -\u003e b`) {
		t.Fatalf("visualization lacks the pop: %v", err)
	}
}

func TestFIFOStateHelpers(t *testing.T) {
	s := "a\x00ab\x00b\x00"
	for id, want := range map[string]bool{"a": true, "ab": true, "b": true, "x": false, "": false} {
		if fifoHas(s, id) != want {
			t.Errorf("has(%q) = %v", id, !want)
		}
	}
	for id, want := range map[string]string{"a": "ab\x00b\x00", "ab": "a\x00b\x00", "b": "a\x00ab\x00"} {
		if got := fifoRemove(s, id); got != want {
			t.Errorf("remove(%q) = %q, want %q", id, got, want)
		}
	}
}
