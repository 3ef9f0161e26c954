package commands

import (
	"bytes"

	"github.com/delayd/delayd/engine"
)

// cmdLimit is DELAY.LIMIT key [CONCURRENCY n] [RATE n per-ms]
// [GROUPCONCURRENCY n] | OFF. With options it sets the queue's whole limit
// (an option left out is no limit of that kind) and replies OK; OFF removes
// it; with neither it replies the limit as field/value pairs, or nil when
// the queue has none.
func cmdLimit(d *Dispatcher, c *Client, args [][]byte) {
	if len(args) == 2 {
		limitReply(c, d.engineFor(c), args[1])
		return
	}
	var s engine.LimitSpec
	if len(args) == 3 && bytes.EqualFold(args[2], []byte("OFF")) {
		// the zero spec
	} else {
		positive := func(b []byte) (int64, bool) {
			n, ok := parseInt(b)
			if !ok || n > engine.MaxLimit {
				c.W.Error(errNotInteger)
				return 0, false
			}
			if n <= 0 {
				c.W.Error(errOutOfRange)
				return 0, false
			}
			return n, true
		}
		for i := 2; i < len(args); i++ {
			opt := args[i]
			var ok bool
			switch {
			case bytes.EqualFold(opt, []byte("CONCURRENCY")) && i+1 < len(args):
				i++
				s.Concurrency, ok = positive(args[i])
			case bytes.EqualFold(opt, []byte("GROUPCONCURRENCY")) && i+1 < len(args):
				i++
				s.GroupConcurrency, ok = positive(args[i])
			case bytes.EqualFold(opt, []byte("RATE")) && i+2 < len(args):
				if s.Rate, ok = positive(args[i+1]); ok {
					s.Per, ok = positive(args[i+2])
				}
				i += 2
			default:
				c.W.Error(errSyntax)
				return
			}
			if !ok {
				return
			}
		}
	}
	ticket, err := d.engineFor(c).SetLimit(args[1], s)
	if err != nil {
		d.replyErr(c, err)
		return
	}
	c.Ticket = ticket
	c.W.Status("OK")
}

func limitReply(c *Client, e *engine.Engine, name []byte) {
	l, ok := e.Limit(name)
	if !ok {
		c.W.Null()
		return
	}
	fields := []struct {
		name string
		n    int64
	}{
		{"concurrency", l.Concurrency}, {"rate", l.Rate}, {"per_ms", l.Per},
		{"group_concurrency", l.GroupConcurrency}, {"reserved", int64(l.Reserved)}, {"tokens", l.Tokens},
	}
	c.W.Map(len(fields))
	for _, f := range fields {
		c.W.BulkString(f.name)
		c.W.Int(f.n)
	}
}
