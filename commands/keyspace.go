package commands

import (
	"strconv"
	"strings"

	"github.com/delayd/delayd/engine"
)

// The keyspace, as Redis shows it: every queue holding a job in any state is
// a key of type list in database 0. SCAN, KEYS, FLUSHDB/FLUSHALL, MEMORY
// USAGE and INFO keyspace are enough for redis-cli's --scan, --bigkeys,
// --memkeys and --stat, and for the admin tools that walk keys.

// cmdScan is SCAN cursor [MATCH pattern] [COUNT n] [TYPE type]. The cursor is
// a queue index (see engine.Scan): a key present for the whole scan is
// returned at least once, and a scan ends when the cursor comes back 0.
func cmdScan(d *Dispatcher, c *Client, args [][]byte) {
	cursor, err := strconv.ParseUint(string(args[1]), 10, 64)
	if err != nil {
		c.W.Error("ERR invalid cursor")
		return
	}
	count := 10
	var match func(string) bool
	typeOK := true
	for i := 2; i < len(args); i += 2 {
		if i+1 >= len(args) {
			c.W.Error(errSyntax)
			return
		}
		switch strings.ToLower(string(args[i])) {
		case "match":
			match = pattern(string(args[i+1]))
		case "count":
			n, ok := parseInt(args[i+1])
			if !ok {
				c.W.Error(errNotInteger)
				return
			}
			if n < 1 {
				c.W.Error(errSyntax)
				return
			}
			count = int(min(n, 1<<30))
		case "type":
			// Every key is a list; any other type matches nothing, as a
			// Redis holding only lists answers.
			typeOK = strings.EqualFold(string(args[i+1]), "list")
		default:
			c.W.Error(errSyntax)
			return
		}
	}
	next, keys := d.engineFor(c).Scan(cursor, count, match)
	if !typeOK {
		keys = nil
	}
	c.W.Array(2)
	c.W.BulkString(strconv.FormatUint(next, 10))
	c.W.Array(len(keys))
	for _, k := range keys {
		c.W.BulkString(k)
	}
}

// pattern is the filter for a MATCH or KEYS pattern; nil (everything) for a
// lone `*`, which Redis also treats apart (it matches the empty key too).
func pattern(p string) func(string) bool {
	if p == "*" {
		return nil
	}
	return func(name string) bool { return globMatch(p, name) }
}

func cmdKeys(d *Dispatcher, c *Client, args [][]byte) {
	keys := d.engineFor(c).Keys(pattern(string(args[1])))
	c.W.Array(len(keys))
	for _, k := range keys {
		c.W.BulkString(k)
	}
}

// cmdFlush is FLUSHDB and FLUSHALL [ASYNC|SYNC]: both drop every job of the
// one database, logged as one record. ASYNC and SYNC are the same here: the
// state is dropped whole and the garbage collector frees it in the
// background either way.
func cmdFlush(d *Dispatcher, c *Client, args [][]byte) {
	if len(args) > 2 || (len(args) == 2 && !strings.EqualFold(string(args[1]), "async") && !strings.EqualFold(string(args[1]), "sync")) {
		c.W.Error(errSyntax)
		return
	}
	ticket, err := d.engineFor(c).Flush()
	if err != nil {
		d.replyErr(c, err)
		return
	}
	c.Ticket = ticket
	c.W.Status("OK")
}

var memoryHelp = []string{
	"MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"STATS",
	"    Return information about the memory usage of the server.",
	"USAGE <key> [SAMPLES <count>]",
	"    Return memory in bytes used by <key> and its value. Nested values are",
	"    sampled up to <count> times (default: 5, 0 means sample all).",
	"HELP",
	"    Print this help.",
}

// cmdMemory is MEMORY USAGE key [SAMPLES n], MEMORY STATS and MEMORY HELP.
// USAGE is bookkeeping rather than a sample (the engine counts each queue's
// bytes as jobs come and go), so SAMPLES is checked and otherwise ignored.
func cmdMemory(d *Dispatcher, c *Client, args [][]byte) {
	sub := strings.ToLower(string(args[1]))
	switch {
	case sub == "usage" && len(args) >= 3:
		if len(args) != 3 && (len(args) != 5 || !strings.EqualFold(string(args[3]), "samples")) {
			c.W.Error(errSyntax)
			return
		}
		if len(args) == 5 {
			if _, ok := parseInt(args[4]); !ok {
				c.W.Error(errNotInteger)
				return
			}
		}
		n, ok := d.engineFor(c).MemoryUsage(args[2])
		if !ok {
			c.W.Null()
			return
		}
		c.W.Int(n)
	case sub == "stats" && len(args) == 2:
		in := d.engineFor(c).Info()
		c.W.Map(5)
		c.W.BulkString("keys.count")
		c.W.Int(int64(in.Queues))
		c.W.BulkString("jobs.count")
		c.W.Int(int64(in.Jobs))
		c.W.BulkString("dataset.bytes")
		c.W.Int(in.MemoryBytes)
		c.W.BulkString("payload.bytes")
		c.W.Int(in.PayloadBytes)
		c.W.BulkString("keys.bytes-per-key")
		if in.Queues > 0 {
			c.W.Int(in.MemoryBytes / int64(in.Queues))
		} else {
			c.W.Int(0)
		}
	case sub == "help" && len(args) == 2:
		c.W.Array(len(memoryHelp))
		for _, l := range memoryHelp {
			c.W.Status(l)
		}
	default:
		c.W.Error("ERR unknown subcommand or wrong number of arguments for '" + clip(args[1]) + "'. Try MEMORY HELP.")
	}
}

// keyspaceInfo is INFO's Keyspace section: one line for database 0 while it
// holds a key, nothing otherwise, as Redis. No key expires.
func keyspaceInfo(in engine.Info) [][2]string {
	if in.Queues == 0 {
		return nil
	}
	return [][2]string{{"db0", "keys=" + strconv.Itoa(in.Queues) + ",expires=0,avg_ttl=0"}}
}

// cmdTTL is TTL and PTTL: a queue never expires, so -1 while it is a key and
// -2 when it is not, as Redis answers for a key without an expiry. Client
// libraries ask it: rueidis's client-side cache sends PTTL with every
// cached read to bound the entry's life.
func cmdTTL(d *Dispatcher, c *Client, args [][]byte) {
	if d.engineFor(c).ExistsCount(args[1:2]) > 0 {
		c.W.Int(-1)
		return
	}
	c.W.Int(-2)
}
