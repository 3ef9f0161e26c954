//go:build !amd64

package engine

import "unsafe"

// prefetch is a hint only: other architectures go without it.
func prefetch(unsafe.Pointer) {}
