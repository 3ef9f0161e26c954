//go:build !linux

package aof

// rawFile is Linux's (rawwrite_linux.go).
type rawFile struct{}

// write appends b to the file (rawwrite_linux.go has Linux's raw path).
func (w *Writer) write(b []byte) (int, error) { return w.f.Write(b) }

func (w *Writer) initRaw() {}

// syncRaw is Linux's (rawwrite_linux.go): elsewhere SyncRaw is Sync.
func (w *Writer) syncRaw() (ok bool, err error) { return false, nil }
