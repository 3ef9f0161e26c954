package commands

import (
	"bytes"
	"strings"

	"github.com/delayd/delayd/engine"
)

// Transactions, as Redis's multi.c: after MULTI every command is checked as
// usual (unknown command, arity, auth, a command that cannot be queued) and,
// if it passes, queued and answered QUEUED; a refusal makes EXEC abort. EXEC
// runs the queue under one hold of the engine (engine.Atomic), so no other
// client's command and no timer runs in between, and the log holds the
// whole transaction as one unit; its reply, the array of each command's
// reply, leaves once that unit is durable. WATCH takes a queue's version
// (engine.Watch); EXEC replies a null array, running nothing, if any watched
// queue changed since.
//
// Commands flagged NoQueue (MULTI, EXEC, DISCARD, WATCH, QUIT) run at once
// even inside MULTI, as Redis runs them; commands flagged NoMulti are refused
// inside MULTI. Nothing queued ever runs outside its EXEC: DISCARD, QUIT and
// a connection that closes drop the queue.

// txState is one connection's MULTI and WATCH state. Only the connection's
// goroutine touches it.
type txState struct {
	multi   bool
	dirty   bool // a command was refused while queuing: EXEC aborts
	queued  []queuedCmd
	watched []watchedKey
	// eng is the engine held for the whole EXEC, while it runs; engineFor
	// returns it, so the queued commands run inside the transaction.
	eng *engine.Engine
}

type queuedCmd struct {
	cmd  *Command
	args [][]byte
}

type watchedKey struct {
	name    []byte
	version uint64
}

const (
	errExecAbort  = "EXECABORT Transaction discarded because of previous errors."
	errNotInMulti = "ERR Command not allowed inside a transaction"
)

// reject answers a command (nil if unknown) refused before it ran (arity,
// auth, not allowed in MULTI, ...). Inside MULTI the refusal dooms the EXEC;
// a refused EXEC ends the transaction at once, saying why, as Redis's
// execCommandAbort does.
func (d *Dispatcher) reject(c *Client, cmd *Command, msg string) {
	defer d.rejected(c, cmd)
	if !c.tx.multi {
		c.W.Error(msg)
		return
	}
	if cmd != nil && cmd.Name == "exec" {
		d.discardTx(c)
		c.W.Error("EXECABORT Transaction discarded because of: " + strings.TrimPrefix(msg, "ERR "))
		return
	}
	c.tx.dirty = true
	c.W.Error(msg)
}

// queue answers a command sent inside MULTI: QUEUED, keeping a copy of its
// arguments (the reader reuses its buffer), or a refusal.
func (d *Dispatcher) queue(c *Client, cmd *Command, args [][]byte) {
	if cmd.Flags&NoMulti != 0 {
		d.reject(c, cmd, errNotInMulti)
		return
	}
	c.tx.queued = append(c.tx.queued, queuedCmd{cmd, ownArgs(args)})
	c.W.Status("QUEUED")
}

// ownArgs copies arguments out of the reader's buffer, which the next
// command reuses, into one allocation.
func ownArgs(args [][]byte) [][]byte {
	n := 0
	for _, a := range args {
		n += len(a)
	}
	buf := make([]byte, 0, n)
	own := make([][]byte, len(args))
	for i, a := range args {
		buf = append(buf, a...)
		own[i] = buf[len(buf)-len(a):]
	}
	return own
}

// unwatchAll drops every WATCH of the connection.
func (d *Dispatcher) unwatchAll(c *Client) {
	if len(c.tx.watched) == 0 {
		return
	}
	eng := d.engineFor(c)
	for _, w := range c.tx.watched {
		eng.Unwatch(w.name)
	}
	c.tx.watched = c.tx.watched[:0]
}

// endTx drops the connection's transaction and watches: it closed.
func (d *Dispatcher) endTx(c *Client) {
	d.unwatchAll(c)
	c.tx = txState{}
}

func cmdMulti(d *Dispatcher, c *Client, args [][]byte) {
	if c.tx.multi {
		c.W.Error("ERR MULTI calls can not be nested")
		return
	}
	c.tx.multi = true
	c.W.Status("OK")
}

func cmdDiscard(d *Dispatcher, c *Client, args [][]byte) {
	if !c.tx.multi {
		c.W.Error("ERR DISCARD without MULTI")
		return
	}
	d.discardTx(c)
	c.W.Status("OK")
}

// discardTx ends the transaction: its queue and every WATCH are dropped.
func (d *Dispatcher) discardTx(c *Client) {
	c.tx.multi, c.tx.dirty, c.tx.queued = false, false, nil
	d.unwatchAll(c)
}

func cmdWatch(d *Dispatcher, c *Client, args [][]byte) {
	if c.tx.multi {
		c.W.Error("ERR WATCH inside MULTI is not allowed")
		return
	}
	eng := d.engineFor(c)
next:
	for _, name := range args[1:] {
		for _, w := range c.tx.watched {
			if bytes.Equal(w.name, name) {
				continue next // already watched: keep the first version
			}
		}
		name = bytes.Clone(name)
		c.tx.watched = append(c.tx.watched, watchedKey{name, eng.Watch(name)})
	}
	c.W.Status("OK")
}

func cmdUnwatch(d *Dispatcher, c *Client, args [][]byte) {
	d.unwatchAll(c)
	c.W.Status("OK")
}

func cmdExec(d *Dispatcher, c *Client, args [][]byte) {
	t := &c.tx
	if !t.multi {
		c.W.Error("ERR EXEC without MULTI")
		return
	}
	queued, dirty := t.queued, t.dirty
	t.multi, t.dirty, t.queued = false, false, nil
	if dirty {
		d.unwatchAll(c)
		c.W.Error(errExecAbort)
		return
	}
	changed := false
	ticket, err := d.engineFor(c).Atomic(func(tx *engine.Engine) {
		// Checked under the same hold that runs the commands: nothing can
		// change a watched queue between the check and the run.
		for _, w := range t.watched {
			changed = changed || tx.Version(w.name) != w.version
			tx.Unwatch(w.name)
		}
		t.watched = t.watched[:0]
		if changed {
			return
		}
		t.eng = tx
		defer func() { t.eng = nil }()
		c.W.Array(len(queued))
		for _, q := range queued {
			// Checked again, as Redis does: the user may have changed
			// since the command was queued.
			if msg := d.denied(c, q.cmd, q.args); msg != "" {
				c.W.Error(msg)
				d.rejected(c, q.cmd)
				continue
			}
			c.setLast(q.cmd, q.args)
			start := d.beforeExec(c, q.cmd, q.args) // tracking, SLOWLOG, MONITOR
			q.cmd.Handler(d, c, q.args)
			d.afterExec(c, q.cmd, q.args, start)
			if b := c.Block; b != nil {
				// A blocking command acts as its non-blocking form: had it
				// found a job it would have taken it, so the answer is the
				// timeout's. (The engine's pops do not park inside a
				// transaction; this covers any command that would.)
				c.Block = nil
				tx.CancelWait(b.w)
				c.W.NullArray()
			}
		}
	})
	switch {
	case err != nil:
		d.replyErr(c, err)
	case changed:
		c.W.NullArray()
	default:
		// The whole reply waits for the unit, which holds every write.
		c.Ticket = ticket
	}
}
