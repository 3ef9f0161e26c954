package commands

import (
	"strings"
	"sync"
)

// Client-side caching (CLIENT TRACKING), as Redis's tracking.c: a client
// that turned tracking on is told, by a RESP3 push `>2 invalidate [key]`,
// when a key it read changes, so its library can drop the cached value. A
// client may REDIRECT them to another connection; a RESP2 one gets them as
// Pub/Sub messages once it subscribed to __redis__:invalidate, the only
// channel there is (SUBSCRIBE, UNSUBSCRIBE below). A
// queue changes also without any command (a job firing, a reservation
// expiring): the engine calls our hook for those too (engine/watch.go).
//
// Default mode remembers, per key, the clients that read it since its last
// change (the engine keeps the matching "tracked" flag and calls the hook
// once). BCAST mode remembers nothing: every change to a key that starts
// with one of the client's prefixes is sent.
//
// # Ordering
//
// A reply computed before a change must reach the client before that
// change's invalidation, or the client caches a stale value forever. Two
// things make it so. The key is tracked before the read runs, not after:
// tracked after, a change between the read and the tracking would be
// missed. And an invalidation made while the connection is running commands
// waits in the connection's push queue until the replies of those commands
// are written (resp's push path), so it never overtakes a reply computed
// before it. An invalidation made between the tracking and the read then
// arrives after the reply and only costs the client a cache miss.

// tracking is one client's CLIENT TRACKING state, guarded by trackTable.mu.
// Only the client's own goroutine changes it, so that goroutine may read it
// without the lock.
type tracking struct {
	on, bcast, optin, optout, noloop bool
	brokenRedir                      bool     // the REDIRECT client is gone
	redirID                          int64    // REDIRECT client id, 0 if none
	prefixes                         []string // BCAST prefixes ("" matches every key)
	writing                          [][]byte // NOLOOP: the keys of the write running now
}

// trackTable is the server's tracking state.
type trackTable struct {
	mu      sync.Mutex
	keys    map[string]map[int64]struct{} // key -> ids of clients that read it since its last change
	bcast   map[int64]*Client             // clients in BCAST mode
	clients int                           // clients with tracking on
}

// tracksRead reports whether this command's keys are remembered for c:
// read-only commands with keys, unless OPTIN without CLIENT CACHING yes, or
// OPTOUT with CLIENT CACHING no, or BCAST (which remembers no key).
func (c *Client) tracksRead(cmd *Command) bool {
	t := &c.trk
	if !t.on || t.bcast || cmd.Flags&ReadOnly == 0 || cmd.FirstKey == 0 {
		return false
	}
	given := c.caching != 0
	return !(t.optin && !given) && !(t.optout && given)
}

// forKeys calls f with each key argument of cmd, from the table's key
// positions (a negative LastKey counts from the end).
func forKeys(cmd *Command, args [][]byte, f func(k []byte)) {
	last := cmd.LastKey
	if last < 0 {
		last += len(args)
	}
	step := max(cmd.Step, 1)
	for i := cmd.FirstKey; i > 0 && i <= last && i < len(args); i += step {
		f(args[i])
	}
}

// TrackRead remembers that c reads cmd's keys. It must run before the read
// (see Ordering above); a transaction calls it for each queued read before
// it runs them. Cost: one engine call per key.
func (d *Dispatcher) TrackRead(c *Client, cmd *Command, args [][]byte) {
	d.trk.mu.Lock()
	forKeys(cmd, args, func(k []byte) {
		set := d.trk.keys[string(k)]
		if set == nil {
			if d.trk.keys == nil {
				d.trk.keys = make(map[string]map[int64]struct{})
			}
			set = make(map[int64]struct{}, 1)
			d.trk.keys[string(k)] = set
		}
		set[c.ID] = struct{}{}
	})
	d.trk.mu.Unlock()
	eng := d.engineFor(c)
	forKeys(cmd, args, func(k []byte) { eng.Track(k) })
}

// noLoop marks (keys non-nil) or unmarks the keys of the write a NOLOOP
// client is running, so that the invalidations of its own write are not
// sent to it.
func (d *Dispatcher) noLoop(c *Client, cmd *Command, args [][]byte, on bool) {
	var keys [][]byte
	if on {
		forKeys(cmd, args, func(k []byte) { keys = append(keys, k) })
	}
	d.trk.mu.Lock()
	c.trk.writing = keys
	d.trk.mu.Unlock()
}

// invalidate is the engine's change hook: it runs under the engine's lock,
// so it only queues pushes and never calls the engine.
func (d *Dispatcher) invalidate(name string) {
	d.trk.mu.Lock()
	defer d.trk.mu.Unlock()
	if ids, ok := d.trk.keys[name]; ok {
		delete(d.trk.keys, name)
		for id := range ids {
			cl := d.client(id)
			if cl == nil || !cl.trk.on || cl.trk.bcast || cl.trk.isWriting(name) {
				continue
			}
			d.sendInvalidation(cl, name)
		}
	}
	for _, cl := range d.trk.bcast {
		if cl.trk.isWriting(name) {
			continue
		}
		for _, p := range cl.trk.prefixes {
			if strings.HasPrefix(name, p) {
				d.sendInvalidation(cl, name)
				break
			}
		}
	}
}

// isWriting: a NOLOOP client's own write changed name. A change another
// client or the timer makes to the same key during that write is taken for
// the client's own (see docs/decisions/tracking.md).
func (t *tracking) isWriting(name string) bool {
	for _, k := range t.writing {
		if string(k) == name {
			return true
		}
	}
	return false
}

// sendInvalidation pushes `>2 invalidate [name]` to c, or to the client it
// redirects to. Called with trk.mu held.
func (d *Dispatcher) sendInvalidation(c *Client, name string) {
	target := c
	if c.trk.redirID != 0 {
		target = d.client(c.trk.redirID)
		if target == nil {
			c.trk.brokenRedir = true
			if c.Conn != nil {
				id := c.trk.redirID
				c.Conn.Push(func(w Writer) {
					if w.Proto() == 3 {
						w.Push(2)
						w.BulkString("tracking-redir-broken")
						w.Int(id)
					}
				})
			}
			return
		}
	}
	if target.Conn == nil {
		return
	}
	redirected := target != c
	target.Conn.Push(func(w Writer) {
		switch {
		case w.Proto() == 3:
			w.Push(2)
			w.BulkString("invalidate")
			w.Array(1)
			w.BulkString(name)
		case redirected && target.subbed.Load():
			// RESP2 has no push: a connection redirected to gets a
			// Pub/Sub message on __redis__:invalidate, as in Redis; one
			// not subscribed gets nothing, as in Redis.
			w.Push(3)
			w.BulkString("message")
			w.BulkString(invalidateChannel)
			w.Array(1)
			w.BulkString(name)
		}
	})
}

// trackingOff turns tracking off for c (CLIENT TRACKING off, or the client
// left). Keys it read stay in the table until they change, as in Redis;
// they are skipped then.
func (d *Dispatcher) trackingOff(c *Client) {
	d.trk.mu.Lock()
	if !c.trk.on {
		d.trk.mu.Unlock()
		return
	}
	bcast := c.trk.bcast
	if bcast {
		delete(d.trk.bcast, c.ID)
	}
	d.trk.clients--
	c.trk = tracking{}
	d.trk.mu.Unlock()
	// Outside trk.mu: the engine calls invalidate (which takes trk.mu)
	// under its own lock, so trk.mu is never held while taking the engine's.
	if eng := d.engineFor(c); bcast && eng != nil {
		eng.TrackAll(false)
	}
}

// clientTracking is CLIENT TRACKING on|off [REDIRECT id] [BCAST]
// [PREFIX p ...] [OPTIN] [OPTOUT] [NOLOOP], with Redis's checks and words.
func clientTracking(d *Dispatcher, c *Client, args [][]byte) {
	var (
		redir                        int64
		bcast, optin, optout, noloop bool
		prefixes                     []string
	)
	for j := 3; j < len(args); j++ {
		more := j+1 < len(args)
		switch strings.ToLower(string(args[j])) {
		case "redirect":
			if !more {
				c.W.Error(errSyntax)
				return
			}
			j++
			if redir != 0 {
				c.W.Error("ERR A client can only redirect to a single other client")
				return
			}
			id, ok := parseInt(args[j])
			if !ok {
				c.W.Error(errNotInteger)
				return
			}
			target := d.client(id)
			if target == nil {
				c.W.Error("ERR The client ID you want redirect to does not exist")
				return
			}
			redir = id
		case "bcast":
			bcast = true
		case "optin":
			optin = true
		case "optout":
			optout = true
		case "noloop":
			noloop = true
		case "prefix":
			if !more {
				c.W.Error(errSyntax)
				return
			}
			j++
			prefixes = append(prefixes, string(args[j]))
		default:
			c.W.Error(errSyntax)
			return
		}
	}
	switch strings.ToLower(string(args[2])) {
	case "on":
	case "off":
		d.trackingOff(c)
		c.W.Status("OK")
		return
	default:
		c.W.Error(errSyntax)
		return
	}
	t := &c.trk
	switch {
	case !bcast && len(prefixes) > 0:
		c.W.Error("ERR PREFIX option requires BCAST mode to be enabled")
		return
	case t.on && t.bcast != bcast:
		c.W.Error("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.")
		return
	case bcast && (optin || optout):
		c.W.Error("ERR OPTIN and OPTOUT are not compatible with BCAST")
		return
	case optin && optout:
		c.W.Error("ERR You can't specify both OPTIN mode and OPTOUT mode")
		return
	case optin && t.optout || optout && t.optin:
		c.W.Error("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.")
		return
	}
	if bcast {
		if msg := prefixCollision(t.prefixes, prefixes); msg != "" {
			c.W.Error(msg)
			return
		}
	}
	newBcast := false
	d.trk.mu.Lock()
	if !t.on {
		d.trk.clients++
	}
	t.on = true
	t.bcast = t.bcast || bcast
	t.optin = t.optin || optin
	t.optout = t.optout || optout
	t.noloop = t.noloop || noloop
	t.redirID, t.brokenRedir = redir, false
	if bcast {
		if len(prefixes) == 0 && !hasPrefix(t.prefixes, "") {
			prefixes = []string{""} // BCAST without PREFIX: every key
		}
		t.prefixes = append(t.prefixes, prefixes...)
		if d.trk.bcast == nil {
			d.trk.bcast = make(map[int64]*Client)
		}
		_, was := d.trk.bcast[c.ID]
		d.trk.bcast[c.ID] = c
		newBcast = !was
	}
	d.trk.mu.Unlock()
	if newBcast {
		// Outside trk.mu, as in trackingOff.
		d.engineFor(c).TrackAll(true)
	}
	c.W.Status("OK")
}

// prefixCollision words Redis's refusal of prefixes that overlap (one
// starts with another): a key would be sent twice.
func prefixCollision(have, add []string) string {
	for i, p := range add {
		for _, h := range have {
			if strings.HasPrefix(p, h) || strings.HasPrefix(h, p) {
				return "ERR Prefix '" + p + "' overlaps with an existing prefix '" + h + "'. Prefixes for a single client must not overlap."
			}
		}
		for _, q := range add[i+1:] {
			if strings.HasPrefix(p, q) || strings.HasPrefix(q, p) {
				return "ERR Prefix '" + p + "' overlaps with another provided prefix '" + q + "'. Prefixes for a single client must not overlap."
			}
		}
	}
	return ""
}

// clientCaching is CLIENT CACHING yes|no: track (OPTIN) or skip (OPTOUT)
// the keys of the next command.
func clientCaching(d *Dispatcher, c *Client, args [][]byte) {
	t := &c.trk
	if !t.on {
		c.W.Error("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled")
		return
	}
	switch strings.ToLower(string(args[2])) {
	case "yes":
		if !t.optin {
			c.W.Error("ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.")
			return
		}
		c.caching = 1
	case "no":
		if !t.optout {
			c.W.Error("ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.")
			return
		}
		c.caching = -1
	default:
		c.W.Error(errSyntax)
		return
	}
	c.W.Status("OK")
}

// redirOf is CLIENT GETREDIR: the REDIRECT id, 0 without one, -1 when
// tracking is off.
func (d *Dispatcher) redirOf(c *Client) int64 {
	if !c.trk.on {
		return -1
	}
	return c.trk.redirID
}

// trackingInfo is CLIENT TRACKINGINFO: flags, redirect, prefixes.
func (d *Dispatcher) trackingInfo(c *Client) {
	d.trk.mu.Lock()
	t := c.trk
	d.trk.mu.Unlock()
	flags := []string{"off"}
	if t.on {
		flags[0] = "on"
	}
	if t.bcast {
		flags = append(flags, "bcast")
	}
	if t.optin {
		flags = append(flags, "optin")
		if c.caching == 1 {
			flags = append(flags, "caching-yes")
		}
	}
	if t.optout {
		flags = append(flags, "optout")
		if c.caching == -1 {
			flags = append(flags, "caching-no")
		}
	}
	if t.noloop {
		flags = append(flags, "noloop")
	}
	if t.brokenRedir {
		flags = append(flags, "broken_redirect")
	}
	w := c.W
	w.Map(3)
	w.BulkString("flags")
	w.Array(len(flags))
	for _, f := range flags {
		w.BulkString(f)
	}
	w.BulkString("redirect")
	w.Int(d.redirOf(c))
	w.BulkString("prefixes")
	w.Array(len(t.prefixes))
	for _, p := range t.prefixes {
		w.BulkString(p)
	}
}

// trackingStats is INFO's tracking_clients and tracking_total_keys.
func (d *Dispatcher) trackingStats() (clients, keys, prefixes int) {
	d.trk.mu.Lock()
	defer d.trk.mu.Unlock()
	for _, cl := range d.trk.bcast {
		prefixes += len(cl.trk.prefixes)
	}
	return d.trk.clients, len(d.trk.keys), prefixes
}

func hasPrefix(list []string, p string) bool {
	for _, q := range list {
		if q == p {
			return true
		}
	}
	return false
}

// invalidateChannel is the channel of RESP2 tracking redirection, the only
// one SUBSCRIBE takes: delayd has no Pub/Sub of its own.
const invalidateChannel = "__redis__:invalidate"

const errNoPubSub = "ERR delayd has no Pub/Sub: SUBSCRIBE takes only " + invalidateChannel +
	" (client-side caching with CLIENT TRACKING ... REDIRECT)"

// writeSubReply is a (un)subscribe confirmation: an array in RESP2, a push
// in RESP3, as Redis's addReplyPubsub(Un)Subscribed; a nil channel is
// UNSUBSCRIBE's answer when nothing was subscribed.
func writeSubReply(w Writer, kind string, channel []byte, n int64) {
	if w.Proto() == 2 {
		w.Array(3)
	} else {
		w.Push(3)
	}
	w.BulkString(kind)
	if channel == nil {
		w.Null()
	} else {
		w.Bulk(channel)
	}
	w.Int(n)
}

func cmdSubscribe(d *Dispatcher, c *Client, args [][]byte) {
	for _, ch := range args[1:] {
		if string(ch) != invalidateChannel {
			c.W.Error(errNoPubSub)
			return
		}
	}
	for _, ch := range args[1:] {
		if !c.subbed.Swap(true) {
			d.subscribers.Add(1)
		}
		writeSubReply(c.W, "subscribe", ch, 1)
	}
}

func cmdUnsubscribe(d *Dispatcher, c *Client, args [][]byte) {
	if len(args) == 1 {
		if !c.subbed.Load() {
			writeSubReply(c.W, "unsubscribe", nil, 0)
			return
		}
		args = append(args, []byte(invalidateChannel))
	}
	for _, ch := range args[1:] {
		if string(ch) == invalidateChannel && c.subbed.Swap(false) {
			d.subscribers.Add(-1)
		}
		n := int64(0)
		if c.subbed.Load() {
			n = 1
		}
		writeSubReply(c.W, "unsubscribe", ch, n)
	}
}

// pubsubAllows refuses, as Redis does, what a RESP2 connection may not send
// once subscribed (its replies could not be told from messages); false
// means it answered.
func (d *Dispatcher) pubsubAllows(c *Client, cmd *Command, args [][]byte) bool {
	switch cmd.Name {
	case "subscribe", "unsubscribe", "ping", "quit":
		return true
	}
	if c.W.Proto() != 2 {
		return true
	}
	name, _ := aclName(cmd, args)
	d.reject(c, cmd, "ERR Can't execute '"+name+"': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context")
	return false
}
