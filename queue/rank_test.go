package queue

import (
	"reflect"
	"testing"
)

// Top keeps the n queues with the most jobs, ties by name, and sums every
// queue; a queue with only waiters counts in no total.
func TestTopByJobsThenName(t *testing.T) {
	a, b, c, d := &Queue{}, &Queue{}, &Queue{}, &Queue{}
	a.Delayed, a.Ready = 2, 1 // 3 jobs
	b.Reserved = 3            // 3 jobs: after a, by name
	c.Ready = 5
	qs := []Named{{"b", b}, {"d", d}, {"a", a}, {"c", c}}
	top, tot := Top(qs, 3)
	var names []string
	for _, q := range top {
		names = append(names, q.Name)
	}
	if want := []string{"c", "a", "b"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("Top(3) = %v, want %v", names, want)
	}
	if want := (Totals{Delayed: 2, Ready: 6, Reserved: 3, Queues: 3}); tot != want {
		t.Fatalf("totals %+v, want %+v", tot, want)
	}
}
