//go:build !linux || !(amd64 || arm64)

package aof

// syncPolled is Linux's (aiosync_linux.go): elsewhere Sync makes the
// ordinary call.
func (w *Writer) syncPolled() (ok bool, err error) { return false, nil }

// PolledSyncs is Linux's (aiosync_linux.go): elsewhere no fsync goes
// through AIO.
func PolledSyncs() uint64 { return 0 }
