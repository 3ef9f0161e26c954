//go:build unix

package wheel

import (
	"fmt"
	"syscall"
	"unsafe"
)

// newPage maps one page of nodes outside the Go heap (zeroed: not
// scheduled). See Wheel.pages for why.
func newPage() []node {
	n := nodePage * int(unsafe.Sizeof(node{}))
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		panic(fmt.Sprintf("wheel: mapping %d bytes: %v", n, err))
	}
	return unsafe.Slice((*node)(unsafe.Pointer(unsafe.SliceData(b))), nodePage)
}

// freePage unmaps a page newPage made.
func freePage(p []node) {
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(p))), nodePage*int(unsafe.Sizeof(node{})))
	if err := syscall.Munmap(b); err != nil {
		panic(fmt.Sprintf("wheel: unmapping a page: %v", err))
	}
}
