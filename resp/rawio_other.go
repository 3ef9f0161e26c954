//go:build !linux

package resp

import "net"

// fastIO is Linux's raw socket path (rawio_linux.go); elsewhere net.Conn's.
func fastIO(nc net.Conn) net.Conn { return nc }
