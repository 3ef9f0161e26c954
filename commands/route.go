package commands

import (
	"bytes"
	"strconv"
)

// Routing in cluster mode, as Redis Cluster's getNodeByQuery and
// processCommand do it. Each Raft group is a shard and each of a node's
// groups has its own address (docs/decisions/raft-groups.md): a command
// belongs on the leader of its keys' group. With one group (the default)
// that is always the leader; slots still matter because clients compute
// them, and because a command whose keys hash to different slots is
// refused, as Redis refuses it: so a command never spans groups.
//
//   - Keys in different slots: CROSSSLOT.
//   - Keys of another group's slot: MOVED to that group's leader, or
//     CLUSTERDOWN while it has none.
//   - No keys (PING, INFO, CLUSTER, SCAN, DBSIZE, ...): runs here, except a
//     write (FLUSHALL, FLUSHDB) on a node that is not the writable leader,
//     which gets READONLY, as a Redis replica answers a keyless write.
//   - Keys, on the writable leader: runs here; with several groups, on a
//     slot migrating to another group, keys no longer here get ASK to
//     that group's leader (ask), as Redis answers during a reshard.
//   - Keys of a slot another group owns and this one imports, from a
//     client that sent ASKING just before: runs here.
//   - Keys, elsewhere: MOVED to the leader, or CLUSTERDOWN when no leader is
//     known (or this node was elected but cannot take writes yet); a read
//     from a client that sent READONLY runs here whenever a leader is
//     known, on state that may lag the leader's.
//
// Inside MULTI each command is checked as it is queued (a refusal makes
// EXEC abort, as any refusal does) and the whole transaction again at EXEC:
// its keys must share one slot, and if this node stopped leading meanwhile
// EXEC answers the MOVED (or CLUSTERDOWN, CROSSSLOT) itself and the
// transaction is discarded, as Redis discards it.

const (
	errCrossSlot       = "CROSSSLOT Keys in request don't hash to the same slot"
	errClusterDown     = "CLUSTERDOWN The cluster is down"
	errReadOnlyReplica = "READONLY You can't write against a read only replica."
	errNoCluster       = "ERR This instance has cluster support disabled"
)

// The slot of a command without keys, and of one whose keys disagree.
const (
	noSlot    = -1
	crossSlot = -2
)

// route decides whether this node runs the command; if not it answers the
// redirection or refusal and reports false. Only called in cluster mode.
// O(keys).
func (d *Dispatcher) route(c *Client, cmd *Command, args [][]byte) bool {
	cl := d.opts.Cluster
	slot, write, read := commandSlot(cmd, args), cmd.Flags&Write != 0, cmd.Flags&ReadOnly != 0
	exec := cmd.Name == "exec" && c.tx.multi
	if exec {
		// EXEC is judged by what it would run.
		slot, write, read = noSlot, false, true
		for _, q := range c.tx.queued {
			slot = sameSlot(slot, commandSlot(q.cmd, q.args))
			write = write || q.cmd.Flags&Write != 0
			read = read && q.cmd.Flags&ReadOnly != 0
		}
	}
	c.slot = slot
	// ASKING lasts one command, as Redis's flag does (kept through MULTI);
	// only several groups have slots to import.
	asking := false
	if d.opts.Groups != nil {
		asking = c.asking || cmd.Name == "restore-asking"
		if cmd.Name != "asking" && !c.tx.multi {
			c.asking = false
		}
	}
	c.asked = asking
	var msg string
	switch {
	case slot == crossSlot:
		msg = errCrossSlot
	case slot == noSlot:
		if write && !cl.Writable() {
			// Redis refuses this after its redirection step, like any
			// refusal: inside MULTI, EXEC aborts saying why.
			d.reject(c, cmd, errReadOnlyReplica)
			return false
		}
		return true
	case d.opts.Groups != nil && d.opts.Groups.Owner(slot) != d.opts.Group && !((asking || cmd.Name == "migrate") && d.importing(slot)):
		// (MIGRATE runs where a slot is open, as in Redis: redis-cli --cluster
		// fix moves the queues an importing group holds to the owner.)
		// Another group's slot: its leader's address serves it, and this
		// address is not its replica, so READONLY does not keep it here.
		msg = d.otherGroup(slot)
	case cl.Writable():
		if d.opts.Groups != nil {
			if exec {
				msg = d.fencedTx(c)
			} else {
				msg = d.ask(c, cmd, args, slot)
			}
			if msg != "" {
				break
			}
		}
		return true
	default:
		leader, ok := cl.Leader()
		switch {
		case !ok:
			msg = errClusterDown
		case read && c.readonly.Load():
			return true
		case leader.Self || leader.Addr == "":
			// Elected but not ready for writes yet, or a leader whose
			// client address is not known yet: retry later.
			msg = errClusterDown
		default:
			msg = moved(slot, leader.Addr)
		}
	}
	if exec {
		d.discardTx(c)
		c.W.Error(msg)
		return false
	}
	d.reject(c, cmd, msg) // inside MULTI this also dooms the EXEC
	return false
}

// notLeader is the answer to a command the engine refused because this
// node no longer leads (ErrNotLeader): what route would answer now.
func (d *Dispatcher) notLeader(slot int) string {
	cl := d.opts.Cluster
	if cl == nil || slot < 0 {
		return errReadOnlyReplica
	}
	if leader, ok := cl.Leader(); ok && !leader.Self && leader.Addr != "" {
		return moved(slot, leader.Addr)
	}
	return errClusterDown
}

// otherGroup is the answer for a key of a group this address does not
// serve: MOVED to that group's leader, CLUSTERDOWN while it has none (or
// this node has not started the group yet).
func (d *Dispatcher) otherGroup(slot int) string {
	if v := d.opts.Groups.View(d.opts.Groups.Owner(slot)); v != nil {
		if leader, ok := v.Leader(); ok && leader.Addr != "" {
			return moved(slot, leader.Addr)
		}
	}
	return errClusterDown
}

// importing says whether this address's group is taking slot in
// (CLUSTER SETSLOT IMPORTING): a client that sent ASKING is served here.
func (d *Dispatcher) importing(slot int) bool {
	g, ok := d.opts.Groups.Importing(slot)
	return ok && g == d.opts.Group
}

// ask is the answer, on the leader of slot's owner, to a command on a slot
// that migrates (CLUSTER SETSLOT MIGRATING), as Redis's getNodeByQuery
// gives it: keys all here run here ("" ), keys all gone (moved already, or
// never made) get ASK to the target group's leader, which takes them after
// ASKING; some of each get TRYAGAIN until the move is done, as do queues
// MIGRATE is moving now (migrate.go). Only with several groups, and only
// a migrating slot (or a MIGRATE under way) pays for the look-ups.
func (d *Dispatcher) ask(c *Client, cmd *Command, args [][]byte, slot int) string {
	if cmd.Name == "migrate" {
		return ""
	}
	if d.moves.active.Load() > 0 && d.moves.fenced(commandKeys(cmd, args)) {
		return errMoving
	}
	gs := d.opts.Groups
	to, ok := gs.Migrating(slot)
	if !ok || gs.Owner(slot) != d.opts.Group {
		return ""
	}
	eng := d.engineFor(c)
	if eng == nil {
		return ""
	}
	keys := commandKeys(cmd, args)
	switch n := eng.ExistsCount(keys); {
	case n == len(keys):
		return ""
	case n > 0:
		return "TRYAGAIN Multiple keys request during rehashing of slot"
	}
	if v := gs.View(to); v != nil {
		if leader, ok := v.Leader(); ok && leader.Addr != "" {
			return "ASK " + strconv.Itoa(slot) + " " + leader.Addr
		}
	}
	return errClusterDown
}

// fencedTx is TRYAGAIN for a transaction that touches a queue MIGRATE is
// moving now, else "".
func (d *Dispatcher) fencedTx(c *Client) string {
	if d.moves.active.Load() == 0 {
		return ""
	}
	for _, q := range c.tx.queued {
		if d.moves.fenced(commandKeys(q.cmd, q.args)) {
			return errMoving
		}
	}
	return ""
}

func moved(slot int, addr string) string {
	return "MOVED " + strconv.Itoa(slot) + " " + addr
}

// commandSlot is the slot all of a command's keys hash to, noSlot if it has
// none, crossSlot if they disagree. Keys are where the table says (first,
// last, step; a negative last counts from the end, so BLPOP's timeout is
// left out), plus keys given as options (DELAY.ADD ... DEADLETTER key).
func commandSlot(cmd *Command, args [][]byte) int {
	slot := noSlot
	if cmd.keys != nil {
		for _, k := range cmd.keys(args) {
			slot = sameSlot(slot, KeySlot(k))
		}
	}
	if cmd.FirstKey > 0 {
		last := cmd.LastKey
		if last < 0 {
			last += len(args)
		}
		for i := cmd.FirstKey; i <= last && i < len(args); i += max(cmd.Step, 1) {
			slot = sameSlot(slot, KeySlot(args[i]))
		}
	}
	if cmd.keyOptions {
		slot = optionKeysSlot(cmd, args, slot)
	}
	return slot
}

// commandKeys lists a command's keys where commandSlot finds them.
func commandKeys(cmd *Command, args [][]byte) [][]byte {
	var keys [][]byte
	if cmd.keys != nil {
		keys = append(keys, cmd.keys(args)...)
	}
	if cmd.FirstKey > 0 {
		last := cmd.LastKey
		if last < 0 {
			last += len(args)
		}
		for i := cmd.FirstKey; i <= last && i < len(args); i += max(cmd.Step, 1) {
			keys = append(keys, args[i])
		}
	}
	if cmd.keyOptions {
		optionKeys(cmd, args, func(k []byte) { keys = append(keys, k) })
	}
	return keys
}

func sameSlot(a, b int) int {
	switch {
	case a == noSlot:
		return b
	case b == noSlot || a == b:
		return a
	}
	return crossSlot
}

// optionKeysSlot adds the slots of the keys a command takes as options, as
// Redis's keyword key specs find them: a job moves to its dead-letter queue
// inside the engine, so the two must live in one slot (one day, one shard).
// The options are walked as the table documents them, after the required
// arguments, so a payload or an id that reads "DEADLETTER" is not taken for
// the option. An argument that is no option ends the walk: the handler
// answers the syntax error.
func optionKeysSlot(cmd *Command, args [][]byte, slot int) int {
	optionKeys(cmd, args, func(k []byte) { slot = sameSlot(slot, KeySlot(k)) })
	return slot
}

// optionKeys calls fn with each key given as an option, walking the
// options as optionKeysSlot says.
func optionKeys(cmd *Command, args [][]byte, fn func(key []byte)) {
	i := 1
	for _, a := range cmd.Args {
		if a.Optional {
			break
		}
		i += argWidth(a, args, i)
	}
next:
	for i < len(args) {
		for _, a := range cmd.Args {
			if a.Token == "" || !bytes.EqualFold(args[i], []byte(a.Token)) {
				continue
			}
			if a.Type == "pure-token" {
				i++
				continue next
			}
			if a.Type == "key" && i+1 < len(args) {
				fn(args[i+1])
			}
			i += 2
			continue next
		}
		break
	}
}

// argWidth is how many arguments from args[i] on a required argument takes:
// one, or, for a token with a value, a block or a choice among them
// (DELAY.SCHEDULE's CRON expr [TZ zone] | EVERY ms), what the table says.
func argWidth(a Arg, args [][]byte, i int) int {
	switch a.Type {
	case "oneof":
		for _, alt := range a.Args {
			if alt.Token != "" && i < len(args) && bytes.EqualFold(args[i], []byte(alt.Token)) {
				return argWidth(alt, args, i)
			}
		}
		return 1
	case "block":
		n := 0
		if a.Token != "" {
			n++
		}
		for _, sub := range a.Args {
			if sub.Optional && (sub.Token == "" || i+n >= len(args) || !bytes.EqualFold(args[i+n], []byte(sub.Token))) {
				continue
			}
			n += argWidth(sub, args, i+n)
		}
		return n
	case "pure-token":
		return 1
	}
	if a.Token != "" {
		return 2
	}
	return 1
}

// keyOptions marks the commands that take a key as an option; only those
// pay for optionKeysSlot.
func init() {
	for _, cmd := range table {
		for _, a := range cmd.Args {
			if a.Type == "key" && a.Token != "" {
				cmd.keyOptions = true
			}
		}
	}
}
