package resp

import (
	"bytes"
	"io"

	"github.com/tidwall/redcon"
)

// reader parses commands from one connection without allocating: arguments
// are slices of its buffer, valid until the next fill. The connection loop
// runs every command it has before reading more, and the engine copies what
// it keeps, so nothing outlives the buffer.
//
// The fast path is the RESP array of bulk strings every client library
// sends. Inline commands (telnet, redis-cli pipes) go to redcon's parser,
// which knows quoting and escapes. redcon's Reader itself copied each frame
// and allocated an argument slice per command (a quarter of the CPU of a
// pipelined DELAY.ADD benchmark), and on a malformed frame it dropped the
// commands read before it unanswered; Redis answers those first, and so do
// we.
//
// Limits are Redis's: a bulk string of at most 512 MiB, at most 1M
// arguments, an inline line of at most 64 KiB; before AUTH, at most 10
// arguments of at most 16 KiB each, so an unauthenticated client cannot make
// the server buffer much.
type reader struct {
	src   io.Reader
	buf   []byte
	start int // first unparsed byte
	end   int // end of data read
	args  [][]byte
	authd func() bool // false: the client has not authenticated yet
}

// errProtocol is a malformed frame: the connection cannot be resynchronised.
type errProtocol string

func (e errProtocol) Error() string { return "Protocol error: " + string(e) }

const (
	maxBulk          = 512 << 20
	maxArgs          = 1 << 20
	maxInline        = 64 << 10
	maxUnauthArgs    = 10
	maxUnauthBulk    = 16 << 10
	initialReadSpace = 16 << 10
)

func newReader(src io.Reader, authd func() bool) *reader {
	return &reader{src: src, buf: make([]byte, initialReadSpace), authd: authd}
}

// next returns the next complete command's arguments, or ok=false when the
// buffer holds no complete command (then fill). The slice and its elements
// are reused by the following call.
func (r *reader) next() (args [][]byte, ok bool, err error) {
	b := r.buf[r.start:r.end]
	if len(b) == 0 {
		return nil, false, nil
	}
	if b[0] != '*' {
		return r.inline(b)
	}
	line, n := readLine(b)
	if n == -1 && len(b) <= maxInline {
		return nil, false, nil
	}
	if n < 0 {
		return nil, false, errProtocol("invalid multibulk length")
	}
	if len(line) > 1 && line[1] == '-' {
		if _, ok := atoi(line[2:]); ok {
			r.start += n // *-1 and the like: nothing to run, as in Redis
			return r.next()
		}
	}
	count, ok := atoi(line[1:])
	limit := maxArgs
	if !r.authd() {
		limit = maxUnauthArgs
	}
	if !ok || count > limit {
		if !r.authd() && ok {
			return nil, false, errProtocol("unauthenticated multibulk length")
		}
		return nil, false, errProtocol("invalid multibulk length")
	}
	pos := n
	r.args = r.args[:0]
	for range count {
		if pos >= len(b) {
			return nil, false, nil
		}
		if b[pos] != '$' {
			return nil, false, errProtocol("expected '$', got '" + string(b[pos]) + "'")
		}
		line, n := readLine(b[pos:])
		if n == -1 && len(b)-pos <= 32 {
			return nil, false, nil
		}
		if n < 0 {
			return nil, false, errProtocol("invalid bulk length")
		}
		size, ok := atoi(line[1:])
		max := maxBulk
		if !r.authd() {
			max = maxUnauthBulk
		}
		if !ok || size > max {
			if !r.authd() && ok {
				return nil, false, errProtocol("unauthenticated bulk length")
			}
			return nil, false, errProtocol("invalid bulk length")
		}
		pos += n
		if len(b)-pos < size+2 {
			r.reserve(pos + size + 2) // one read can then take the rest
			return nil, false, nil
		}
		if b[pos+size] != '\r' || b[pos+size+1] != '\n' {
			return nil, false, errProtocol("invalid bulk length")
		}
		r.args = append(r.args, b[pos:pos+size:pos+size])
		pos += size + 2
	}
	r.start += pos
	if count == 0 {
		return r.next() // Redis ignores an empty array
	}
	return r.args, true, nil
}

// inline parses a telnet-style line with redcon's parser.
func (r *reader) inline(b []byte) ([][]byte, bool, error) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		if len(b) > maxInline {
			return nil, false, errProtocol("too big inline request")
		}
		return nil, false, nil
	}
	r.start += i + 1
	line := b[:i+1]
	if len(bytes.TrimSpace(line)) == 0 {
		return r.next() // an empty line is ignored, as in Redis
	}
	cmd, err := redcon.Parse(line)
	if err != nil {
		var msg string
		if _, after, ok := bytes.Cut([]byte(err.Error()), []byte("Protocol error: ")); ok {
			msg = string(after)
		} else {
			msg = err.Error()
		}
		return nil, false, errProtocol(msg)
	}
	if len(cmd.Args) == 0 {
		return r.next()
	}
	return cmd.Args, true, nil
}

// reserve makes room for a frame of n bytes from start.
func (r *reader) reserve(n int) {
	if n <= len(r.buf)-r.start {
		return
	}
	nb := make([]byte, max(n, 2*len(r.buf)))
	r.end = copy(nb, r.buf[r.start:r.end])
	r.start = 0
	r.buf = nb
}

// fill reads more bytes, first moving what is left to the front. Any
// arguments returned before are invalid afterwards.
func (r *reader) fill() error {
	if r.start == r.end {
		r.start, r.end = 0, 0
		if len(r.buf) > 1<<20 {
			r.buf = make([]byte, initialReadSpace) // a big frame has gone; so does its buffer
		}
	} else if r.end == len(r.buf) {
		if r.start > 0 {
			r.end = copy(r.buf, r.buf[r.start:r.end])
			r.start = 0
		} else {
			r.reserve(2 * len(r.buf))
		}
	}
	n, err := r.src.Read(r.buf[r.end:])
	r.end += n
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// readLine returns the line up to "\r\n" and the bytes it spans; n is -1
// when the line is not complete yet and -2 when it ends in a bare "\n".
func readLine(b []byte) (line []byte, n int) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return nil, -1
	}
	if i < 1 || b[i-1] != '\r' {
		return nil, -2
	}
	return b[:i-1], i + 1
}

// atoi parses a non-negative decimal (a -1 length is a null, which clients
// never send as an argument: it is malformed here).
func atoi(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 10 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
