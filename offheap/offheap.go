// Package offheap hands out arrays of pointer-free values in memory mapped
// straight from the operating system, outside the Go heap.
//
// Why: the engine keeps its jobs in large pointer-free pages. On the Go heap
// they cost the collector no scanning, but they still count as live heap,
// and the collector lets the heap grow to twice the live heap (GOGC=100)
// before it collects: at 10M jobs the headroom alone was a third of the
// server's memory. Mapped pages are memory the runtime does not know about,
// so no headroom is kept for them, and unmapping gives them back to the
// operating system at once instead of at some later scavenge.
//
// # Caveats
//
// The values must hold no Go pointers (no pointers, slices, strings, maps,
// interfaces, channels or funcs): the collector never looks inside mapped
// memory, so a pointer stored there would not keep its target alive. The
// caller frees what it made, exactly once, with Free, and must not touch it
// afterwards: a read after Free faults. Pages come zeroed and are backed
// lazily, so a large mapping costs resident memory only as it is written.
package offheap

import (
	"sync/atomic"
	"unsafe"
)

// mapped is the bytes Make handed out and Free has not taken back: memory
// the runtime's statistics do not see (--maxmemory and INFO add it).
var mapped atomic.Int64

// Mapped returns the bytes mapped by Make and not yet freed, in this
// process. O(1).
func Mapped() int64 { return mapped.Load() }

// Make returns a slice of n zero values of T outside the Go heap. T must
// hold no pointers. It panics if the system refuses the memory, as the
// runtime does when make runs out. O(1): pages are backed when touched.
func Make[T any](n int) []T {
	if n <= 0 {
		return nil
	}
	var t T
	b := mapBytes(n * int(unsafe.Sizeof(t)))
	mapped.Add(int64(len(b)))
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// Free gives back what Make returned (the whole slice, whatever it has
// been resliced to since, as long as it starts where Make's did).
func Free[T any](s []T) {
	if cap(s) == 0 {
		return
	}
	var t T
	n := cap(s) * int(unsafe.Sizeof(t))
	unmapBytes(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), n))
	mapped.Add(-int64(n))
}
