package commands

import (
	"bytes"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// MIGRATE between Raft groups (docs/decisions/slot-moves.md), the form
// redis-cli --cluster reshard sends the source's leader:
//
//	MIGRATE host port "" 0 timeout [COPY] [REPLACE] [AUTH pw | AUTH2 user pw] KEYS key ...
//
// Each queue is exported whole (engine.ExportQueue), sent to the target
// group's leader as RESTORE-ASKING key 0 payload, which applies it as one
// unit of its group's log and answers once that is committed; then the
// source drops it as one unit of its own (engine.DropQueue). A job is in
// one group before the target's commit and after the source's; between
// the two it is in both, and a crash there is resolved by redis-cli
// --cluster fix, which MIGRATEs the queues again to one of the two: an
// import skips the ids the queue has there, the drop removes what is left.
// Meanwhile the queues are fenced here: commands on them
// get TRYAGAIN (a client retries), commands routed before the fence are
// waited for (drain), and clients blocked on them are sent to the target
// with ASK.

// migrations are the queues of this address being moved now.
type migrations struct {
	active atomic.Int32 // len(names): routing looks at names only when some move
	mu     sync.Mutex
	names  map[string]bool // guarded by mu
}

// fence marks names as moving; false if one is already.
func (m *migrations) fence(names [][]byte) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range names {
		if m.names[string(n)] {
			return false
		}
	}
	if m.names == nil {
		m.names = map[string]bool{}
	}
	for _, n := range names {
		m.names[string(n)] = true
	}
	m.active.Store(int32(len(m.names)))
	return true
}

func (m *migrations) unfence(names [][]byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range names {
		delete(m.names, string(n))
	}
	m.active.Store(int32(len(m.names)))
}

// fenced says whether any of keys is being moved.
func (m *migrations) fenced(keys [][]byte) bool {
	if m.active.Load() == 0 {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range keys {
		if m.names[string(k)] {
			return true
		}
	}
	return false
}

const errMoving = "TRYAGAIN the queue is being moved to another Raft group"

// sender is a group's Cluster: it reaches another node's RESP address.
type sender interface {
	Send(addr, user, password string, timeout time.Duration, cmds [][]any) error
}

// migrateKeys is MIGRATE's keys: the key argument, or those after KEYS.
func migrateKeys(args [][]byte) [][]byte {
	if len(args) > 3 && len(args[3]) > 0 {
		return args[3:4]
	}
	for i := 6; i < len(args); i++ {
		if bytes.EqualFold(args[i], []byte("keys")) {
			return args[i+1:]
		}
	}
	return nil
}

func cmdMigrate(d *Dispatcher, c *Client, args [][]byte) {
	snd, ok := d.opts.Cluster.(sender)
	if !ok || d.opts.Groups == nil {
		c.W.Error("ERR MIGRATE moves queues between the Raft groups of a cluster of several groups (--cluster-groups)")
		return
	}
	port, ok1 := parseInt(args[2])
	timeout, ok2 := parseInt(args[5])
	if !ok1 || !ok2 || port <= 0 || port > 65535 {
		c.W.Error(errNotInteger)
		return
	}
	if string(args[4]) != "0" {
		c.W.Error("ERR DB index is out of range")
		return
	}
	copyOnly, keysAt := false, -1
	var user, password string
	for i := 6; i < len(args) && keysAt < 0; i++ {
		switch strings.ToLower(string(args[i])) {
		case "copy":
			copyOnly = true
		case "replace":
			// A queue the target has takes the jobs it lacks: REPLACE or
			// not, nothing there is lost or doubled (ImportQueue).
		case "auth":
			if i+1 >= len(args) {
				c.W.Error(errSyntax)
				return
			}
			password, i = string(args[i+1]), i+1
		case "auth2":
			if i+2 >= len(args) {
				c.W.Error(errSyntax)
				return
			}
			user, password, i = string(args[i+1]), string(args[i+2]), i+2
		case "keys":
			if len(args[3]) != 0 {
				c.W.Error("ERR When using MIGRATE KEYS option, the key argument must be set to the empty string")
				return
			}
			keysAt = i + 1
		default:
			c.W.Error(errSyntax)
			return
		}
	}
	keys := migrateKeys(args)
	if len(keys) == 0 {
		c.W.Status("NOKEY")
		return
	}
	eng := d.engineFor(c)
	if eng == nil {
		c.W.Error(errLoading)
		return
	}
	if timeout <= 0 {
		timeout = 1000
	}
	target := net.JoinHostPort(string(args[1]), strconv.FormatInt(port, 10))
	for _, m := range d.opts.Cluster.Nodes() {
		if m.Addr == target {
			// Its import would find every job there and its drop remove them.
			c.W.Error("ERR the target is a member of this Raft group: MIGRATE moves queues to another group")
			return
		}
	}
	// A MIGRATE waits for other clients' commands (drain) and may wait for
	// the target: it must not hold its own client's, or two MIGRATEs
	// would wait for each other.
	c.running.Unlock()
	defer c.running.Lock()
	if !d.moves.fence(keys) {
		c.W.Error(errMoving)
		return
	}
	defer d.moves.unfence(keys)
	d.drain()
	// A client blocked on a queue that leaves would take jobs the export
	// has copied. It is told to try again, not sent to the target with
	// ASK: a move stopped after the target's commit leaves the queue here
	// and a copy there, and a worker sent there would be served the jobs
	// this group still hands out (TestSlotMoveStoppedServesTwice). Its
	// retry finds the queue here, or gone and an ASK.
	d.unblockKeys(keys, errMoving)
	var cmds [][]any
	var sent [][]byte
	for _, k := range keys {
		payload, _, ok := eng.ExportQueue(k)
		if !ok {
			continue
		}
		cmds = append(cmds, []any{"RESTORE-ASKING", string(k), "0", payload})
		sent = append(sent, k)
	}
	if len(cmds) == 0 {
		c.W.Status("NOKEY")
		return
	}
	if err := snd.Send(target, user, password, time.Duration(timeout)*time.Millisecond, cmds); err != nil {
		// Nothing was dropped here: a target that applied some queues holds
		// copies a retry finds (ImportQueue skips what it has).
		c.W.Error(migrateErr(err))
		return
	}
	if !copyOnly {
		for _, k := range sent {
			ticket, err := eng.DropQueue(k)
			if err != nil {
				d.replyErr(c, err)
				return
			}
			c.Ticket = max(c.Ticket, ticket)
		}
	}
	c.W.Status("OK")
}

// migrateErr words a failed send as Redis does: the target's own error
// passed on, or IOERR for one that did not answer.
func migrateErr(err error) string {
	s := err.Error()
	code, _, _ := strings.Cut(s, " ")
	if len(code) >= 3 && strings.Trim(code, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") == "" {
		return "ERR Target instance replied with error: " + s
	}
	return "IOERR error or timeout talking to target instance: " + s
}

// cmdRestoreAsking is RESTORE-ASKING key ttl payload [REPLACE], what
// MIGRATE sends the target: the queue as ExportQueue wrote it, applied as
// one unit; the reply waits for the group to commit it. Routed as after
// ASKING (route.go): the slot is the target's only once the move ends.
func cmdRestoreAsking(d *Dispatcher, c *Client, args [][]byte) {
	eng := d.engineFor(c)
	if eng == nil {
		c.W.Error(errLoading)
		return
	}
	for _, a := range args[4:] {
		if !strings.EqualFold(string(a), "replace") {
			c.W.Error(errSyntax)
			return
		}
	}
	_, ticket, err := eng.ImportQueue(args[1], args[3])
	if err != nil {
		d.replyErr(c, err)
		return
	}
	c.Ticket = ticket
	c.W.Status("OK")
}

// drain waits until every write routed before the fence has run: each
// client's goroutine names its command in inflight, then holds its running
// lock from routing to the end of its handler, so taking the lock of each
// client running a write lets those in flight finish. A client that names
// its command after drain looked reads the fence when it routes (both are
// atomics: one of the two sees the other's store). Reads, and commands
// that wait in their handler (WAIT), are not waited for.
func (d *Dispatcher) drain() {
	all := d.allClients()
	for _, cl := range all {
		if cmd := cl.inflight.Load(); cmd != nil && (cmd.Flags&Write != 0 || cmd.Name == "exec") {
			cl.running.Lock()
			cl.running.Unlock() //nolint:staticcheck // a barrier, not a critical section
		}
	}
}

// RedirectBlocked ends the pops parked here on a queue of a slot this
// address's group no longer owns, with MOVED to its owner's leader, as
// Redis redirects a blocked client when its slot moves: a worker parked on
// an empty queue (nothing to MIGRATE) would otherwise wait where no job
// comes. A pop that came with ASKING to a group importing its slot stays:
// the move is under way. One that did not, on a group marked importing
// because it lost the slot while holding queues of it (ADDSLOTS at
// another group, cluster_slots.go), is sent to the owner too: those queues
// may have a copy there, and one job must not be served from both.
// Called when the slot map changes owners.
func (d *Dispatcher) RedirectBlocked() {
	gs := d.opts.Groups
	if gs == nil {
		return
	}
	all := d.allClients()
	for _, cl := range all {
		cl.mu.Lock()
		b := cl.blocked
		cl.mu.Unlock()
		if b == nil || b.cmd == nil {
			continue
		}
		if slot := commandSlot(b.cmd, b.args); slot >= 0 && gs.Owner(slot) != d.opts.Group && !(b.asked && d.importing(slot)) {
			cl.unblock(d.otherGroup(slot))
		}
	}
}

// unblockKeys ends, with msg, the pops parked on any of keys.
func (d *Dispatcher) unblockKeys(keys [][]byte, msg string) {
	all := d.allClients()
	for _, cl := range all {
		cl.mu.Lock()
		b := cl.blocked
		cl.mu.Unlock()
		if b == nil || b.cmd == nil || !d.moves.anyOf(commandKeys(b.cmd, b.args), keys) {
			continue
		}
		cl.unblock(msg)
	}
}

// anyOf says whether a key of have is one of want.
func (*migrations) anyOf(have, want [][]byte) bool {
	for _, h := range have {
		for _, w := range want {
			if bytes.Equal(h, w) {
				return true
			}
		}
	}
	return false
}
