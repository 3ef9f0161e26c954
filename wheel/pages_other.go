//go:build !unix

package wheel

func newPage() []node { return make([]node, nodePage) }

func freePage([]node) {}
