package commands

import (
	"bytes"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/delayd/delayd/engine"
)

// Conn is what a connection offers other goroutines: out-of-band messages
// (invalidations, MONITOR lines) and being closed. The resp package
// implements it.
type Conn interface {
	// Push appends the message fn writes to the connection's pushes, in the
	// connection's current protocol, and returns at once: it never blocks
	// on the network, so it may be called under the engine's lock. A push
	// never overtakes a reply the connection computed before it. A client
	// that lets pushes pile up past a bound is disconnected. False means
	// the connection is gone.
	Push(fn func(w Writer)) bool
	// Kill closes the connection (CLIENT KILL); a pop it is blocked in
	// ends as if the client had left.
	Kill()
	// Output is what waits to be sent to the client: bytes, and the
	// separate blocks they are in (the replies of a batch being written,
	// the pushes waiting, the pushes being written). CLIENT LIST's omem=
	// and oll=. Safe from any goroutine.
	Output() (bytes, blocks int)
}

func cmdClient(d *Dispatcher, c *Client, args [][]byte) {
	if !checkSubArity(c, "client", args) {
		return
	}
	sub := strings.ToLower(string(args[1]))
	n := len(args)
	switch {
	case sub == "setname" && n == 3:
		if !validName(args[2]) {
			c.W.Error(errClientName)
			return
		}
		c.set(func() { c.name = string(args[2]) })
		c.W.Status("OK")
	case sub == "getname" && n == 2:
		c.mu.Lock()
		name := c.name
		c.mu.Unlock()
		if name == "" {
			c.W.Null()
			return
		}
		c.W.BulkString(name)
	case sub == "id" && n == 2:
		c.W.Int(c.ID)
	case sub == "setinfo" && n == 4:
		var dst *string
		switch strings.ToLower(string(args[2])) {
		case "lib-name":
			dst = &c.libName
		case "lib-ver":
			dst = &c.libVer
		default:
			c.W.Error("ERR Unrecognized option '" + clip(args[2]) + "'")
			return
		}
		if !validName(args[3]) {
			c.W.Error("ERR " + clip(args[2]) + " cannot contain spaces, newlines or special characters.")
			return
		}
		c.set(func() { *dst = string(args[3]) })
		c.W.Status("OK")
	case sub == "info" && n == 2:
		c.W.Verbatim(d.clientLine(c) + "\n")
	case sub == "list":
		clientList(d, c, args)
	case sub == "kill" && n >= 3:
		clientKill(d, c, args)
	case sub == "unblock" && (n == 3 || n == 4):
		clientUnblock(d, c, args)
	case (sub == "no-evict" || sub == "no-touch") && n == 3:
		flag := &c.noEvict
		if sub == "no-touch" {
			flag = &c.noTouch
		}
		switch strings.ToLower(string(args[2])) {
		case "on":
			flag.Store(true)
		case "off":
			flag.Store(false)
		default:
			c.W.Error(errSyntax)
			return
		}
		c.W.Status("OK")
	case sub == "tracking" && n >= 3:
		clientTracking(d, c, args)
	case sub == "caching" && n == 3:
		clientCaching(d, c, args)
	case sub == "getredir" && n == 2:
		c.W.Int(d.redirOf(c))
	case sub == "trackinginfo" && n == 2:
		d.trackingInfo(c)
	case sub == "help" && n == 2:
		writeHelp(c.W, "CLIENT", clientHelp)
	case sub == "reply" && n == 3:
		switch strings.ToLower(string(args[2])) {
		case "on":
			c.reply = replyOn
			c.W.Status("OK")
		case "off":
			c.reply = replyOff
		case "skip":
			if c.reply != replyOff { // as Redis: SKIP while OFF stays OFF
				c.reply = replySkip
			}
		default:
			c.W.Error(errSyntax)
		}
	default:
		subError(c, "client", args)
	}
}

var clientHelp = []string{
	"CACHING (YES|NO)",
	"    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
	"GETREDIR",
	"    Return the client ID we are redirecting to when tracking is enabled.",
	"GETNAME",
	"    Return the name of the current connection.",
	"ID",
	"    Return the ID of the current connection.",
	"INFO",
	"    Return information about the current client connection.",
	"KILL <ip:port>",
	"    Kill connection made from <ip:port>.",
	"KILL <option> <value> [<option> <value> [...]]",
	"    Kill connections. Options are:",
	"    * ADDR <ip:port>",
	"      Kill connections made from the specified address",
	"    * LADDR <ip:port>",
	"      Kill connections made to specified local address",
	"    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
	"      Kill connections by type.",
	"    * USER <username>",
	"      Kill connections authenticated by <username>.",
	"    * SKIPME (YES|NO)",
	"      Skip killing current connection (default: yes).",
	"    * ID <client-id>",
	"      Kill connections by client id.",
	"    * MAXAGE <maxage>",
	"      Kill connections older than the specified age.",
	"LIST [options ...]",
	"    Return information about client connections. Options:",
	"    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
	"      Return clients of specified type.",
	"    * ID <client-id> [<client-id> ...]",
	"      Return clients of the specified ids.",
	"SETNAME <name>",
	"    Assign the name <name> to the current connection.",
	"SETINFO <option> <value>",
	"    Set client meta attr. Options are:",
	"    * LIB-NAME: the client lib name.",
	"    * LIB-VER: the client lib version.",
	"REPLY (ON|OFF|SKIP)",
	"    Control the replies sent to the current connection.",
	"UNBLOCK <clientid> [TIMEOUT|ERROR]",
	"    Unblock the specified blocked client.",
	"TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
	"         [OPTIN] [OPTOUT] [NOLOOP]",
	"    Control server assisted client side caching.",
	"TRACKINGINFO",
	"    Report tracking status for the current connection.",
	"NO-EVICT (ON|OFF)",
	"    Protect current client connection from eviction.",
	"NO-TOUCH (ON|OFF)",
	"    Will not touch LRU/LFU stats when this mode is on.",
}

// writeHelp answers CMD HELP in Redis's shape: a header, the lines, and
// HELP itself, each a status reply.
func writeHelp(w Writer, cmd string, lines []string) {
	w.Array(len(lines) + 3)
	w.Status(cmd + " <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")
	for _, l := range lines {
		w.Status(l)
	}
	w.Status("HELP")
	w.Status("    Print this help.")
}

// clientType checks a CLIENT LIST/KILL TYPE argument. Every delayd client
// is normal (a MONITOR client too, as in Redis): it reports whether the
// type exists and whether normal clients are of it.
func clientType(b []byte) (known, normal bool) {
	switch strings.ToLower(string(b)) {
	case "normal":
		return true, true
	case "master", "replica", "slave", "pubsub":
		return true, false
	}
	return false, false
}

// clientList is CLIENT LIST [TYPE type] [ID id ...].
func clientList(d *Dispatcher, c *Client, args [][]byte) {
	var ids []int64
	all := true
	switch {
	case len(args) == 2:
	case len(args) == 4 && strings.EqualFold(string(args[2]), "type"):
		known, normal := clientType(args[3])
		if !known {
			c.W.Error("ERR Unknown client type '" + clip(args[3]) + "'")
			return
		}
		all = normal
	case len(args) > 3 && strings.EqualFold(string(args[2]), "id"):
		for _, a := range args[3:] {
			id, ok := parseInt(a)
			if !ok {
				c.W.Error("ERR Invalid client ID")
				return
			}
			ids = append(ids, id)
		}
	default:
		c.W.Error(errSyntax)
		return
	}
	var sb strings.Builder
	if ids != nil {
		for _, id := range ids {
			if cl := d.client(id); cl != nil {
				sb.WriteString(d.clientLine(cl))
				sb.WriteByte('\n')
			}
		}
	} else if all {
		for _, cl := range d.clientsByID() {
			sb.WriteString(d.clientLine(cl))
			sb.WriteByte('\n')
		}
	}
	c.W.Verbatim(sb.String())
}

// clientsByID is every connected client, oldest first, as Redis lists them.
func (d *Dispatcher) clientsByID() []*Client {
	d.mu.Lock()
	out := make([]*Client, 0, len(d.clients))
	for _, cl := range d.clients {
		out = append(out, cl)
	}
	d.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// clientKill is CLIENT KILL ip:port (the old form: OK or an error) and
// CLIENT KILL <filter> <value> ... (the new form: how many were killed).
func clientKill(d *Dispatcher, c *Client, args [][]byte) {
	var (
		addr, laddr, user []byte
		id, maxAge        int64
		typeSet, normal   bool
		skipMe            = true
	)
	old := len(args) == 3
	if old {
		addr, skipMe = args[2], false // the old form may kill the caller
	} else {
		if len(args)%2 != 0 {
			c.W.Error(errSyntax)
			return
		}
		for i := 2; i < len(args); i += 2 {
			v := args[i+1]
			switch strings.ToLower(string(args[i])) {
			case "id":
				n, ok := parseInt(v)
				if !ok || n < 1 {
					c.W.Error("ERR client-id should be greater than 0")
					return
				}
				id = n
			case "maxage":
				n, ok := parseInt(v)
				if !ok {
					c.W.Error("ERR maxage is not an integer or out of range")
					return
				}
				if n <= 0 {
					c.W.Error("ERR maxage should be greater than 0")
					return
				}
				maxAge = n
			case "type":
				known, isNormal := clientType(v)
				if !known {
					c.W.Error("ERR Unknown client type '" + clip(v) + "'")
					return
				}
				typeSet, normal = true, isNormal
			case "addr":
				addr = v
			case "laddr":
				laddr = v
			case "user":
				if string(v) != "default" {
					c.W.Error("ERR No such user '" + clip(v) + "'")
					return
				}
				user = v
			case "skipme":
				switch strings.ToLower(string(v)) {
				case "yes":
					skipMe = true
				case "no":
					skipMe = false
				default:
					c.W.Error(errSyntax)
					return
				}
			default:
				c.W.Error(errSyntax)
				return
			}
		}
	}
	_ = user // the only user is default, and every client is it
	now := time.Now()
	killed := 0
	for _, cl := range d.clientsByID() {
		switch {
		case addr != nil && cl.Addr != string(addr),
			laddr != nil && cl.LAddr != string(laddr),
			typeSet && !normal,
			id != 0 && cl.ID != id,
			cl == c && skipMe,
			maxAge != 0 && int64(now.Sub(cl.Created)/time.Second) < maxAge:
			continue
		}
		killed++
		if cl == c {
			c.Quit = true // after this reply, as Redis closes after the reply
		} else if cl.Conn != nil {
			cl.Conn.Kill()
		}
	}
	if old {
		if killed == 0 {
			c.W.Error("ERR No such client")
			return
		}
		c.W.Status("OK")
		return
	}
	c.W.Int(int64(killed))
}

// Redis's texts for the two ways a blocked client is unblocked by force.
const (
	// ErrUnblocked is CLIENT UNBLOCK id ERROR's reply to the blocked client.
	ErrUnblocked = "UNBLOCKED client unblocked via CLIENT UNBLOCK"
	// ErrUnblockedRole is what a client blocked on a node that stops being
	// the leader gets, so its library retries elsewhere.
	ErrUnblockedRole = "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)"
)

// clientUnblock is CLIENT UNBLOCK id [TIMEOUT|ERROR].
func clientUnblock(d *Dispatcher, c *Client, args [][]byte) {
	msg := ""
	if len(args) == 4 {
		switch strings.ToLower(string(args[3])) {
		case "timeout":
		case "error":
			msg = ErrUnblocked
		default:
			c.W.Error("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
			return
		}
	}
	id, ok := parseInt(args[2])
	if !ok {
		c.W.Error(errNotInteger)
		return
	}
	if d.Unblock(id, msg) {
		c.W.Int(1)
	} else {
		c.W.Int(0)
	}
}

// Unblock ends the blocking pop client id is parked in, as its timeout
// would (msg empty: a null reply) or with the error line msg (without its
// '-'). A job the engine handed the client at the same moment still goes to
// it, so no job is lost. It reports whether the client was blocked. Cluster
// failover uses it with ErrUnblockedRole.
func (d *Dispatcher) Unblock(id int64, msg string) bool {
	cl := d.client(id)
	return cl != nil && cl.unblock(msg)
}

// allClients is every connected client, read under d.mu, for a walk that
// locks each client on its own.
func (d *Dispatcher) allClients() []*Client {
	d.mu.Lock()
	defer d.mu.Unlock()
	all := make([]*Client, 0, len(d.clients))
	for _, cl := range d.clients {
		all = append(all, cl)
	}
	return all
}

// UnblockAll ends every blocking pop with the error line msg and returns
// how many it ended. When this node stops leading, the cluster calls it
// with ErrUnblockedRole, as Redis answers the clients blocked on a master
// that turns replica: their libraries then find the new leader. A job the
// engine handed a client at the same moment still goes to it. O(clients).
func (d *Dispatcher) UnblockAll(msg string) int {
	all := d.allClients()
	n := 0
	for _, cl := range all {
		if cl.unblock(msg) {
			n++
		}
	}
	return n
}

// unblock ends the pop cl is parked in, if any; see Unblock.
func (cl *Client) unblock(msg string) bool {
	cl.mu.Lock()
	b := cl.blocked
	cl.blocked = nil
	cl.mu.Unlock()
	if b == nil {
		return false
	}
	b.unblock <- msg // buffered, and sent at most once: blocked was cleared
	return true
}

// set changes fields CLIENT LIST may be reading from another connection.
func (c *Client) set(f func()) {
	c.mu.Lock()
	f()
	c.mu.Unlock()
}

// Seen records that the client sent a command now (CLIENT LIST idle=). The
// connection calls it once per batch of pipelined commands, before the
// first: its reading of the clock is the first command's start, and each
// command's end is the next one's (see beforeExec).
func (c *Client) Seen() {
	now := monoNow()
	c.lastSeen.Store(engine.MonoEpoch.Add(now).Unix())
	c.clk = now
}

// replyMode is CLIENT REPLY's state.
type replyMode int8

const (
	replyOn       replyMode = iota
	replyOff                // no reply until CLIENT REPLY ON
	replySkip               // no reply to the next command
	replySkipping           // the command running is the one skipped
)

// execQuiet runs a command after CLIENT REPLY OFF or SKIP, and has its
// reply dropped (DropReply; a blocked pop's too, Block.Quiet), as Redis
// drops it, unless the command was CLIENT REPLY ON, whose OK goes out.
// Out-of-band pushes (invalidations, MONITOR) take their own path and are
// not dropped, as in Redis.
func (d *Dispatcher) execQuiet(c *Client, args [][]byte) {
	if c.reply == replySkip {
		c.reply = replySkipping
	}
	d.run(c, args)
	switch c.reply {
	case replyOn:
		return
	case replySkipping:
		c.reply = replyOn
	}
	c.DropReply = true
	if c.Block != nil {
		c.Block.quiet = true
	}
}

// setLast records the command c runs for CLIENT LIST's cmd=: for a
// container's known subcommand, Redis 7's full name ("client|list").
func (c *Client) setLast(cmd *Command, args [][]byte) {
	if cmd.container {
		name, _ := aclName(cmd, args) // the container's own name for a sub it lacks
		c.lastSub.Store(&name)
	}
	c.last.Store(cmd)
}

// multiInfo is the client's transaction state for CLIENT LIST: in MULTI
// (flag x), commands queued (multi=, -1 outside MULTI), watched keys
// (watch=), and whether a watched key changed (flag d). Transactions fill
// it in.
func (c *Client) multiInfo() (inMulti bool, queued, watched int, dirty bool) {
	return false, -1, 0, false
}

// clientLine is one line of CLIENT LIST with Redis 7.4's fields in Redis's
// order (networking.c, catClientInfoString). It may describe another
// connection, so it reads only what is guarded or atomic. Of the buffer
// sizes only the output is tracked: omem= is the bytes waiting to be sent
// (the replies being written to a client that does not read, and its
// pushes), oll= the blocks they are in, obl= 0 (replies leave in one write
// per batch, there is no fixed reply buffer) and tot-mem= the same as omem
// (the query buffer is not counted, qbuf= shows 0).
func (d *Dispatcher) clientLine(c *Client) string {
	cmd := "NULL"
	if last := c.last.Load(); last != nil {
		cmd = last.Name
		// The sub is stored before the command, so a sub of another
		// container, a moment old, is told by its prefix.
		if sub := c.lastSub.Load(); last.container && sub != nil && strings.HasPrefix(*sub, cmd+"|") {
			cmd = *sub
		}
	}
	inMulti, queued, watched, dirty := c.multiInfo()
	d.trk.mu.Lock()
	t := c.trk
	d.trk.mu.Unlock()
	var flags []byte
	if c.monitor.Load() {
		flags = append(flags, 'O')
	}
	sub := int64(0)
	if c.subbed.Load() {
		flags = append(flags, 'P')
		sub = 1
	}
	if inMulti {
		flags = append(flags, 'x')
	}
	c.mu.Lock()
	name, libName, libVer, proto, blocked := c.name, c.libName, c.libVer, c.proto, c.blocked != nil
	c.mu.Unlock()
	if blocked {
		flags = append(flags, 'b')
	}
	redir := int64(-1)
	if t.on {
		flags = append(flags, 't')
		redir = t.redirID
		if t.brokenRedir {
			flags = append(flags, 'R')
		}
		if t.bcast {
			flags = append(flags, 'B')
		}
	}
	if dirty {
		flags = append(flags, 'd')
	}
	if c.readonly.Load() {
		flags = append(flags, 'r')
	}
	if c.noEvict.Load() {
		flags = append(flags, 'e')
	}
	if c.noTouch.Load() {
		flags = append(flags, 'T')
	}
	if len(flags) == 0 {
		flags = append(flags, 'N')
	}
	omem, oll := 0, 0
	if c.Conn != nil {
		omem, oll = c.Conn.Output()
	}
	now := time.Now()
	var b bytes.Buffer
	field := func(k, v string) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(v)
	}
	num := func(k string, n int64) { field(k, strconv.FormatInt(n, 10)) }
	num("id", c.ID)
	field("addr", c.Addr)
	field("laddr", c.LAddr)
	num("fd", int64(c.FD))
	field("name", name)
	num("age", int64(now.Sub(c.Created)/time.Second))
	num("idle", max(0, now.Unix()-c.lastSeen.Load()))
	field("flags", string(flags))
	num("db", 0)
	num("sub", sub)
	num("psub", 0)
	num("ssub", 0)
	num("multi", int64(queued))
	num("watch", int64(watched))
	num("qbuf", 0)
	num("qbuf-free", 0)
	num("argv-mem", 0)
	num("multi-mem", 0)
	num("rbs", 0)
	num("rbp", 0)
	num("obl", 0)
	num("oll", int64(oll))
	num("omem", int64(omem))
	num("tot-mem", int64(omem))
	field("events", "r")
	field("cmd", cmd)
	field("user", c.userName())
	num("redir", redir)
	num("resp", int64(proto))
	field("lib-name", libName)
	field("lib-ver", libVer)
	return b.String()
}

// Monitoring reports whether the client is in MONITOR mode (which --timeout
// spares, as Redis does).
func (c *Client) Monitoring() bool { return c.monitor.Load() }
