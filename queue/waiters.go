package queue

// Waiters is one queue's FIFO of clients parked in a blocking pop, oldest
// first, as Redis keeps a list of blocked clients per key (blocked.c). A
// client waiting on several queues has a link in each, so unblocking it is
// O(queues it waits on). The links are the waiter's own (W is the engine's
// waiter): parking allocates nothing here. Serving them is the engine's.
type Waiters[W any] struct {
	head, tail *WaitLink[W]
	n          int
}

// WaitLink is a waiter's place in one queue's Waiters.
type WaitLink[W any] struct {
	W          W      // the waiter
	Q          uint32 // the queue it waits on
	prev, next *WaitLink[W]
}

// First is the oldest waiter's link, or nil.
func (l *Waiters[W]) First() *WaitLink[W] { return l.head }

// Next is the link after k, or nil.
func (k *WaitLink[W]) Next() *WaitLink[W] { return k.next }

// Len is the number of waiters.
func (l *Waiters[W]) Len() int { return l.n }

// Park appends link k, of a waiter on queue q, at the tail. O(1).
func (l *Waiters[W]) Park(k *WaitLink[W], q uint32) {
	k.Q, k.prev, k.next = q, l.tail, nil
	if l.tail != nil {
		l.tail.next = k
	} else {
		l.head = k
	}
	l.tail = k
	l.n++
}

// Unlink removes link k, which is in l. O(1).
func (l *Waiters[W]) Unlink(k *WaitLink[W]) {
	if k.prev != nil {
		k.prev.next = k.next
	} else {
		l.head = k.next
	}
	if k.next != nil {
		k.next.prev = k.prev
	} else {
		l.tail = k.prev
	}
	k.prev, k.next = nil, nil
	l.n--
}

// Move takes every waiter out of l, in order, as waiters on queue q.
// O(waiters).
func (l *Waiters[W]) Move(q uint32) Waiters[W] {
	for k := l.head; k != nil; k = k.next {
		k.Q = q
	}
	m := *l
	*l = Waiters[W]{}
	return m
}
