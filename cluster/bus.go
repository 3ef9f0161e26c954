package cluster

// The bus's own framing of AppendEntries (docs/decisions/bus-framing.md).
//
// hashicorp/raft's NetworkTransport encodes every RPC with msgpack, by
// reflection over the request's structs: on a follower under load,
// decoding AppendEntries took more CPU than writing the entries to its
// log. A connection whose first byte is frameMagic carries instead only
// AppendEntries and their replies, each a frame of uvarints and
// length-prefixed bytes, the entries' data left in the frame it arrived
// in. Every other RPC (votes, snapshots, TimeoutNow), and AppendEntries
// while the group's version is below 3 (a member may be a 0.2.0 node,
// which knows only msgpack), keeps NetworkTransport's connections. Both
// share the bus's listener: NetworkTransport's first byte is an RPC type,
// 0 to 4, never frameMagic.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

const (
	frameMagic  byte = 0xD1 // the first byte of a connection of frames
	frameAppend byte = 1    // a frame's kind: AppendEntries, or its reply
	// frameKeep is the largest scratch buffer a pooled connection keeps
	// between RPCs: one catching up a follower need not hold its largest
	// frame forever.
	frameKeep = 1 << 20
	// busFramingSince is the format version from which a leader frames
	// AppendEntries: every member then reads them.
	busFramingSince = 3
)

// frameMax is the longest frame: a reader refuses a longer length before
// allocating it, and a leader sends an AppendEntries that would not fit
// (256 entries of the largest batches) in msgpack instead. A variable for
// tests.
var frameMax uint64 = 1 << 32

var (
	errBadFrame      = errors.New("cluster bus: malformed frame")
	errFrameTooLarge = errors.New("cluster bus: AppendEntries longer than a frame")
)

// appendEntriesFrame appends a's frame body.
func appendEntriesFrame(b []byte, a *raft.AppendEntriesRequest) []byte {
	b = append(b, frameAppend)
	b = binary.AppendUvarint(b, uint64(a.ProtocolVersion))
	b = appendBytes(b, a.ID)
	b = appendBytes(b, a.Addr)
	b = binary.AppendUvarint(b, a.Term)
	b = appendBytes(b, a.Leader)
	b = binary.AppendUvarint(b, a.PrevLogEntry)
	b = binary.AppendUvarint(b, a.PrevLogTerm)
	b = binary.AppendUvarint(b, a.LeaderCommitIndex)
	b = binary.AppendUvarint(b, uint64(len(a.Entries)))
	for _, l := range a.Entries {
		b = binary.AppendUvarint(b, l.Index)
		b = binary.AppendUvarint(b, l.Term)
		b = binary.AppendUvarint(b, uint64(l.Type))
		b = appendBytes(b, l.Data)
		b = appendBytes(b, l.Extensions)
		b = binary.AppendVarint(b, unixNano(l.AppendedAt))
	}
	return b
}

// decodeEntriesFrame decodes a frame body appendEntriesFrame wrote. The
// entries' Data and Extensions are slices of body, which the caller hands
// over: Raft keeps them (its log cache), so body is never reused.
func decodeEntriesFrame(body []byte) (*raft.AppendEntriesRequest, error) {
	d := frameDecoder{b: body}
	if d.byte() != frameAppend {
		return nil, errBadFrame
	}
	a := &raft.AppendEntriesRequest{}
	a.ProtocolVersion = raft.ProtocolVersion(d.uvarint())
	a.ID = d.bytes()
	a.Addr = d.bytes()
	a.Term = d.uvarint()
	a.Leader = d.bytes()
	a.PrevLogEntry = d.uvarint()
	a.PrevLogTerm = d.uvarint()
	a.LeaderCommitIndex = d.uvarint()
	n := d.uvarint()
	// Every entry takes 6 bytes or more: a count past that is damage, not
	// an allocation to make.
	if d.err != nil || n > uint64(len(d.b))/6 {
		return nil, errBadFrame
	}
	if n > 0 {
		logs := make([]raft.Log, n) // one allocation for the batch's entries
		a.Entries = make([]*raft.Log, n)
		for i := range logs {
			l := &logs[i]
			l.Index = d.uvarint()
			l.Term = d.uvarint()
			t := d.uvarint()
			if t > 255 {
				return nil, errBadFrame
			}
			l.Type = raft.LogType(t)
			l.Data = d.bytes()
			l.Extensions = d.bytes()
			if ns := d.varint(); ns != 0 {
				l.AppendedAt = time.Unix(0, ns)
			}
			a.Entries[i] = l
		}
	}
	if d.err != nil || len(d.b) != 0 {
		return nil, errBadFrame
	}
	return a, nil
}

// appendReplyFrame appends the frame body of a reply: Raft's error text
// ("" for none) and its response (nil: the zero one).
func appendReplyFrame(b []byte, errText string, r *raft.AppendEntriesResponse) []byte {
	if r == nil {
		r = &raft.AppendEntriesResponse{}
	}
	b = append(b, frameAppend)
	b = binary.AppendUvarint(b, uint64(len(errText)))
	b = append(b, errText...)
	b = binary.AppendUvarint(b, uint64(r.ProtocolVersion))
	b = appendBytes(b, r.ID)
	b = appendBytes(b, r.Addr)
	b = binary.AppendUvarint(b, r.Term)
	b = binary.AppendUvarint(b, r.LastLog)
	var flags byte
	if r.Success {
		flags |= 1
	}
	if r.NoRetryBackoff {
		flags |= 2
	}
	return append(b, flags)
}

// decodeReplyFrame decodes a reply into r and returns its error text. r's
// byte fields are copies: body is the connection's scratch.
func decodeReplyFrame(body []byte, r *raft.AppendEntriesResponse) (string, error) {
	d := frameDecoder{b: body}
	if d.byte() != frameAppend {
		return "", errBadFrame
	}
	errText := string(d.bytes())
	r.ProtocolVersion = raft.ProtocolVersion(d.uvarint())
	r.ID = bytes.Clone(d.bytes())
	r.Addr = bytes.Clone(d.bytes())
	r.Term = d.uvarint()
	r.LastLog = d.uvarint()
	flags := d.byte()
	r.Success = flags&1 != 0
	r.NoRetryBackoff = flags&2 != 0
	if d.err != nil || len(d.b) != 0 || flags > 3 {
		return "", errBadFrame
	}
	return errText, nil
}

func appendBytes(b, p []byte) []byte {
	return append(binary.AppendUvarint(b, uint64(len(p))), p...)
}

// unixNano is t in Unix nanoseconds, 0 for the zero time (which has none).
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// frameDecoder reads a frame body; the first error sticks.
type frameDecoder struct {
	b   []byte
	err error
}

func (d *frameDecoder) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.err = errBadFrame
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *frameDecoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errBadFrame
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *frameDecoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errBadFrame
		return 0
	}
	d.b = d.b[n:]
	return v
}

// bytes returns the next length-prefixed bytes, nil when empty, capped so
// that an append to them never writes over what follows in the frame.
func (d *frameDecoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = errBadFrame
		return nil
	}
	if n == 0 {
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

// readFrame reads one frame's body into buf (grown if short), or a new
// buffer when buf is nil.
func readFrame(r *bufio.Reader, buf []byte) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	if n == 0 || n > frameMax {
		return nil, fmt.Errorf("%w: length %d", errBadFrame, n)
	}
	if uint64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}

// writeFrame writes body as a frame and flushes.
func writeFrame(w *bufio.Writer, body []byte) error {
	var n [binary.MaxVarintLen64]byte
	if _, err := w.Write(n[:binary.PutUvarint(n[:], uint64(len(body)))]); err != nil {
		return err
	}
	if _, err := w.Write(body); err != nil {
		return err
	}
	return w.Flush()
}

// frameConn is a leader's connection of frames to one follower, pooled
// between RPCs.
type frameConn struct {
	conn net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
	buf  []byte // the request's body, then the reply's
	// answered: a reply came on it (a peer that reads frames).
	answered bool
}

// heartbeat says whether a is a heartbeat, by NetworkTransport's rule:
// Raft's heartbeat handler answers it without waiting for the main loop.
func heartbeat(a *raft.AppendEntriesRequest) bool {
	addr := a.Addr
	if len(addr) == 0 {
		addr = a.Leader
	}
	return a.Term != 0 && addr != nil && a.PrevLogEntry == 0 && a.PrevLogTerm == 0 &&
		len(a.Entries) == 0 && a.LeaderCommitIndex == 0
}
