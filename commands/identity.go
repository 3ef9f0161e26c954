package commands

import (
	"errors"

	"github.com/delayd/delayd/engine"
)

// Jobs by id and in batches: DELAY.RESCHEDULE, DELAY.RESCHEDULEAT,
// DELAY.PROMOTE, DELAY.MPOP. (UNIQUE and DEBOUNCE are options of DELAY.ADD,
// parsed in delay.go.)

func cmdReschedule(d *Dispatcher, c *Client, args [][]byte) {
	delay, ok := parseInt(args[3])
	if !ok || delay < 0 || delay > maxTime {
		c.W.Error(errNotInteger)
		return
	}
	ok, ticket, err := d.engineFor(c).Reschedule(engine.RescheduleArgs{Queue: args[1], ID: args[2], Delay: delay})
	d.replyBool(c, ok, ticket, err)
}

func cmdRescheduleAt(d *Dispatcher, c *Client, args [][]byte) {
	at, ok := parseInt(args[3])
	if !ok || at < 0 {
		c.W.Error(errNotInteger)
		return
	}
	ok, ticket, err := d.engineFor(c).Reschedule(engine.RescheduleArgs{Queue: args[1], ID: args[2], At: true, Due: at})
	d.replyBool(c, ok, ticket, err)
}

func cmdPromote(d *Dispatcher, c *Client, args [][]byte) {
	n, ticket, err := d.engineFor(c).Promote(args[1], args[2:])
	if err != nil {
		d.replyErr(c, err)
		return
	}
	c.Ticket = ticket
	c.W.Int(int64(n))
}

// Redis's BLMPOP wording for its two counts.
const (
	errNumKeys = "ERR numkeys should be greater than 0"
	errCount   = "ERR count should be greater than 0"
)

// maxMPop bounds the jobs one DELAY.MPOP takes (Redis takes any long; a
// reply this large is already unreasonable).
const maxMPop = 1 << 30

// cmdMPop is DELAY.MPOP timeout numkeys key [key ...] [COUNT n], parsed in
// BLMPOP's order with its errors: the timeout first, then numkeys (not a
// positive integer: its own error), keys that are not all there (a syntax
// error), then COUNT (once; more is a syntax error that names it).
func cmdMPop(d *Dispatcher, c *Client, args [][]byte) {
	timeout, msg := parseTimeout(args[1])
	if msg != "" {
		c.W.Error(msg)
		return
	}
	numkeys, ok := parseInt(args[2])
	if !ok || numkeys <= 0 {
		c.W.Error(errNumKeys)
		return
	}
	if numkeys > int64(len(args)-3) {
		c.W.Error("ERR syntax error: numkeys is more than the keys given")
		return
	}
	keys := args[3 : 3+numkeys]
	count := int64(1)
	msg = scanOptions(args[3+numkeys:], []optSpec{{"COUNT", 1}}, func(_ string, v [][]byte) string {
		n, ok := parseInt(v[0])
		if !ok || n <= 0 {
			return errCount
		}
		count = n
		return ""
	})
	if msg != "" {
		c.W.Error(msg)
		return
	}
	jobs, w, err := d.engineFor(c).MPopOrWait(keys, int(min(count, maxMPop)))
	switch {
	case errors.Is(err, engine.ErrNotLeader):
		c.W.Error(d.notLeader(c.slot))
	case err != nil:
		// Inside MULTI (it does not block there), or shutting down.
		c.W.NullArray()
	case w == nil:
		c.Ticket = jobs[len(jobs)-1].Ticket // the last pop's record follows all the others
		writeJobs(c.W, jobs)
	default:
		c.Block = newBlock(c, d.engineFor(c), w, timeout, engine.PopDelay)
		c.Block.many = true
	}
}

// writeJobs writes jobs taken from one queue as DELAY.MPOP replies:
// [key, [[id, payload], ...]].
func writeJobs(w Writer, jobs []engine.Delivery) {
	w.Array(2)
	w.Bulk(jobs[0].Queue)
	w.Array(len(jobs))
	for _, j := range jobs {
		w.Array(2)
		w.Bulk(j.ID)
		w.Bulk(j.Payload)
	}
}

// mpopKeys finds DELAY.MPOP's keys, which follow numkeys (argument 2), as
// Redis finds BLMPOP's (movable keys: COMMAND INFO says first, last and
// step 0). A numkeys that is not a positive integer gives no keys; keys
// that are not all there give those that are.
func mpopKeys(args [][]byte) [][]byte {
	if len(args) < 3 {
		return nil
	}
	n, ok := parseInt(args[2])
	if !ok || n <= 0 {
		return nil
	}
	return args[3:min(3+int(min(n, maxMPop)), len(args))]
}
