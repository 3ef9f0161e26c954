package commands

import (
	"strconv"

	"github.com/delayd/delayd/engine"
	"github.com/delayd/delayd/jobs"
)

// DELAY.SCAN and DELAY.IMPORT: a queue read whole and written back, for
// `delayd export` and `delayd import` (docs/decisions/export-import.md).

// Bounds of DELAY.SCAN's COUNT.
const (
	defaultScanJobs = 100
	maxScanJobs     = 10000
)

const errScanCount = "ERR COUNT must be an integer from 1 to 10000"

// cmdScanJobs is DELAY.SCAN key cursor [COUNT n]: [next-cursor, [job ...]],
// each job a map (a flat array in RESP2) of its fields.
func cmdScanJobs(d *Dispatcher, c *Client, args [][]byte) {
	cursor, err := strconv.ParseUint(string(args[2]), 10, 64)
	if err != nil {
		c.W.Error("ERR invalid cursor")
		return
	}
	count := int64(defaultScanJobs)
	msg := scanOptions(args[3:], []optSpec{{"COUNT", 1}}, func(_ string, v [][]byte) string {
		var ok bool
		if count, ok = intIn(v[0], 1, maxScanJobs); !ok {
			return errScanCount
		}
		return ""
	})
	if msg != "" {
		c.W.Error(msg)
		return
	}
	next, page, err := d.engineFor(c).ScanJobs(args[1], cursor, int(count))
	if err != nil {
		d.replyErr(c, err)
		return
	}
	w := c.W
	w.Array(2)
	w.BulkString(strconv.FormatUint(next, 10))
	w.Array(len(page))
	for i := range page {
		writeScanJob(c, &page[i])
	}
}

// writeScanJob writes one job of a DELAY.SCAN page: DELAY.GET's fields but
// the queue (the key), then seq, ack_timeout, retry, deadletter and a dead
// letter's origin options.
func writeScanJob(c *Client, j *engine.ScanJob) {
	n := jobInfoLen(&j.JobInfo, false) + 3
	if j.DeadLetter != nil {
		n++
	}
	if j.Origin != nil {
		n += 2
		if j.OriginOpts.DeadLetter != nil {
			n++
		}
	}
	w := c.W
	w.Map(n)
	writeJobInfo(w, &j.JobInfo, false)
	w.BulkString("seq")
	w.Int(int64(j.Seq))
	w.BulkString("ack_timeout")
	w.Int(j.AckTimeout)
	w.BulkString("retry")
	w.Int(j.Retry)
	if j.DeadLetter != nil {
		w.BulkString("deadletter")
		w.Bulk(j.DeadLetter)
	}
	if j.Origin != nil {
		w.BulkString("origin_ack_timeout")
		w.Int(j.OriginOpts.AckTimeout)
		w.BulkString("origin_retry")
		w.Int(j.OriginOpts.Retry)
		if j.OriginOpts.DeadLetter != nil {
			w.BulkString("origin_deadletter")
			w.Bulk(j.OriginOpts.DeadLetter)
		}
	}
}

// importSpecs are DELAY.IMPORT's options: DELAY.ADDAT's that a job keeps,
// and what only a job that lived elsewhere has.
var importSpecs = []optSpec{
	{"ACKTIMEOUT", 1}, {"RETRY", 1}, {"DEADLETTER", 1}, {"GROUP", 1}, {"PRIORITY", 1},
	{"DELIVERIES", 1}, {"ORIGIN", 4}, {"ERROR", 1},
}

// cmdImport is DELAY.IMPORT key id unix-ms payload [options]: the id if the
// job was written, nil if the queue holds that id already (as DELAY.ADDAT
// with ID replies).
func cmdImport(d *Dispatcher, c *Client, args [][]byte) {
	due, ok := parseInt(args[3])
	if !ok || due < 0 {
		c.W.Error(errNotInteger)
		return
	}
	a := engine.ImportArgs{Queue: args[1], ID: args[2], Due: due, Payload: args[4], AckTimeout: -1, Retry: -1}
	if len(a.ID) == 0 || len(a.ID) > 256 {
		c.W.Error(errBadID)
		return
	}
	msg := scanOptions(args[5:], importSpecs, func(name string, v [][]byte) string {
		msg, ok := jobOption(name, v, &a.AckTimeout, &a.Retry, &a.DeadLetter)
		if ok {
			return msg
		}
		if msg, ok := laneOption(name, v, &a.Group, &a.Priority); ok {
			return msg
		}
		switch name {
		case "DELIVERIES":
			n, ok := intIn(v[0], 0, 1<<32-1)
			if !ok {
				return errDeliveries
			}
			a.Deliveries = uint32(n)
		case "ORIGIN":
			o := &jobs.Origin{Queue: v[0]}
			if o.AckTimeout, ok = intIn(v[1], -1, maxAckTimeout); !ok {
				return errOriginAckTimeout
			}
			if o.Retry, ok = parseInt(v[2]); !ok || o.Retry < -1 || o.Retry > maxRetry {
				return errOriginRetry
			}
			if len(v[3]) > 0 { // "": none
				o.DeadLetter = v[3]
			}
			a.Origin = o
		case "ERROR":
			if len(v[0]) == 0 || len(v[0]) > engine.MaxReason {
				return errReason
			}
			a.Reason = v[0]
		}
		return ""
	})
	if msg != "" {
		c.W.Error(msg)
		return
	}
	a.Mono = c.arrived()
	added, ticket, err := d.engineFor(c).Import(a)
	switch {
	case err != nil:
		d.replyErr(c, err)
	case !added:
		c.W.Null()
	default:
		c.Ticket = ticket
		c.W.Bulk(a.ID)
	}
}

const (
	errDeliveries       = "ERR DELIVERIES must be an integer from 0 to 4294967295"
	errOriginAckTimeout = "ERR ORIGIN's ack timeout must be a number of ms from -1 (the default) to 4294967295"
	errOriginRetry      = "ERR ORIGIN's retry must be an integer from -1 (unlimited) to 2147483647"
)
