package commands

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delayd/delayd/engine"
)

// What watches commands run: client tracking (tracking.go), SLOWLOG,
// MONITOR, and the command counters of /metrics and INFO commandstats
// (metrics.go). The dispatcher calls beforeExec and afterExec around every
// handler; with no tracking client, no monitor, and a fast command they
// cost a few branches, one clock read and two atomic adds, and allocate
// nothing.

// observers is the dispatcher's SLOWLOG and MONITOR state.
type observers struct {
	slowAt  time.Duration // slowlog-log-slower-than; negative: off
	slowMax int           // slowlog-max-len

	slowMu   sync.Mutex
	slow     []slowEntry // newest last; at most slowMax
	slowNext int64       // id of the next entry

	monitors atomic.Int32 // clients in MONITOR mode: 0 skips the feed
	monMu    sync.Mutex
	monSet   map[int64]*Client // guarded by monMu
}

type slowEntry struct {
	id     int64
	unix   int64
	micros int64
	args   []string
	addr   string
	name   string
}

func (o *observers) init(cfg map[string]string) {
	o.slowAt = 10 * time.Millisecond
	if v, err := strconv.ParseInt(cfg["slowlog-log-slower-than"], 10, 64); err == nil {
		o.slowAt = time.Duration(v) * time.Microsecond
	}
	o.slowMax = 128
	if v, err := strconv.Atoi(cfg["slowlog-max-len"]); err == nil && v >= 0 {
		o.slowMax = v
	}
}

// beforeExec runs before a handler: a tracking client's read is tracked
// before it reads (see tracking.go, Ordering), and a NOLOOP client's write
// is marked. It returns the start time.
func (d *Dispatcher) beforeExec(c *Client, cmd *Command, args [][]byte) time.Duration {
	if c.trk.on {
		if c.tracksRead(cmd) {
			d.TrackRead(c, cmd, args)
		} else if c.trk.noloop && cmd.Flags&Write != 0 {
			d.noLoop(c, cmd, args, true)
		}
	}
	c.began = c.clk
	if c.began == 0 {
		c.began = monoNow()
	}
	return c.began
}

// arrived is the running command's start, for the engine
// (engine.AddArgs.Mono, on the same clock): one clock read serves the
// command layer and the engine, and it was read after the command arrived
// (a batch's commands are all in the buffer when Client.Seen reads the
// clock), so a delay counted from it never ends before the client's.
// Outside a command (began is cleared after each) it is 0: the engine
// reads the clock itself.
func (c *Client) arrived() time.Duration { return c.began }

// monoNow is the engine's clock (engine.Mono), so a command's start is a
// time the engine can take (arrived): what a command's duration needs,
// read with one clock call where time.Now makes two (wall and monotonic),
// on every command.
func monoNow() time.Duration { return engine.Mono() }

// afterExec runs after a handler: SLOWLOG, MONITOR, and the end of what
// CLIENT CACHING asked for the next command.
func (d *Dispatcher) afterExec(c *Client, cmd *Command, args [][]byte, start time.Duration) {
	if c.trk.writing != nil {
		d.noLoop(c, cmd, args, false)
	}
	// CLIENT CACHING covers the next command, or a whole transaction
	// (rueidis sends MULTI, CLIENT CACHING yes, PTTL, the read, EXEC).
	if c.caching != 0 && cmd.Name != "client" && !c.tx.multi && c.tx.eng == nil {
		c.caching = 0
	}
	// A blocked command is timed by its handler, not by its wait; Redis
	// logs it when it is unblocked, we log the handler's part.
	//
	// Within a batch of pipelined commands the end of one is the start of
	// the next (Client.Seen reads the first start): one clock read a
	// command, not two. The next command's time then includes parsing it,
	// a fraction of a microsecond. A blocked command's wait is not the
	// next one's time, nor is anything outside a batch (web's commands,
	// which call no Seen): those read the clock again.
	end := monoNow()
	took := end - start
	if eng := d.eng.Load(); eng != nil {
		eng.Overdue(end)          // the timer's backstop when the process is busy
		eng.Settle(c.Ticket != 0) // who writes the log records it made
	}
	c.began = 0
	if c.clk != 0 && c.Block == nil {
		c.clk = end
	} else {
		c.clk = 0
	}
	if c.Block == nil {
		d.countCommand(cmd, took)
		d.ran(c, cmd)
	} else {
		// Counted when it ends (Block.account), as Redis counts a blocked
		// command when it is unblocked: one refused then is a rejected
		// call, not a call.
		d.guard(c.Block, cmd, args, took)
	}
	if int64(end) >= d.ops.next.Load() {
		d.ops.sample(end, d.commandsRun.Load())
	}
	if d.obs.slowAt >= 0 && took >= d.obs.slowAt {
		d.slowlogPush(c, cmd, args, took)
	}
	if d.obs.monitors.Load() != 0 && cmd.Flags&Admin == 0 {
		d.feedMonitors(c, cmd, args)
	}
}

// Redaction. SPEC: nothing shows a password or a payload. Passwords are
// redacted as Redis does (AUTH, HELLO ... AUTH); payloads (an argument
// named "payload" in the table) too, where Redis would show values.
const redacted = "(redacted)"

// payloadSpan finds where a command's payload arguments are: the position
// of the table argument named "payload" (counting an option's token), and
// whether every argument from there on is one.
func payloadSpan(cmd *Command) (at int, rest bool) {
	pos := 1
	for _, a := range cmd.Args {
		if a.Name == "payload" {
			return pos, a.Multiple
		}
		if a.Optional || a.Multiple || a.Type == "oneof" || a.Type == "block" {
			return 0, false // positions after this one vary
		}
		pos++
		if a.Token != "" && a.Type != "pure-token" {
			pos++
		}
	}
	return 0, false
}

// payloads caches payloadSpan per command name. Filled by init, not by its
// initializer: the table refers (through EXEC) to the code that reads it.
var payloads map[string][2]int

func init() { payloads = payloadSpans() }

func payloadSpans() map[string][2]int {
	m := map[string][2]int{}
	for _, cmd := range table {
		if at, rest := payloadSpan(cmd); at > 0 {
			r := 0
			if rest {
				r = 1
			}
			m[cmd.Name] = [2]int{at, r}
		}
	}
	return m
}

// shown returns args as MONITOR and SLOWLOG may show them.
func shown(cmd *Command, args [][]byte) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = string(a)
	}
	switch cmd.Name {
	case "auth":
		for i := 1; i < len(out); i++ {
			out[i] = redacted
		}
	case "acl":
		// ACL SETUSER's rules hold passwords (>pass): Redis redacts every
		// rule.
		if len(out) > 1 && strings.EqualFold(out[1], "setuser") {
			for i := 3; i < len(out); i++ {
				out[i] = redacted
			}
		}
	case "hello":
		for i := 2; i+2 < len(out); i++ {
			if strings.EqualFold(out[i], "auth") {
				out[i+1], out[i+2] = redacted, redacted
				i += 2
			}
		}
	}
	if cmd.Name == "delay.nack" {
		redactOption(args, out, 3, "ERROR") // a failure reason may quote a payload
	}
	if cmd.Name == "delay.schedule" {
		// The payload follows CRON expr [TZ zone] or EVERY ms, so the
		// table cannot place it: find it as cmdSchedule does.
		if i := schedulePayload(args); i > 0 {
			out[i] = redacted
		}
	}
	if p, ok := payloads[cmd.Name]; ok {
		for i := p[0]; i < len(out); i++ {
			out[i] = redacted
			if p[1] == 0 {
				break
			}
		}
	}
	return out
}

// schedulePayload is the index of DELAY.SCHEDULE's payload, as cmdSchedule
// reads it, or 0 when there is none.
func schedulePayload(args [][]byte) int {
	if len(args) < 5 {
		return 0
	}
	i := 5 // key name CRON|EVERY x payload
	if bytes.EqualFold(args[3], []byte("CRON")) && len(args) > 7 && bytes.EqualFold(args[5], []byte("TZ")) {
		i = 7
	}
	if i >= len(args) {
		return 0
	}
	return i
}

// ---- SLOWLOG ----

const (
	slowMaxArgs = 32  // Redis's SLOWLOG_ENTRY_MAX_ARGC
	slowMaxLen  = 128 // Redis's SLOWLOG_ENTRY_MAX_STRING
)

func (d *Dispatcher) slowlogPush(c *Client, cmd *Command, args [][]byte, took time.Duration) {
	if d.obs.slowMax == 0 {
		return
	}
	all := shown(cmd, args)
	n := min(len(all), slowMaxArgs)
	out := make([]string, n)
	for i := range n {
		if n != len(all) && i == n-1 {
			out[i] = "... (" + strconv.Itoa(len(all)-n+1) + " more arguments)"
			break
		}
		s := all[i]
		if len(s) > slowMaxLen {
			s = s[:slowMaxLen] + "... (" + strconv.Itoa(len(s)-slowMaxLen) + " more bytes)"
		}
		out[i] = s
	}
	c.mu.Lock()
	name := c.name
	c.mu.Unlock()
	o := &d.obs
	o.slowMu.Lock()
	defer o.slowMu.Unlock()
	e := slowEntry{id: o.slowNext, unix: time.Now().Unix(), micros: int64(took / time.Microsecond), args: out, addr: c.Addr, name: name}
	o.slowNext++
	if len(o.slow) >= o.slowMax {
		copy(o.slow, o.slow[len(o.slow)-o.slowMax+1:])
		o.slow = o.slow[:o.slowMax-1]
	}
	o.slow = append(o.slow, e)
}

var slowlogHelp = []string{
	"GET [<count>]",
	"    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
	"    Entries are made of:",
	"    id, timestamp, time in microseconds, arguments array, client IP and port,",
	"    client name",
	"LEN",
	"    Return the length of the slowlog.",
	"RESET",
	"    Reset the slowlog.",
}

func cmdSlowlog(d *Dispatcher, c *Client, args [][]byte) {
	if !checkSubArity(c, "slowlog", args) {
		return
	}
	sub := strings.ToLower(string(args[1]))
	o := &d.obs
	switch {
	case sub == "help" && len(args) == 2:
		writeHelp(c.W, "SLOWLOG", slowlogHelp)
	case sub == "reset" && len(args) == 2:
		o.slowMu.Lock()
		o.slow = nil
		o.slowMu.Unlock()
		c.W.Status("OK")
	case sub == "len" && len(args) == 2:
		o.slowMu.Lock()
		n := len(o.slow)
		o.slowMu.Unlock()
		c.W.Int(int64(n))
	case sub == "get" && (len(args) == 2 || len(args) == 3):
		count := int64(10)
		if len(args) == 3 {
			n, ok := parseInt(args[2])
			if !ok || n < -1 {
				c.W.Error("ERR count should be greater than or equal to -1")
				return
			}
			count = n
		}
		o.slowMu.Lock()
		entries := append([]slowEntry(nil), o.slow...)
		o.slowMu.Unlock()
		if count == -1 || count > int64(len(entries)) {
			count = int64(len(entries))
		}
		w := c.W
		w.Array(int(count))
		for i := len(entries) - 1; i >= len(entries)-int(count); i-- {
			e := entries[i]
			w.Array(6)
			w.Int(e.id)
			w.Int(e.unix)
			w.Int(e.micros)
			w.Array(len(e.args))
			for _, a := range e.args {
				w.BulkString(a)
			}
			w.BulkString(e.addr)
			w.BulkString(e.name)
		}
	default:
		subError(c, "slowlog", args)
	}
}

// ---- MONITOR ----

func cmdMonitor(d *Dispatcher, c *Client, args [][]byte) {
	if c.Conn == nil {
		c.W.Error("ERR MONITOR needs a network connection")
		return
	}
	if c.monitor.Swap(true) {
		c.W.Status("OK") // already monitoring, as Redis
		return
	}
	o := &d.obs
	o.monMu.Lock()
	if o.monSet == nil {
		o.monSet = make(map[int64]*Client)
	}
	o.monSet[c.ID] = c
	o.monitors.Add(1)
	o.monMu.Unlock()
	c.W.Status("OK")
}

// monitorOff stops c's MONITOR (it left).
func (d *Dispatcher) monitorOff(c *Client) {
	if !c.monitor.Swap(false) {
		return
	}
	o := &d.obs
	o.monMu.Lock()
	delete(o.monSet, c.ID)
	o.monitors.Add(-1)
	o.monMu.Unlock()
}

// feedMonitors sends every monitor the line Redis's MONITOR shows:
// +<unix>.<micro> [0 <addr>] "cmd" "arg" ..., arguments quoted as Redis's
// sdscatrepr quotes them, passwords and payloads redacted.
func (d *Dispatcher) feedMonitors(c *Client, cmd *Command, args [][]byte) {
	now := time.Now()
	b := make([]byte, 0, 64)
	b = strconv.AppendInt(b, now.Unix(), 10)
	b = append(b, '.')
	us := now.Nanosecond() / 1000
	for div := 100000; div > 0; div /= 10 {
		b = append(b, byte('0'+us/div%10))
	}
	b = append(b, " [0 "...)
	b = append(b, c.Addr...)
	b = append(b, "] "...)
	for i, a := range shown(cmd, args) {
		if i > 0 {
			b = append(b, ' ')
		}
		b = appendRepr(b, a)
	}
	line := string(b)
	o := &d.obs
	o.monMu.Lock()
	defer o.monMu.Unlock()
	for _, m := range o.monSet {
		m.Conn.Push(func(w Writer) { w.Status(line) })
	}
}

// appendRepr quotes s as Redis's sdscatrepr does.
func appendRepr(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch ch {
		case '\\', '"':
			b = append(b, '\\', ch)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		case '\a':
			b = append(b, '\\', 'a')
		case '\b':
			b = append(b, '\\', 'b')
		default:
			if ch < 0x20 || ch > 0x7e {
				b = append(b, '\\', 'x', hexDigits[ch>>4], hexDigits[ch&15])
			} else {
				b = append(b, ch)
			}
		}
	}
	return append(b, '"')
}
