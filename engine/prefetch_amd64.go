package engine

import "unsafe"

// prefetch asks the CPU to bring the cache line at p in, without waiting
// for it (PREFETCHT0). It never faults, whatever p is. See warmNext.
//
//go:noescape
func prefetch(p unsafe.Pointer)
