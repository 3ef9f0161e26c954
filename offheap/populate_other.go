//go:build !linux

package offheap

// Populate is a no-op where MADV_POPULATE_WRITE does not exist: pages fault
// in on first use (populate_linux.go).
func Populate[T any]([]T) {}
