package commands

import (
	"github.com/delayd/delayd/engine"
)

// The Redis list commands, answered from a queue's ready list, with Redis's
// reply shapes, so existing list workers need no change.

func cmdLLen(d *Dispatcher, c *Client, args [][]byte) {
	c.W.Int(int64(d.engineFor(c).Len(args[1])))
}

func cmdLRange(d *Dispatcher, c *Client, args [][]byte) {
	start, ok1 := parseInt(args[2])
	stop, ok2 := parseInt(args[3])
	if !ok1 || !ok2 {
		c.W.Error(errNotInteger)
		return
	}
	items := d.engineFor(c).Range(args[1], start, stop)
	c.W.Array(len(items))
	for _, it := range items {
		c.W.Bulk(it)
	}
}

func cmdLPop(d *Dispatcher, c *Client, args [][]byte) { d.listPop(c, args, false) }
func cmdRPop(d *Dispatcher, c *Client, args [][]byte) { d.listPop(c, args, true) }

// listPop is LPOP/RPOP key [count]: without count a bulk (or null), with
// count an array (or a null array when the list is empty), as Redis 7.
func (d *Dispatcher) listPop(c *Client, args [][]byte, right bool) {
	if len(args) > 3 {
		// As Redis: arity -2 lets it in, and the handler counts.
		name := "lpop"
		if right {
			name = "rpop"
		}
		c.W.Error("ERR wrong number of arguments for '" + name + "' command")
		return
	}
	if len(args) == 2 {
		job, ok := d.engineFor(c).ListPopOneAt(args[1], right, &c.pop, c.arrived())
		if !ok {
			c.W.Null()
			return
		}
		c.Ticket = max(c.Ticket, job.Ticket)
		c.W.Bulk(job.Payload)
		return
	}
	count := int64(1)
	if len(args) == 3 {
		n, ok := parseInt(args[2])
		if !ok || n < 0 {
			c.W.Error(errOutOfRange)
			return
		}
		count = n
	}
	jobs, ok := d.engineFor(c).ListPop(args[1], int(min(count, 1<<30)), right)
	for _, j := range jobs {
		c.Ticket = max(c.Ticket, j.Ticket)
	}
	if !ok {
		if count == 0 && d.engineFor(c).Len(args[1]) > 0 {
			c.W.Array(0)
			return
		}
		c.W.NullArray()
		return
	}
	c.W.Array(len(jobs))
	for _, j := range jobs {
		c.W.Bulk(j.Payload)
	}
}

func cmdBLPop(d *Dispatcher, c *Client, args [][]byte) { d.bpop(c, args, engine.PopLeft) }
func cmdBRPop(d *Dispatcher, c *Client, args [][]byte) { d.bpop(c, args, engine.PopRight) }

func (d *Dispatcher) bpop(c *Client, args [][]byte, mode engine.PopMode) {
	timeout, msg := parseTimeout(args[len(args)-1])
	if msg != "" {
		c.W.Error(msg)
		return
	}
	d.blockingPop(c, args[1:len(args)-1], timeout, mode)
}

func cmdRPush(d *Dispatcher, c *Client, args [][]byte) { d.push(c, args, false) }
func cmdLPush(d *Dispatcher, c *Client, args [][]byte) { d.push(c, args, true) }

func (d *Dispatcher) push(c *Client, args [][]byte, head bool) {
	n, ticket, err := d.engineFor(c).PushAt(args[1], args[2:], head, c.arrived())
	if err != nil {
		d.replyErr(c, err)
		return
	}
	c.Ticket = ticket
	c.W.Int(int64(n))
}

func cmdDel(d *Dispatcher, c *Client, args [][]byte) {
	n, ticket, err := d.engineFor(c).Del(args[1:])
	if err != nil {
		d.replyErr(c, err)
		return
	}
	c.Ticket = ticket
	c.W.Int(int64(n))
}

func cmdExists(d *Dispatcher, c *Client, args [][]byte) {
	c.W.Int(int64(d.engineFor(c).ExistsCount(args[1:])))
}

func cmdType(d *Dispatcher, c *Client, args [][]byte) {
	if d.engineFor(c).ExistsCount(args[1:2]) > 0 {
		c.W.Status("list")
		return
	}
	c.W.Status("none")
}
