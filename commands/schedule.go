package commands

import (
	"bytes"

	"github.com/delayd/delayd/engine"
)

// Recurring schedules: DELAY.SCHEDULE, DELAY.UNSCHEDULE, DELAY.SCHEDULES.
// The spec's arithmetic is the schedule package's, the state the engine's.

// scheduleSpecs are DELAY.SCHEDULE's options after the payload.
var scheduleSpecs = []optSpec{
	{"ACKTIMEOUT", 1}, {"RETRY", 1}, {"DEADLETTER", 1}, {"MISFIRE", 1}, {"START", 1}, {"END", 1},
}

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
		n, ok := intIn(args[i+1], 1, maxTime)
		if !ok {
			c.W.Error(errEvery)
			return
		}
		a.Every = n
		i += 2
	default:
		c.W.Error("ERR syntax error: expected CRON or EVERY, got '" + clip(args[i]) + "'")
		return
	}
	if i >= len(args) {
		c.W.Error("ERR syntax error: no payload")
		return
	}
	a.Payload = args[i]
	msg := scanOptions(args[i+1:], scheduleSpecs, func(name string, v [][]byte) string {
		msg, ok := jobOption(name, v, &a.AckTimeout, &a.Retry, &a.DeadLetter)
		if ok {
			return msg
		}
		switch name {
		case "MISFIRE":
			switch {
			case bytes.EqualFold(v[0], []byte("skip")):
				a.Misfire = engine.MisfireSkip
			case bytes.EqualFold(v[0], []byte("once")):
				a.Misfire = engine.MisfireOnce
			case bytes.EqualFold(v[0], []byte("all")):
				a.Misfire = engine.MisfireAll
			default:
				return errMisfire
			}
		case "START":
			if a.Start, ok = intIn(v[0], 0, 1<<63-1); !ok {
				return errTime(name)
			}
		case "END":
			if a.End, ok = intIn(v[0], 0, 1<<63-1); !ok {
				return errTime(name)
			}
		}
		return ""
	})
	if msg != "" {
		c.W.Error(msg)
		return
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
