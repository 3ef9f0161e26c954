package queue

import "testing"

func TestWaitersFIFO(t *testing.T) {
	type waiter struct{ name string }
	var l Waiters[*waiter]
	links := make([]WaitLink[*waiter], 3)
	for i, n := range []string{"a", "b", "c"} {
		links[i].W = &waiter{n}
		l.Park(&links[i], 7)
	}
	order := func(l *Waiters[*waiter]) (s string) {
		for k := l.First(); k != nil; k = k.Next() {
			s += k.W.name
		}
		return s
	}
	if order(&l) != "abc" || l.Len() != 3 || links[1].Q != 7 {
		t.Fatalf("parked %q, %d", order(&l), l.Len())
	}
	l.Unlink(&links[1])
	if order(&l) != "ac" || l.Len() != 2 {
		t.Fatalf("after unlinking b: %q", order(&l))
	}
	l.Unlink(&links[0])
	l.Unlink(&links[2])
	if l.First() != nil || l.Len() != 0 {
		t.Fatal("not empty")
	}
	l.Park(&links[0], 7)
	l.Park(&links[2], 7)
	m := l.Move(9)
	if order(&m) != "ac" || l.Len() != 0 || links[2].Q != 9 {
		t.Fatalf("moved %q, left %d, queue %d", order(&m), l.Len(), links[2].Q)
	}
}
