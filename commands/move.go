package commands

import (
	"errors"
	"strings"

	"github.com/delayd/delayd/engine"
)

// The reliable-list commands: LMOVE, BLMOVE, RPOPLPUSH and BRPOPLPUSH move a
// ready job to another queue's ready list (one log record; the job keeps its
// id and payload), LREM removes ready jobs by payload. A list worker parks a
// job in its own processing queue with BLMOVE, works, then LREMs it.

// parseEnd reads LEFT or RIGHT.
func parseEnd(b []byte) (right bool, ok bool) {
	switch {
	case strings.EqualFold(string(b), "left"):
		return false, true
	case strings.EqualFold(string(b), "right"):
		return true, true
	}
	return false, false
}

func moveEnds(from, to []byte) (engine.MoveEnds, bool) {
	fr, ok1 := parseEnd(from)
	tr, ok2 := parseEnd(to)
	return engine.MoveEnds{FromRight: fr, ToRight: tr}, ok1 && ok2
}

// cmdLMove is LMOVE source destination LEFT|RIGHT LEFT|RIGHT.
func cmdLMove(d *Dispatcher, c *Client, args [][]byte) {
	ends, ok := moveEnds(args[3], args[4])
	if !ok {
		c.W.Error(errSyntax)
		return
	}
	d.move(c, args[1], args[2], ends)
}

// cmdRPopLPush is RPOPLPUSH source destination: LMOVE ... RIGHT LEFT.
func cmdRPopLPush(d *Dispatcher, c *Client, args [][]byte) {
	d.move(c, args[1], args[2], engine.MoveEnds{FromRight: true})
}

func (d *Dispatcher) move(c *Client, src, dst []byte, ends engine.MoveEnds) {
	job, ok, err := d.engineFor(c).Move(src, dst, ends)
	switch {
	case err != nil:
		d.replyErr(c, err)
	case !ok:
		c.W.Null()
	default:
		c.Ticket = job.Ticket
		c.W.Bulk(job.Payload)
	}
}

// cmdBLMove is BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout.
func cmdBLMove(d *Dispatcher, c *Client, args [][]byte) {
	ends, ok := moveEnds(args[3], args[4])
	if !ok {
		c.W.Error(errSyntax)
		return
	}
	d.blockingMove(c, args[1], args[2], ends, args[5])
}

// cmdBRPopLPush is BRPOPLPUSH source destination timeout.
func cmdBRPopLPush(d *Dispatcher, c *Client, args [][]byte) {
	d.blockingMove(c, args[1], args[2], engine.MoveEnds{FromRight: true}, args[3])
}

// blockingMove moves now, or parks the client in source's FIFO of waiters
// (with BLPOP's and DELAY.POP's); on timeout the reply is a null array, as
// Redis's.
func (d *Dispatcher) blockingMove(c *Client, src, dst []byte, ends engine.MoveEnds, timeoutArg []byte) {
	timeout, msg := parseTimeout(timeoutArg)
	if msg != "" {
		c.W.Error(msg)
		return
	}
	job, w, err := d.engineFor(c).MoveOrWait(src, dst, ends)
	switch {
	case errors.Is(err, engine.ErrClosed): // shutting down: as a blocked pop
		c.W.NullArray()
	case errors.Is(err, engine.ErrInTransaction): // inside EXEC: LMOVE's empty reply
		c.W.Null()
	case err != nil:
		d.replyErr(c, err)
	case w == nil:
		c.Ticket = job.Ticket
		c.W.Bulk(job.Payload)
	default:
		c.Block = newBlock(c, d.engineFor(c), w, timeout, engine.PopLeft)
		c.Block.move = true // the reply is the payload
	}
}

// cmdLRem is LREM key count element.
func cmdLRem(d *Dispatcher, c *Client, args [][]byte) {
	count, ok := parseInt(args[2])
	if !ok {
		c.W.Error(errNotInteger)
		return
	}
	n, ticket, err := d.engineFor(c).Rem(args[1], count, args[3])
	if err != nil {
		d.replyErr(c, err)
		return
	}
	c.Ticket = ticket
	c.W.Int(int64(n))
}
