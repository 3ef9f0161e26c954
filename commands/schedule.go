package commands

import (
	"bytes"

	"github.com/delayd/delayd/engine"
)

// Recurring schedules: DELAY.SCHEDULE, DELAY.UNSCHEDULE, DELAY.SCHEDULES.
// The spec's arithmetic is the schedule package's, the state the engine's.

// cmdSchedule is DELAY.SCHEDULE key name (CRON expr [TZ zone] | EVERY ms)
// payload [ACKTIMEOUT ms] [RETRY n] [DEADLETTER dlq] [MISFIRE skip|once|all]
// [START unix-ms] [END unix-ms]: an upsert by name, reply OK.
func cmdSchedule(d *Dispatcher, c *Client, args [][]byte) {
	a := engine.ScheduleArgs{Queue: args[1], Name: args[2], AckTimeout: -1, Retry: -1}
	i := 3
	switch {
	case bytes.EqualFold(args[i], []byte("CRON")):
		a.Cron = string(args[i+1])
		i += 2
		// TZ zone, when two arguments follow it: a payload that reads
		// "TZ" stays a payload.
		if len(args) > i+2 && bytes.EqualFold(args[i], []byte("TZ")) {
			a.Zone = string(args[i+1])
			if a.Zone == "" {
				c.W.Error("ERR invalid schedule: TZ needs a zone name")
				return
			}
			i += 2
		}
	case bytes.EqualFold(args[i], []byte("EVERY")):
		n, ok := parseInt(args[i+1])
		if !ok || n < 1 || n > maxTime {
			c.W.Error(errNotInteger)
			return
		}
		a.Every = n
		i += 2
	default:
		c.W.Error(errSyntax)
		return
	}
	if i >= len(args) {
		c.W.Error(errSyntax) // no payload
		return
	}
	a.Payload = args[i]
	for i++; i < len(args); i++ {
		opt := args[i]
		if i+1 >= len(args) {
			c.W.Error(errSyntax)
			return
		}
		i++
		v := args[i]
		switch {
		case bytes.EqualFold(opt, []byte("ACKTIMEOUT")):
			n, ok := parseInt(v)
			if !ok || n < 0 || n > 1<<32-1 {
				c.W.Error(errNotInteger)
				return
			}
			a.AckTimeout = n
		case bytes.EqualFold(opt, []byte("RETRY")):
			n, ok := parseInt(v)
			if !ok || n < 0 || n > 1<<31-1 {
				c.W.Error(errNotInteger)
				return
			}
			a.Retry = n
		case bytes.EqualFold(opt, []byte("DEADLETTER")):
			a.DeadLetter = v
		case bytes.EqualFold(opt, []byte("MISFIRE")):
			switch {
			case bytes.EqualFold(v, []byte("skip")):
				a.Misfire = engine.MisfireSkip
			case bytes.EqualFold(v, []byte("once")):
				a.Misfire = engine.MisfireOnce
			case bytes.EqualFold(v, []byte("all")):
				a.Misfire = engine.MisfireAll
			default:
				c.W.Error(errSyntax)
				return
			}
		case bytes.EqualFold(opt, []byte("START")), bytes.EqualFold(opt, []byte("END")):
			n, ok := parseInt(v)
			if !ok || n < 0 {
				c.W.Error(errNotInteger)
				return
			}
			if bytes.EqualFold(opt, []byte("START")) {
				a.Start = n
			} else {
				a.End = n
			}
		default:
			c.W.Error(errSyntax)
			return
		}
	}
	ticket, err := d.engineFor(c).Schedule(a)
	if err != nil {
		d.replyErr(c, err)
		return
	}
	c.Ticket = ticket
	c.W.Status("OK")
}

func cmdUnschedule(d *Dispatcher, c *Client, args [][]byte) {
	ok, ticket, err := d.engineFor(c).Unschedule(args[1], args[2])
	d.replyBool(c, ok, ticket, err)
}

// cmdSchedules is DELAY.SCHEDULES [key]: one field/value array (a map in
// RESP3) per schedule, by (queue, name); with no key, every queue's.
func cmdSchedules(d *Dispatcher, c *Client, args [][]byte) {
	if len(args) > 2 {
		c.W.Error("ERR wrong number of arguments for 'delay.schedules' command")
		return
	}
	var list []engine.ScheduleInfo
	if len(args) == 2 {
		list = d.engineFor(c).Schedules(args[1], false)
	} else {
		list = d.engineFor(c).Schedules(nil, true)
	}
	w := c.W
	w.Array(len(list))
	for _, s := range list {
		w.Map(9)
		w.BulkString("queue")
		w.Bulk(s.Queue)
		w.BulkString("name")
		w.Bulk(s.Name)
		w.BulkString("spec")
		w.BulkString(s.Spec)
		w.BulkString("next")
		w.Int(s.Next)
		w.BulkString("last")
		w.Int(s.Last)
		w.BulkString("fired")
		w.Int(int64(s.Fired))
		w.BulkString("misfire")
		w.BulkString(s.Misfire)
		w.BulkString("start")
		w.Int(s.Start)
		w.BulkString("end")
		w.Int(s.End)
	}
}
