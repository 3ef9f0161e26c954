//go:build !unix

package wheel

// MappedBytes is 0 here: pages come from the Go heap.
func MappedBytes() int64 { return 0 }

func newPage() []node { return make([]node, nodePage) }

func freePage([]node) {}
