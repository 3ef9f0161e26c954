package commands

import (
	"bytes"
	"strconv"

	"github.com/delayd/delayd/engine"
)

// Operating queues: the commands the dashboard's screens and buttons are
// views of (DELAY.UPCOMING, DELAY.REQUEUE, DELAY.PAUSE, DELAY.RESUME).

// maxUpcoming bounds DELAY.UPCOMING's count: a screenful, not a dump (the
// walk holds the engine's lock).
const (
	defaultUpcoming = 10
	maxUpcoming     = 1000
	errUpcomingCnt  = "ERR count must be an integer from 1 to 1000"
	errAfterTime    = "ERR AFTER's time must be an integer (unix ms)"
)

// cmdUpcoming is DELAY.UPCOMING key [count] [AFTER due id]: the next count
// (default 10, at most 1000) delayed jobs in the order they will become
// ready, each as [id, due, payload], after the job id due at due (the last
// of the page before: engine.Cursor); an empty array when there are none.
func cmdUpcoming(d *Dispatcher, c *Client, args [][]byte) {
	count, after, ok := listArgs(c, args)
	if !ok {
		return
	}
	jobs := d.engineFor(c).UpcomingAfter(args[1], count, after)
	c.W.Array(len(jobs))
	for _, j := range jobs {
		c.W.Array(3)
		c.W.Bulk(j.ID)
		c.W.Int(j.Due)
		c.W.Bulk(j.Payload)
	}
}

// listArgs parses what follows the key of DELAY.UPCOMING and
// DELAY.RESERVED: [count] [AFTER time id].
func listArgs(c *Client, args [][]byte) (int, *engine.Cursor, bool) {
	count, rest := defaultUpcoming, args[2:]
	if len(rest) > 0 && !bytes.EqualFold(rest[0], []byte("AFTER")) {
		// A word that is not AFTER is the count, as it always was.
		n, ok := parseInt(rest[0])
		switch {
		case !ok:
			c.W.Error(errNotInteger)
			return 0, nil, false
		case n < 1 || n > maxUpcoming:
			c.W.Error(errUpcomingCnt)
			return 0, nil, false
		}
		count, rest = int(n), rest[1:]
	}
	var after *engine.Cursor
	msg := scanOptions(rest, []optSpec{{"AFTER", 2}}, func(_ string, v [][]byte) string {
		t, ok := parseInt(v[0])
		if !ok {
			return errAfterTime
		}
		if len(v[1]) == 0 || len(v[1]) > 256 {
			return errBadID
		}
		after = &engine.Cursor{Time: t, ID: v[1]}
		return ""
	})
	if msg != "" {
		c.W.Error(msg)
		return 0, nil, false
	}
	return count, after, true
}

// cmdReserved is DELAY.RESERVED key [count] [AFTER deadline id]: the
// queue's reserved jobs, the first to expire first, each [id, ack-deadline,
// deliveries, payload], so an operator sees what workers hold and until
// when; AFTER pages on as DELAY.UPCOMING's.
func cmdReserved(d *Dispatcher, c *Client, args [][]byte) {
	count, after, ok := listArgs(c, args)
	if !ok {
		return
	}
	jobs := d.engineFor(c).ReservedAfter(args[1], count, after)
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

// infoLatencyQueues bounds INFO's per-queue latency lines: the queues whose
// oldest ready job has waited longest, which are the ones to look at; a
// million queues must not make INFO a million lines.
const infoLatencyQueues = 100

// latencyInfo is INFO queues' latency lines: latency_max_ms, the oldest
// ready job of any queue (ms since its due time, 0 with none), then one line
// per queue with a ready job, the oldest first, as Redis writes a line per
// database: queue_<name>:ready=<n>,latency_ms=<ms>.
func latencyInfo(eng *engine.Engine) [][2]string {
	if eng == nil {
		return [][2]string{{"latency_max_ms", "0"}}
	}
	top, most := eng.Latencies(infoLatencyQueues)
	out := make([][2]string, 0, len(top)+1)
	out = append(out, [2]string{"latency_max_ms", strconv.FormatInt(most, 10)})
	for _, q := range top {
		out = append(out, [2]string{"queue_" + infoName(q.Name),
			"ready=" + strconv.Itoa(q.Ready) + ",latency_ms=" + strconv.FormatInt(q.Latency, 10)})
	}
	return out
}

// infoName writes a queue name so that an INFO line stays one key:value
// line a parser splits at its first ':' and ',' and '=': any byte outside
// printable ASCII, and those three and '\', become \xNN.
func infoName(name string) string {
	var b []byte
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c >= 0x7f || c == ':' || c == ',' || c == '=' || c == '\\' {
			if b == nil {
				b = append(make([]byte, 0, len(name)+8), name[:i]...)
			}
			b = append(b, '\\', 'x', "0123456789abcdef"[c>>4], "0123456789abcdef"[c&15])
			continue
		}
		if b != nil {
			b = append(b, c)
		}
	}
	if b == nil {
		return name
	}
	return string(b)
}
