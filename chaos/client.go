package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// A client library's retries and a history do not mix: go-redis's
// ClusterClient resends a command after a timeout, a lost connection,
// TRYAGAIN or CLUSTERDOWN, and returns the last attempt's reply. If an
// earlier attempt ran, the history would hold one operation whose reply
// tells of the second effect only: a cancel whose first attempt removed the
// job reports 0, an at-most-once pop hides the job its first attempt took.
//
// Guard keeps the retries that are safe and stops the others. It counts a
// call's attempts at the node clients (a hook sees each one), and once an
// attempt ended in a way that leaves its effect unknown, it refuses to send
// another, so the call ends Unknown. Redirections (MOVED, ASK) and
// refusals that prove nothing ran (CLUSTERDOWN, LOADING, a dial that never
// connected) are retried as go-redis would: that is how a cluster client
// follows a failover, and what the test is about.

// ErrNotRetried ends a call whose earlier attempt may have run.
var ErrNotRetried = errors.New("chaos: not retried: an earlier attempt may have run")

// Guard sets o so that calls made with Do (or Track) are retried
// only when no earlier attempt can have run: node clients do not retry on
// their own (MaxRetries -1) and each carries the hook that stops a retry.
func Guard(o *redis.ClusterOptions) {
	o.MaxRetries = -1
	newClient := o.NewClient
	o.NewClient = func(opt *redis.Options) *redis.Client {
		var c *redis.Client
		if newClient != nil {
			c = newClient(opt)
		} else {
			c = redis.NewClient(opt)
		}
		c.AddHook(retryGuard{})
		return c
	}
}

// GuardClient installs the same hook on a single-node client; its options
// must have MaxRetries -1, or its own retries happen inside one attempt,
// where the hook cannot see them.
func GuardClient(c *redis.Client) { c.AddHook(retryGuard{}) }

// Call follows one logical call through its attempts.
type Call struct {
	cmd redis.Cmder // the command followed; the client's own commands (COMMAND, CLUSTER SLOTS) made under the same context are not

	mu        sync.Mutex
	attempts  int
	ambiguous error // the first attempt whose effect is unknown
}

type callKey struct{}

// Track returns a context under which cmd's attempts are followed by the
// returned Call; run cmd with the ClusterClient's Process.
func Track(ctx context.Context, cmd redis.Cmder) (context.Context, *Call) {
	c := &Call{cmd: cmd}
	return context.WithValue(ctx, callKey{}, c), c
}

// Processor is what runs a command: a redis.ClusterClient or a redis.Client.
type Processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// Do runs the command args through p, followed by a Call, and returns it
// with its outcome.
func Do(ctx context.Context, p Processor, args ...any) (*redis.Cmd, Outcome) {
	cmd := redis.NewCmd(ctx, args...)
	tctx, call := Track(ctx, cmd)
	err := p.Process(tctx, cmd)
	return cmd, call.Outcome(err)
}

// Attempts is how many times the command was sent (or tried to be).
func (c *Call) Attempts() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.attempts
}

// Outcome is what err, the call's final error, says about its effect,
// given every attempt: OK when it returned a reply (the Guard made sure
// no earlier attempt ran), Fail when every attempt was refused before it
// ran, Unknown otherwise.
func (c *Call) Outcome(err error) Outcome {
	c.mu.Lock()
	amb := c.ambiguous
	c.mu.Unlock()
	o := Classify(err)
	if o == Fail && amb != nil {
		return Unknown
	}
	return o
}

// Classify says what one error means for the effect of the command that
// got it. nil and redis.Nil are replies: OK. Server errors are refusals
// (Fail: MOVED, ASK, CLUSTERDOWN, LOADING, a syntax error, UNBLOCKED for a
// pop released without a job) except TRYAGAIN and a reply that says the
// write may not have been committed (a leader that lost leadership with
// the entry in flight: a new leader may still commit it), which are
// Unknown. A dial that failed, a closed client and an exhausted pool sent
// nothing: Fail. Everything else (timeouts, EOF, resets, a context's
// deadline) may have happened after the server ran the command: Unknown.
func Classify(err error) Outcome {
	if err == nil || errors.Is(err, redis.Nil) {
		return OK
	}
	if errors.Is(err, ErrNotRetried) {
		return Unknown
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return Fail
	}
	if errors.Is(err, redis.ErrClosed) || errors.Is(err, redis.ErrPoolTimeout) {
		return Fail
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		msg := rerr.Error()
		if strings.HasPrefix(msg, "TRYAGAIN") || strings.Contains(msg, "may not have been committed") {
			return Unknown
		}
		return Fail
	}
	return Unknown
}

// retryGuard is the hook on each node client.
type retryGuard struct{}

func (retryGuard) DialHook(next redis.DialHook) redis.DialHook { return next }

func (retryGuard) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (retryGuard) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c, _ := ctx.Value(callKey{}).(*Call)
		if c == nil || c.cmd != cmd {
			return next(ctx, cmd)
		}
		c.mu.Lock()
		amb := c.ambiguous
		c.mu.Unlock()
		if amb != nil {
			err := fmt.Errorf("%w (attempt %d after: %v)", ErrNotRetried, c.Attempts()+1, amb)
			cmd.SetErr(err)
			return err
		}
		err := next(ctx, cmd)
		c.mu.Lock()
		c.attempts++
		if Classify(err) == Unknown && c.ambiguous == nil {
			c.ambiguous = err
		}
		c.mu.Unlock()
		return err
	}
}
