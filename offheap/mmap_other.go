//go:build !unix

package offheap

// Elsewhere the memory comes from the Go heap, and Free leaves it to the
// collector.
func mapBytes(n int) []byte { return make([]byte, n) }

func unmapBytes([]byte) {}
