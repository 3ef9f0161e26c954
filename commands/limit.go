package commands

import (
	"strconv"

	"github.com/delayd/delayd/engine"
)

// cmdLimit is DELAY.LIMIT key [CONCURRENCY n] [RATE n per-ms]
// [GROUPCONCURRENCY n] | OFF. With options it sets the queue's whole limit
// (an option left out is no limit of that kind) and replies OK; OFF removes
// it; with neither it replies the limit as field/value pairs, or nil when
// the queue has none.
var limitSpecs = []optSpec{{"CONCURRENCY", 1}, {"RATE", 2}, {"GROUPCONCURRENCY", 1}, {"OFF", 0}}

// maxLimit is the bound of each of DELAY.LIMIT's numbers, for its errors.
var maxLimit = strconv.FormatInt(engine.MaxLimit, 10)

func cmdLimit(d *Dispatcher, c *Client, args [][]byte) {
	if len(args) == 2 {
		limitReply(c, d.engineFor(c), args[1])
		return
	}
	var s engine.LimitSpec
	off := false
	msg := scanOptions(args[2:], limitSpecs, func(name string, v [][]byte) string {
		var ok bool
		switch name {
		case "OFF":
			off = true
		case "CONCURRENCY":
			s.Concurrency, ok = intIn(v[0], 1, engine.MaxLimit)
		case "GROUPCONCURRENCY":
			s.GroupConcurrency, ok = intIn(v[0], 1, engine.MaxLimit)
		case "RATE":
			if s.Rate, ok = intIn(v[0], 1, engine.MaxLimit); ok {
				s.Per, ok = intIn(v[1], 1, engine.MaxLimit)
			}
		}
		switch {
		case ok || name == "OFF":
		case name == "RATE":
			return "ERR RATE's n and per-ms must be integers from 1 to " + maxLimit
		default:
			return "ERR " + name + " must be an integer from 1 to " + maxLimit
		}
		return ""
	})
	if msg == "" && off && len(args) > 3 {
		msg = "ERR syntax error: OFF takes no other option"
	}
	if msg != "" {
		c.W.Error(msg)
		return
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
