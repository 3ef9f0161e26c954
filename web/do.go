package web

import (
	"context"
	"errors"

	"github.com/delayd/delayd/commands"
)

// Do runs one command through the command table, as a RESP client's would
// run (same handlers, same errors, same log), and returns its reply as Go
// values: a status as Status, an error reply as *ReplyError, an integer as
// int64, a bulk string as []byte, a null as nil, an array as []any, a map
// as Map (its pairs in order), verbatim text as string. A write returns
// once the log holds it, as its RESP reply would. Blocking commands are
// refused: a page must never wait on a queue.
func (s *Server) Do(ctx context.Context, args ...string) (any, error) {
	if len(args) == 0 {
		return nil, errors.New("no command")
	}
	d := s.opts.Dispatcher
	b := &builder{proto: 3}
	c := d.Connect(b, commands.ConnInfo{Addr: "http", FD: -1})
	defer d.CloseClient(c)
	// The HTTP request was authenticated (auth) as this user, or needed
	// no authentication (the default user); its commands pass the same
	// ACL check as the user's RESP commands.
	if user, _ := ctx.Value(userKey{}).(string); user != "" {
		if !d.SetUser(c, user) {
			return nil, &ReplyError{Msg: "WRONGPASS invalid username-password pair or user is disabled."}
		}
	}
	c.Authed = true
	if readOnly, _ := ctx.Value(readOnlyKey{}).(bool); readOnly {
		c.SetReadOnly(true)
	}
	argv := make([][]byte, len(args))
	for i, a := range args {
		argv[i] = []byte(a)
	}
	d.Exec(c, argv)
	if c.Block != nil {
		// Never reached for the commands the dashboard sends; resolve it
		// rather than leave a waiter parked.
		c.Block.Gone()
		return nil, errors.New("blocking commands are not served over HTTP")
	}
	if err := d.Durable(c.Ticket); err != nil {
		return nil, &ReplyError{Msg: commands.ErrorLine(err)}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(b.done) == 0 {
		return nil, errors.New("no reply")
	}
	if e, ok := b.done[0].(*ReplyError); ok {
		return nil, e
	}
	return b.done[0], nil
}

// readOnlyKey marks a request context whose commands run as after
// READONLY (WithReadOnly).
type readOnlyKey struct{}

// WithReadOnly makes Do's reads served by this node even when it is a
// cluster follower (READONLY), on its copy of the leader's data, rather
// than answered with MOVED.
func WithReadOnly(ctx context.Context) context.Context {
	return context.WithValue(ctx, readOnlyKey{}, true)
}

// Status is a simple string reply (+OK).
type Status string

// Map is a map reply, its field/value pairs in the order sent.
type Map []any

// ReplyError is an error reply, the whole line after '-'.
type ReplyError struct{ Msg string }

func (e *ReplyError) Error() string { return e.Msg }

// builder is a commands.Writer that builds Go values instead of bytes.
type builder struct {
	proto int
	done  []any
	stack []*frame
}

type frame struct {
	items []any
	want  int // items still expected
	isMap bool
}

func (b *builder) put(v any) {
	for {
		if len(b.stack) == 0 {
			b.done = append(b.done, v)
			return
		}
		f := b.stack[len(b.stack)-1]
		f.items = append(f.items, v)
		f.want--
		if f.want > 0 {
			return
		}
		b.stack = b.stack[:len(b.stack)-1]
		if f.isMap {
			v = Map(f.items)
		} else {
			v = f.items
		}
	}
}

func (b *builder) open(n int, isMap bool) {
	if n <= 0 {
		if isMap {
			b.put(Map{})
		} else {
			b.put([]any{})
		}
		return
	}
	want := n
	if isMap {
		want = 2 * n
	}
	b.stack = append(b.stack, &frame{items: make([]any, 0, want), want: want, isMap: isMap})
}

func (b *builder) Status(s string)     { b.put(Status(s)) }
func (b *builder) Error(s string)      { b.put(&ReplyError{Msg: s}) }
func (b *builder) Int(n int64)         { b.put(n) }
func (b *builder) Bulk(p []byte)       { b.put(append([]byte(nil), p...)) }
func (b *builder) BulkString(s string) { b.put([]byte(s)) }
func (b *builder) Null()               { b.put(nil) }
func (b *builder) NullArray()          { b.put(nil) }
func (b *builder) Array(n int)         { b.open(n, false) }
func (b *builder) Map(n int)           { b.open(n, true) }
func (b *builder) Verbatim(s string)   { b.put(s) }
func (b *builder) Push(n int)          { b.open(n, false) }
func (b *builder) Proto() int          { return b.proto }
func (b *builder) SetProto(p int)      { b.proto = p }
