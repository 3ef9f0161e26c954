package resp

import (
	"strconv"
	"sync/atomic"
)

// writer buffers replies for one connection in RESP2 or RESP3. Replies are
// appended to one byte slice and written with one syscall per batch of
// pipelined commands, as Redis does.
type writer struct {
	buf   []byte
	proto int
	// shared, if set, publishes proto to the connection's push path,
	// which encodes pushes from other goroutines.
	shared *atomic.Int32
	errs   uint64 // error replies written, for INFO's error counts
}

// ErrorCount is where the writer counts the error replies it wrote; only
// the connection's goroutine reads it (commands.Client).
func (w *writer) ErrorCount() *uint64 { return &w.errs }

func (w *writer) Proto() int { return w.proto }

func (w *writer) SetProto(p int) {
	w.proto = p
	if w.shared != nil {
		w.shared.Store(int32(p))
	}
}

func (w *writer) Status(s string) {
	w.buf = append(w.buf, '+')
	w.buf = append(w.buf, s...)
	w.buf = append(w.buf, '\r', '\n')
}

func (w *writer) Error(s string) {
	w.errs++
	w.buf = append(w.buf, '-')
	w.buf = append(w.buf, s...)
	w.buf = append(w.buf, '\r', '\n')
}

func (w *writer) Int(n int64) {
	w.buf = append(w.buf, ':')
	w.buf = strconv.AppendInt(w.buf, n, 10)
	w.buf = append(w.buf, '\r', '\n')
}

func (w *writer) Bulk(b []byte) {
	w.buf = append(w.buf, '$')
	w.buf = strconv.AppendInt(w.buf, int64(len(b)), 10)
	w.buf = append(w.buf, '\r', '\n')
	w.buf = append(w.buf, b...)
	w.buf = append(w.buf, '\r', '\n')
}

func (w *writer) BulkString(s string) {
	w.buf = append(w.buf, '$')
	w.buf = strconv.AppendInt(w.buf, int64(len(s)), 10)
	w.buf = append(w.buf, '\r', '\n')
	w.buf = append(w.buf, s...)
	w.buf = append(w.buf, '\r', '\n')
}

func (w *writer) Null() {
	if w.proto == 3 {
		w.buf = append(w.buf, "_\r\n"...)
		return
	}
	w.buf = append(w.buf, "$-1\r\n"...)
}

func (w *writer) NullArray() {
	if w.proto == 3 {
		w.buf = append(w.buf, "_\r\n"...)
		return
	}
	w.buf = append(w.buf, "*-1\r\n"...)
}

func (w *writer) Array(n int) { w.header('*', n) }

func (w *writer) Map(n int) {
	if w.proto == 3 {
		w.header('%', n)
		return
	}
	w.header('*', 2*n)
}

// Verbatim writes text a person reads (INFO, CLIENT LIST): a verbatim
// string of format txt in RESP3, a bulk string in RESP2, as Redis does.
func (w *writer) Verbatim(s string) {
	if w.proto != 3 {
		w.BulkString(s)
		return
	}
	w.buf = append(w.buf, '=')
	w.buf = strconv.AppendInt(w.buf, int64(len(s)+4), 10)
	w.buf = append(w.buf, "\r\ntxt:"...)
	w.buf = append(w.buf, s...)
	w.buf = append(w.buf, '\r', '\n')
}

// Push starts an out-of-band message of n elements: a push in RESP3, an
// array in RESP2 (where only pub/sub messages are out of band).
func (w *writer) Push(n int) {
	if w.proto == 3 {
		w.header('>', n)
		return
	}
	w.header('*', n)
}

func (w *writer) header(kind byte, n int) {
	w.buf = append(w.buf, kind)
	w.buf = strconv.AppendInt(w.buf, int64(n), 10)
	w.buf = append(w.buf, '\r', '\n')
}
