package commands

import (
	"time"

	"github.com/delayd/delayd/acl"
	"github.com/delayd/delayd/engine"
)

// Block is a client parked in a blocking pop. The connection loop waits for
// whichever comes first (Ready, the timeout, or the client leaving) and calls
// exactly one of Served, TimedOut, Unblock or Gone; the engine decides under
// its lock whether the waiter got a job, so a job is never lost between them.
type Block struct {
	Timeout time.Duration // 0: wait forever

	c         *Client
	unblock   chan string // CLIENT UNBLOCK: "" as a timeout, else an error line
	w         *engine.Waiter
	eng       *engine.Engine
	mode      engine.PopMode   // the reply's shape: DELAY.POP or BLPOP/BRPOP
	move      bool             // BLMOVE, BRPOPLPUSH: the reply is the payload
	many      bool             // DELAY.MPOP: the waiter may hold several jobs (identity.go)
	delivered *engine.Delivery // the job written to the client, if any
	more      []engine.Delivery

	// The command, with its own copy of the arguments, for the permission
	// check made again when a job is there for it (guard).
	d    *Dispatcher
	cmd  *Command
	args [][]byte
}

// Ready fires when the engine served the waiter or released it at shutdown.
func (b *Block) Ready() <-chan struct{} { return b.w.Ready() }

// newBlock parks c in a pop on waiter w; CLIENT UNBLOCK can find it.
func newBlock(c *Client, eng *engine.Engine, w *engine.Waiter, timeout time.Duration, mode engine.PopMode) *Block {
	b := &Block{Timeout: timeout, c: c, unblock: make(chan string, 1), w: w, eng: eng, mode: mode}
	c.mu.Lock()
	c.blocked = b
	c.mu.Unlock()
	return b
}

// done forgets the block: CLIENT UNBLOCK no longer finds it.
func (b *Block) done() {
	b.c.mu.Lock()
	if b.c.blocked == b {
		b.c.blocked = nil
	}
	b.c.mu.Unlock()
}

// Unblocked fires when CLIENT UNBLOCK (or a failover) ends the wait, with
// the error line to reply ("" means as a timeout).
func (b *Block) Unblocked() <-chan string { return b.unblock }

// Unblock ends the wait the way Unblocked asked: the path of a timeout, so
// a job that arrived at the same moment still wins; else a null reply, or
// the error msg.
func (b *Block) Unblock(c *Client, msg string) {
	b.done()
	job, ok := b.eng.CancelWait(b.w)
	if ok || msg == "" || b.w.Refused() {
		b.reply(c, job, ok)
		return
	}
	c.W.Error(msg)
}

// Served writes the job the waiter got, or a null reply if the engine
// released it without one (shutdown).
func (b *Block) Served(c *Client) {
	b.done()
	job, ok := b.w.Result()
	b.reply(c, job, ok)
}

// TimedOut ends the wait. A job that arrived at the same moment still wins.
func (b *Block) TimedOut(c *Client) {
	b.done()
	job, ok := b.eng.CancelWait(b.w)
	b.reply(c, job, ok)
}

// Gone ends the wait of a client that disconnected; a job it was handed in
// the meantime goes back to the head of its ready list.
func (b *Block) Gone() {
	b.done()
	if job, ok := b.eng.CancelWait(b.w); ok {
		b.requeue(job, b.w.More())
	}
}

// requeue hands jobs back to the heads of their ready lists, the last taken
// first, so they end up in the order they were taken.
func (b *Block) requeue(job engine.Delivery, more []engine.Delivery) {
	for i := len(more) - 1; i >= 0; i-- {
		b.eng.Requeue(more[i])
	}
	b.eng.Requeue(job)
}

// WriteFailed hands back the job written to a client whose connection then
// failed, so a job is never delivered to a client that has gone.
func (b *Block) WriteFailed() {
	if b.delivered != nil {
		b.requeue(*b.delivered, b.more)
		b.delivered, b.more = nil, nil
	}
}

// guard makes the engine check c's rights again before it serves the
// block, as Redis 7.2 checks a blocked command's permissions again when a
// key it waits on is ready: a user whose keys or commands were taken away
// meanwhile gets NOPERM, and the job stays for another client.
func (d *Dispatcher) guard(b *Block, cmd *Command, args [][]byte) {
	if b.w == nil {
		return
	}
	b.d, b.cmd, b.args = d, cmd, ownArgs(args)
	name, cats := aclName(cmd, b.args)
	var keys []acl.Key
	for _, k := range commandKeys(cmd, b.args) {
		keys = append(keys, acl.Key{Name: k, Perm: cmd.keyPerm})
	}
	c := b.c
	b.eng.Guard(b.w, func() bool {
		h := c.user.Load()
		if h == nil {
			return true
		}
		u := h.User()
		r, _ := u.Check(name, cats, keys)
		return r == acl.OK
	})
}

// refusal is the NOPERM line for a block the engine refused to serve
// (guard), logged in ACL LOG and counted as a rejected call.
func (b *Block) refusal(c *Client) string {
	b.d.countRejected(b.cmd)
	if msg := b.d.denied(c, b.cmd, b.args); msg != "" {
		return msg
	}
	return errNoPermKey // its rights came back since: the refusal stands
}

func (b *Block) reply(c *Client, job engine.Delivery, ok bool) {
	if !ok && b.d != nil && b.w.Refused() {
		c.W.Error(b.refusal(c))
		return
	}
	if !ok {
		c.W.NullArray()
		return
	}
	b.delivered = &job
	c.Ticket = job.Ticket
	c.woff = job.Ticket // WAIT after a blocking pop covers it
	if b.move {
		c.W.Bulk(job.Payload)
		return
	}
	if b.many {
		b.more = b.w.More()
		if n := len(b.more); n > 0 {
			c.Ticket, c.woff = b.more[n-1].Ticket, b.more[n-1].Ticket // the last pop's record
		}
		writeJobs(c.W, append([]engine.Delivery{job}, b.more...))
		return
	}
	writeJob(c.W, job, b.mode)
}
