package commands

import (
	"errors"
	"math"
	"strconv"
	"strings"
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
	took time.Duration // the handler's time, counted when the block ends
	// asked: the pop came after ASKING, to a group importing its slot: a
	// change of owners elsewhere leaves it parked (RedirectBlocked).
	asked bool

	quiet bool // CLIENT REPLY OFF or SKIP: the connection drops the reply (Quiet)
}

// Quiet reports whether the pop's reply must be dropped (CLIENT REPLY OFF
// or SKIP before it).
func (b *Block) Quiet() bool { return b.quiet }

// Ready fires when the engine served the waiter or released it at shutdown.
func (b *Block) Ready() <-chan struct{} { return b.w.Ready() }

// newBlock parks c in a pop on waiter w; CLIENT UNBLOCK can find it.
func newBlock(c *Client, eng *engine.Engine, w *engine.Waiter, timeout time.Duration, mode engine.PopMode) *Block {
	b := &Block{Timeout: timeout, c: c, unblock: make(chan string, 1), w: w, eng: eng, mode: mode, asked: c.asked}
	c.mu.Lock()
	c.blocked = b
	c.mu.Unlock()
	// The engine parked w while it led; if it has followed since, the role
	// change's UnblockAll may have run before c was findable here, and a
	// waiter on a follower is never served: end it as UnblockAll would.
	if eng.Following() {
		c.unblock(ErrUnblockedRole)
	}
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
	b.account(c) // an error: a failed call, as Redis counts it
}

// account counts the blocked call once it is answered (not refused).
func (b *Block) account(c *Client) {
	if b.d != nil {
		b.d.countCommand(b.cmd, b.took)
		b.d.ran(c, b.cmd)
	}
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
func (d *Dispatcher) guard(b *Block, cmd *Command, args [][]byte, took time.Duration) {
	if b.w == nil {
		return
	}
	b.d, b.cmd, b.args, b.took = d, cmd, ownArgs(args), took
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
		b.d.newErrors(c)
		return
	}
	defer b.account(c)
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

const errTimeoutRange = "ERR timeout is out of range"

// parseTimeout parses a blocking command's timeout in seconds as Redis 7.2's
// getTimeoutFromObjectOrReply does: a number strtold reads whole (hex,
// "inf" and exponents included), times 1000, rounded up to a millisecond;
// 0 means forever. A timeout that would end past the largest int64 ms is
// out of range, as there; one beyond what a Duration holds (292 years) but
// within that range is kept as forever.
func parseTimeout(b []byte) (time.Duration, string) {
	f, ok := parseLongDouble(b)
	if !ok {
		return 0, errNotFloat
	}
	ms := f * 1000
	if ms > math.MaxInt64 {
		return 0, errTimeoutRange
	}
	ms = math.Ceil(ms) // -0.0001 s is -0 ms: forever, as in Redis
	if ms < 0 {
		return 0, errNegTimeout
	}
	if ms == 0 {
		return 0, ""
	}
	if ms > float64(math.MaxInt64-time.Now().UnixMilli()) {
		return 0, errTimeoutRange
	}
	if ms >= math.MaxInt64/float64(time.Millisecond) {
		return 0, ""
	}
	return time.Duration(ms) * time.Millisecond, ""
}

// parseLongDouble reads a number as Redis's string2ld reads it with C's
// strtold: decimal or hex ("0x10", "0x1.8p3"), "inf"/"infinity" in any case,
// an optional sign; no space around it, no NaN, no digit separators (which
// Go's ParseFloat takes and C does not). strtold's long double is wider than
// a float64: a value beyond a float64 is ±Inf here (out of range either
// way), and a nonzero one below its smallest is kept nonzero, so that it
// still rounds up to a millisecond.
func parseLongDouble(b []byte) (float64, bool) {
	s := string(b)
	if s == "" || strings.ContainsAny(s[:1], " \t\n\v\f\r") || strings.ContainsRune(s, '_') {
		return 0, false
	}
	sign, body := "", s
	if body[0] == '+' || body[0] == '-' {
		sign, body = body[:1], body[1:]
	}
	mant := body
	if len(body) > 2 && body[0] == '0' && (body[1] == 'x' || body[1] == 'X') {
		if i := strings.IndexAny(body, "pP"); i >= 0 {
			mant = body[2:i]
		} else {
			mant, body = body[2:], body+"p0" // C's hex needs no exponent, Go's does
		}
	} else if i := strings.IndexAny(body, "eE"); i >= 0 {
		mant = body[:i]
	}
	f, err := strconv.ParseFloat(sign+body, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) || math.IsNaN(f) {
		return 0, false
	}
	if f == 0 && strings.ContainsAny(mant, "123456789abcdefABCDEF") {
		f = math.SmallestNonzeroFloat64 // underflowed in a float64, not in a long double
		if sign == "-" {
			f = -f
		}
	}
	return f, true
}
