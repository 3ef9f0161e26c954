//go:build unix

package wheel

import (
	"fmt"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// mappedBytes is what newPage mapped and freePage has not unmapped.
var mappedBytes atomic.Int64

// MappedBytes returns the bytes of node pages mapped outside the Go heap by
// every wheel of the process: memory the runtime's statistics do not see.
func MappedBytes() int64 { return mappedBytes.Load() }

// newPage maps one page of nodes outside the Go heap (zeroed: not
// scheduled). See Wheel.pages for why.
func newPage() []node {
	n := nodePage * int(unsafe.Sizeof(node{}))
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		panic(fmt.Sprintf("wheel: mapping %d bytes: %v", n, err))
	}
	mappedBytes.Add(int64(n))
	return unsafe.Slice((*node)(unsafe.Pointer(unsafe.SliceData(b))), nodePage)
}

// freePage unmaps a page newPage made.
func freePage(p []node) {
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(p))), nodePage*int(unsafe.Sizeof(node{})))
	if err := syscall.Munmap(b); err != nil {
		panic(fmt.Sprintf("wheel: unmapping a page: %v", err))
	}
	mappedBytes.Add(-int64(len(b)))
}
