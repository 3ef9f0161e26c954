// Package topn keeps the n best of a stream of values: a bounded heap with
// the worst kept value at its root, so a value that does not beat it costs
// one comparison. The engine uses it where a listing wants a few values
// out of many (the queues /metrics shows, a DELAY.UPCOMING page found by
// scanning the slab). It is a leaf: no state beyond the Keeper, no imports
// from the project.
package topn

import "slices"

// Keeper keeps the n best values offered, by better (a better than b: a
// goes first). better must be a strict order; values it cannot tell apart
// keep the one offered first.
type Keeper[T any] struct {
	n      int
	better func(a, b T) bool
	heap   []T // heap[0] is the worst kept
}

// New returns a Keeper of the n best; room is how many values may come at
// most (the heap's capacity is the smaller of the two).
func New[T any](n, room int, better func(a, b T) bool) Keeper[T] {
	return Keeper[T]{n: n, better: better, heap: make([]T, 0, max(min(n, room), 0))}
}

// Offer keeps v if fewer than n are kept or v is better than the worst
// kept, which it then replaces. O(log n).
func (k *Keeper[T]) Offer(v T) {
	h := k.heap
	switch {
	case len(h) < k.n:
		h = append(h, v)
		for c := len(h) - 1; c > 0; { // sift up
			p := (c - 1) / 2
			if !k.better(h[p], h[c]) {
				break
			}
			h[p], h[c] = h[c], h[p]
			c = p
		}
		k.heap = h
	case k.n > 0 && k.better(v, h[0]):
		h[0] = v
		for p := 0; ; { // sift down
			w := p
			if l := 2*p + 1; l < len(h) && k.better(h[w], h[l]) {
				w = l
			}
			if r := 2*p + 2; r < len(h) && k.better(h[w], h[r]) {
				w = r
			}
			if w == p {
				break
			}
			h[p], h[w] = h[w], h[p]
			p = w
		}
	}
}

// Sorted returns the kept values, the best first. The Keeper is spent.
func (k *Keeper[T]) Sorted() []T {
	slices.SortFunc(k.heap, func(a, b T) int {
		switch {
		case k.better(a, b):
			return -1
		case k.better(b, a):
			return 1
		}
		return 0
	})
	return k.heap
}
