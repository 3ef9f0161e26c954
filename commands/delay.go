package commands

import (
	"bytes"
	"errors"
	"time"

	"github.com/delayd/delayd/engine"
)

// maxTime bounds relative delays (ms), about 146 million years, so now plus
// a delay never overflows, as Redis refuses an EXPIRE that would. An
// absolute DELAY.ADDAT time needs no bound: the wheel keeps any int64.
const maxTime = 1 << 62

func cmdAdd(d *Dispatcher, c *Client, args [][]byte) {
	delay, ok := parseInt(args[2])
	if !ok || delay < 0 || delay > maxTime {
		c.W.Error(errNotInteger)
		return
	}
	d.add(c, args, engine.AddArgs{Delay: delay})
}

func cmdAddAt(d *Dispatcher, c *Client, args [][]byte) {
	at, ok := parseInt(args[2])
	if !ok || at < 0 {
		c.W.Error(errNotInteger)
		return
	}
	d.add(c, args, engine.AddArgs{At: true, Due: at})
}

// addSpecs are the options DELAY.ADD and DELAY.ADDAT share.
var addSpecs = []optSpec{
	{"ID", 1}, {"REPLACE", 0}, {"ACKTIMEOUT", 1}, {"RETRY", 1}, {"DEADLETTER", 1},
	{"UNIQUE", 1}, {"DEBOUNCE", 1}, {"GROUP", 1}, {"PRIORITY", 1},
}

// add parses the options DELAY.ADD and DELAY.ADDAT share and adds the job.
func (d *Dispatcher) add(c *Client, args [][]byte, a engine.AddArgs) {
	a.Queue, a.Payload = args[1], args[3]
	a.AckTimeout, a.Retry = -1, -1
	msg := scanOptions(args[4:], addSpecs, func(name string, v [][]byte) string {
		msg, ok := jobOption(name, v, &a.AckTimeout, &a.Retry, &a.DeadLetter)
		if ok {
			return msg
		}
		if msg, ok := laneOption(name, v, &a.Group, &a.Priority); ok {
			return msg
		}
		switch name {
		case "ID":
			a.ID = v[0]
			if len(a.ID) == 0 || len(a.ID) > 256 {
				return errBadID
			}
		case "REPLACE":
			a.Replace = true
		case "UNIQUE":
			if a.Unique, ok = intIn(v[0], 1, maxTime); !ok {
				return errUnique
			}
		case "DEBOUNCE":
			if a.Debounce, ok = intIn(v[0], 1, maxTime); !ok {
				return errDebounce
			}
		}
		return ""
	})
	switch {
	case msg != "":
	case a.Replace && a.ID == nil:
		// A server-made id is new every time: there is nothing to replace.
		msg = errReplaceID
	case (a.Unique > 0 || a.Debounce > 0) && a.ID == nil:
		// Nor anything to repeat.
		msg = errIdentID
	}
	if msg != "" {
		c.W.Error(msg)
		return
	}
	a.Into = &c.pop // the reply is written before the next command
	a.Mono = c.arrived()
	res, err := d.engineFor(c).Add(a)
	switch {
	case err != nil:
		d.replyErr(c, err)
	case !res.Added:
		c.W.Null()
	default:
		c.Ticket = res.Ticket
		c.W.Bulk(res.ID)
	}
}

func cmdCancel(d *Dispatcher, c *Client, args [][]byte) {
	n, ticket, err := d.engineFor(c).Cancel(args[1], args[2:])
	if err != nil {
		d.replyErr(c, err)
		return
	}
	c.Ticket = ticket
	c.W.Int(int64(n))
}

func cmdPop(d *Dispatcher, c *Client, args [][]byte) {
	timeout, msg := parseTimeout(args[len(args)-1])
	if msg != "" {
		c.W.Error(msg)
		return
	}
	d.blockingPop(c, args[1:len(args)-1], timeout, engine.PopDelay)
}

// blockingPop is DELAY.POP, BLPOP and BRPOP: pop now, or park the client.
func (d *Dispatcher) blockingPop(c *Client, keys [][]byte, timeout time.Duration, mode engine.PopMode) {
	job, w, err := d.engineFor(c).PopOrWaitInto(keys, mode, &c.pop)
	switch {
	case errors.Is(err, engine.ErrNotLeader):
		c.W.Error(d.notLeader(c.slot)) // leadership moved after route's check
	case err != nil:
		// Shutting down: a blocked pop answers null, and so does a new one.
		c.W.NullArray()
	case w == nil:
		c.Ticket = job.Ticket
		writeJob(c.W, job, mode)
	default:
		c.Block = newBlock(c, d.engineFor(c), w, timeout, mode)
	}
}

// writeJob writes a popped job as DELAY.POP replies, [key, id, payload], or
// as BLPOP does, [key, payload].
func writeJob(w Writer, job engine.Delivery, mode engine.PopMode) {
	if mode != engine.PopDelay {
		w.Array(2)
		w.Bulk(job.Queue)
		w.Bulk(job.Payload)
		return
	}
	w.Array(3)
	w.Bulk(job.Queue)
	w.Bulk(job.ID)
	w.Bulk(job.Payload)
}

func cmdAck(d *Dispatcher, c *Client, args [][]byte) {
	n, ticket, err := d.engineFor(c).Ack(args[1], args[2:])
	if err != nil {
		d.replyErr(c, err)
		return
	}
	c.Ticket = ticket
	c.W.Int(int64(n))
}

// cmdNack is DELAY.NACK key id [delay-ms] [ERROR text], exactly. The text
// (1 to engine.MaxReason bytes: a reason, not a stack dump) becomes the
// job's last failure reason. A word that is neither a delay nor ERROR is
// refused by name, never dropped (a delay ignored would make the job ready
// at once, a second id ignored would leave that job reserved).
func cmdNack(d *Dispatcher, c *Client, args [][]byte) {
	var delay int64
	var reason []byte
	rest := args[3:]
	if len(rest) > 0 && !bytes.EqualFold(rest[0], []byte("ERROR")) {
		n, ok := parseInt(rest[0])
		switch {
		case !ok && !looksNumeric(rest[0]):
			c.W.Error(errUnknownOption(rest[0]))
			return
		case !ok || n < 0 || n > maxTime:
			c.W.Error(errNotInteger)
			return
		}
		delay, rest = n, rest[1:]
	}
	msg := scanOptions(rest, []optSpec{{"ERROR", 1}}, func(_ string, v [][]byte) string {
		if len(v[0]) == 0 || len(v[0]) > engine.MaxReason {
			return errReason
		}
		reason = v[0]
		return ""
	})
	if msg != "" {
		c.W.Error(msg)
		return
	}
	ok, ticket, err := d.engineFor(c).NackReason(args[1], args[2], delay, reason)
	d.replyBool(c, ok, ticket, err)
}

// looksNumeric says a word was meant as a number (a delay out of range,
// "1.5"), so it gets the integer error rather than "unknown option".
func looksNumeric(b []byte) bool {
	return len(b) > 0 && (b[0] == '-' || b[0] == '+' || (b[0] >= '0' && b[0] <= '9'))
}

func cmdTouch(d *Dispatcher, c *Client, args [][]byte) {
	ok, ticket, err := d.engineFor(c).Touch(args[1], args[2])
	d.replyBool(c, ok, ticket, err)
}

func (d *Dispatcher) replyBool(c *Client, ok bool, ticket uint64, err error) {
	switch {
	case err != nil:
		d.replyErr(c, err)
	case ok:
		c.Ticket = ticket
		c.W.Int(1)
	default:
		c.W.Int(0)
	}
}

// jobInfoLen is how many fields writeJobInfo writes for j.
func jobInfoLen(j *engine.JobInfo, withQueue bool) int {
	n := 5
	for _, has := range []bool{withQueue, j.AckDeadline != 0, j.Group != nil, j.Priority != 0, j.Origin != nil, j.Reason != ""} {
		if has {
			n++
		}
	}
	return n
}

// writeJobInfo writes a job's fields as DELAY.GET shows them, field and
// value each; withQueue false leaves out the queue (DELAY.SCAN's key).
func writeJobInfo(w Writer, j *engine.JobInfo, withQueue bool) {
	w.BulkString("id")
	w.Bulk(j.ID)
	if withQueue {
		w.BulkString("queue")
		w.Bulk(j.Queue)
	}
	w.BulkString("state")
	w.BulkString(j.State)
	w.BulkString("due")
	w.Int(j.Due)
	w.BulkString("payload")
	w.Bulk(j.Payload)
	w.BulkString("deliveries")
	w.Int(int64(j.Deliveries))
	if j.AckDeadline != 0 {
		w.BulkString("ack_deadline")
		w.Int(j.AckDeadline)
	}
	if j.Group != nil {
		w.BulkString("group")
		w.Bulk(j.Group)
	}
	if j.Priority != 0 {
		w.BulkString("priority")
		w.Int(int64(j.Priority))
	}
	if j.Origin != nil {
		w.BulkString("origin")
		w.Bulk(j.Origin)
	}
	if j.Reason != "" {
		w.BulkString("error")
		w.BulkString(j.Reason)
	}
}

func cmdGet(d *Dispatcher, c *Client, args [][]byte) {
	j, ok := d.engineFor(c).Get(args[1], args[2])
	if !ok {
		c.W.Null()
		return
	}
	c.W.Map(jobInfoLen(&j, true))
	writeJobInfo(c.W, &j, true)
}

func cmdStats(d *Dispatcher, c *Client, args [][]byte) {
	s := d.engineFor(c).QueueStats(args[1])
	fields := []struct {
		name string
		n    uint64
	}{
		{"delayed", uint64(s.Delayed)}, {"ready", uint64(s.Ready)}, {"reserved", uint64(s.Reserved)},
		{"latency", uint64(s.Latency)},
		{"added", s.Added}, {"deliveries", s.Deliveries}, {"redeliveries", s.Redeliveries}, {"acks", s.Acks},
		{"nacks", s.Nacks}, {"expired", s.Expired}, {"dead_lettered", s.DeadLettered},
		{"paused", boolCount(s.Paused)},
	}
	c.W.Map(len(fields))
	for _, f := range fields {
		c.W.BulkString(f.name)
		c.W.Int(int64(f.n))
	}
}

func cmdPeek(d *Dispatcher, c *Client, args [][]byte) {
	count := int64(1)
	if len(args) > 3 {
		c.W.Error(errUnknownOption(args[3]))
		return
	}
	if len(args) == 3 {
		n, ok := parseInt(args[2])
		if !ok {
			c.W.Error(errNotInteger)
			return
		}
		if n < 0 {
			c.W.Error(errOutOfRange)
			return
		}
		count = n
	}
	pairs := d.engineFor(c).Peek(args[1], int(min(count, 1<<30)))
	c.W.Array(len(pairs))
	for _, p := range pairs {
		c.W.Array(2)
		c.W.Bulk(p.ID)
		c.W.Bulk(p.Payload)
	}
}
