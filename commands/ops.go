package commands

import "bytes"

// Operating queues: the commands the dashboard's screens and buttons are
// views of (DELAY.UPCOMING, DELAY.REQUEUE, DELAY.PAUSE, DELAY.RESUME).

// maxUpcoming bounds DELAY.UPCOMING's count: a screenful, not a dump (the
// walk holds the engine's lock).
const (
	defaultUpcoming = 10
	maxUpcoming     = 1000
	errUpcomingCnt  = "ERR count must be an integer from 1 to 1000"
)

// cmdUpcoming is DELAY.UPCOMING key [count]: the next count (default 10,
// at most 1000) delayed jobs in the order they will become ready, each as
// [id, due, payload]; an empty array when there are none.
func cmdUpcoming(d *Dispatcher, c *Client, args [][]byte) {
	count, ok := listCount(c, args)
	if !ok {
		return
	}
	jobs := d.engineFor(c).Upcoming(args[1], count)
	c.W.Array(len(jobs))
	for _, j := range jobs {
		c.W.Array(3)
		c.W.Bulk(j.ID)
		c.W.Int(j.Due)
		c.W.Bulk(j.Payload)
	}
}

// listCount parses the optional count of DELAY.UPCOMING and DELAY.RESERVED.
func listCount(c *Client, args [][]byte) (int, bool) {
	if len(args) > 3 {
		c.W.Error(errUnknownOption(args[3]))
		return 0, false
	}
	if len(args) < 3 {
		return defaultUpcoming, true
	}
	n, ok := parseInt(args[2])
	if !ok {
		c.W.Error(errNotInteger)
		return 0, false
	}
	if n < 1 || n > maxUpcoming {
		c.W.Error(errUpcomingCnt)
		return 0, false
	}
	return int(n), true
}

// cmdReserved is DELAY.RESERVED key [count]: the queue's reserved jobs,
// the first to expire first, each [id, ack-deadline, deliveries, payload],
// so an operator sees what workers hold and until when.
func cmdReserved(d *Dispatcher, c *Client, args [][]byte) {
	count, ok := listCount(c, args)
	if !ok {
		return
	}
	jobs := d.engineFor(c).Reserved(args[1], count)
	c.W.Array(len(jobs))
	for _, j := range jobs {
		c.W.Array(4)
		c.W.Bulk(j.ID)
		c.W.Int(j.AckDeadline)
		c.W.Int(int64(j.Deliveries))
		c.W.Bulk(j.Payload)
	}
}

// cmdRequeue is DELAY.REQUEUE key id|ALL [to-key]: ready jobs of key (a
// dead-letter queue) back to the queue they were dead-lettered from, with
// the options they had there, or to to-key. Replies how many moved.
func cmdRequeue(d *Dispatcher, c *Client, args [][]byte) {
	if len(args) > 4 {
		c.W.Error(errUnknownOption(args[4]))
		return
	}
	id := args[2]
	switch {
	case len(id) == 0:
		c.W.Int(0) // no job has an empty id (and nil means ALL below)
		return
	case bytes.EqualFold(id, []byte("ALL")):
		id = nil
	}
	var to []byte
	if len(args) == 4 {
		to = append([]byte{}, args[3]...) // not nil: an empty name is a name
	}
	n, ticket, err := d.engineFor(c).RequeueDead(args[1], id, to)
	if err != nil {
		d.replyErr(c, err)
		return
	}
	c.Ticket = ticket
	c.W.Int(int64(n))
}

// cmdPause is DELAY.PAUSE key, cmdResume DELAY.RESUME key. Both reply OK,
// whatever the state was, as CLIENT PAUSE and CLIENT UNPAUSE do.
func cmdPause(d *Dispatcher, c *Client, args [][]byte)  { setPaused(d, c, args[1], true) }
func cmdResume(d *Dispatcher, c *Client, args [][]byte) { setPaused(d, c, args[1], false) }

func setPaused(d *Dispatcher, c *Client, name []byte, paused bool) {
	ticket, err := d.engineFor(c).SetPaused(name, paused)
	if err != nil {
		d.replyErr(c, err)
		return
	}
	c.Ticket = ticket
	c.W.Status("OK")
}

// boolCount is a flag as DELAY.STATS shows it: 1 or 0.
func boolCount(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
