package resp

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// TestIsTimeoutDeadline: the read deadline that wakes a blocked client's
// reader is a timeout by the fast path (a *net.OpError holding
// os.ErrDeadlineExceeded), and an end of stream is not.
func TestIsTimeoutDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cl, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sv.Close()
	sv.SetReadDeadline(time.Now())
	_, err = sv.Read(make([]byte, 1))
	var oe *net.OpError
	if !errors.As(err, &oe) || !isTimeout(err) {
		t.Fatalf("deadline read: %v (%T) not a timeout", err, err)
	}
	sv.SetReadDeadline(time.Time{})
	cl.Close()
	_, err = sv.Read(make([]byte, 1))
	if err != io.EOF || isTimeout(err) {
		t.Fatalf("read after close: %v, isTimeout %v", err, isTimeout(err))
	}
	if isTimeout(&net.OpError{Op: "read", Err: errors.New("reset")}) {
		t.Fatal("a reset is not a timeout")
	}
}
