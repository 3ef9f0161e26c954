//go:build unix

package offheap

import (
	"fmt"
	"syscall"
)

func mapBytes(n int) []byte {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		panic(fmt.Sprintf("offheap: mapping %d bytes: %v", n, err))
	}
	return b
}

func unmapBytes(b []byte) {
	if err := syscall.Munmap(b); err != nil {
		panic(fmt.Sprintf("offheap: unmapping %d bytes: %v", len(b), err))
	}
}
