//go:build !linux

package engine

// prefault is a no-op where MADV_POPULATE_WRITE does not exist: pages fault
// in on first use (prefault_linux.go).
func prefault([]byte) {}
