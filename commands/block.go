package commands

import (
	"time"

	"github.com/delayd/delayd/engine"
)

// Block is a client parked in a blocking pop. The connection loop waits for
// whichever comes first (Ready, the timeout, or the client leaving) and calls
// exactly one of Served, TimedOut or Gone; the engine decides under its lock
// whether the waiter got a job, so a job is never lost between the three.
type Block struct {
	Timeout time.Duration // 0: wait forever

	w         *engine.Waiter
	eng       *engine.Engine
	mode      engine.PopMode   // the reply's shape: DELAY.POP or BLPOP/BRPOP
	move      bool             // BLMOVE, BRPOPLPUSH: the reply is the payload
	delivered *engine.Delivery // the job written to the client, if any
}

// Ready fires when the engine served the waiter or released it at shutdown.
func (b *Block) Ready() <-chan struct{} { return b.w.Ready() }

// Served writes the job the waiter got, or a null reply if the engine
// released it without one (shutdown).
func (b *Block) Served(c *Client) {
	job, ok := b.w.Result()
	b.reply(c, job, ok)
}

// TimedOut ends the wait. A job that arrived at the same moment still wins.
func (b *Block) TimedOut(c *Client) {
	job, ok := b.eng.CancelWait(b.w)
	b.reply(c, job, ok)
}

// Gone ends the wait of a client that disconnected; a job it was handed in
// the meantime goes back to the head of its ready list.
func (b *Block) Gone() {
	if job, ok := b.eng.CancelWait(b.w); ok {
		b.eng.Requeue(job)
	}
}

// WriteFailed hands back the job written to a client whose connection then
// failed, so a job is never delivered to a client that has gone.
func (b *Block) WriteFailed() {
	if b.delivered != nil {
		b.eng.Requeue(*b.delivered)
		b.delivered = nil
	}
}

func (b *Block) reply(c *Client, job engine.Delivery, ok bool) {
	if !ok {
		c.W.NullArray()
		return
	}
	b.delivered = &job
	c.Ticket = job.Ticket
	if b.move {
		c.W.Bulk(job.Payload)
		return
	}
	writeJob(c.W, job, b.mode)
}
