//go:build !linux || !(amd64 || arm64)

package aof

// syncPolled is Linux's (aiosync_linux.go): elsewhere Sync makes the
// ordinary call.
func (w *Writer) syncPolled() (ok bool, err error) { return false, nil }

func (w *Writer) closeAIO() {}

// aioState is Linux's on amd64 and arm64 (aiosync_linux.go).
type aioState struct{ lock chan struct{} }
