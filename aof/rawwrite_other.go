//go:build !linux

package aof

// write appends b to f (rawwrite_linux.go has Linux's raw path).
func write(f File, b []byte) (int, error) { return f.Write(b) }
