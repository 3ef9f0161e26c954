package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/redcon"
)

// fakeNode is a one-node "cluster" owning every slot, whose answers to
// DELAY.CANCEL follow a script, one entry per attempt: a RESP error line
// ("-TRYAGAIN ..."), "close" (drop the connection without a reply), or an
// integer reply ("1").
type fakeNode struct {
	srv  *redcon.Server
	addr string

	mu       sync.Mutex
	script   []string
	attempts int
}

func init() { redis.SetLogger(quiet{}) }

// quiet drops go-redis's log lines ("info for cmd=delay.cancel not found").
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func newFakeNode(t *testing.T) *fakeNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &fakeNode{addr: ln.Addr().String()}
	host, portS, _ := net.SplitHostPort(n.addr)
	port, _ := strconv.Atoi(portS)
	n.srv = redcon.NewServer("", func(conn redcon.Conn, cmd redcon.Command) {
		switch strings.ToLower(string(cmd.Args[0])) {
		case "cluster": // SLOTS: all 16384 slots here
			conn.WriteArray(1)
			conn.WriteArray(3)
			conn.WriteInt(0)
			conn.WriteInt(16383)
			conn.WriteArray(3)
			conn.WriteBulkString(host)
			conn.WriteInt(port)
			conn.WriteBulkString(strings.Repeat("a", 40))
		case "command":
			conn.WriteArray(0)
		case "hello":
			conn.WriteError("ERR unknown command 'HELLO'")
		case "delay.cancel":
			n.mu.Lock()
			n.attempts++
			step := "1"
			if len(n.script) > 0 {
				step, n.script = n.script[0], n.script[1:]
			}
			n.mu.Unlock()
			switch {
			case step == "close":
				conn.Close()
			case strings.HasPrefix(step, "-"):
				conn.WriteError(step[1:])
			default:
				v, _ := strconv.Atoi(step)
				conn.WriteInt(v)
			}
		default:
			conn.WriteString("OK")
		}
	}, nil, nil)
	go func() { _ = n.srv.Serve(ln) }()
	t.Cleanup(func() { n.srv.Close() })
	return n
}

func (n *fakeNode) run(script ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.script, n.attempts = script, 0
}

func (n *fakeNode) sent() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.attempts
}

func guardedClient(t *testing.T, addrs ...string) *redis.ClusterClient {
	t.Helper()
	o := &redis.ClusterOptions{
		Addrs:           addrs,
		Protocol:        2,
		MaxRedirects:    8,
		MinRetryBackoff: time.Millisecond,
		MaxRetryBackoff: 2 * time.Millisecond,
		DialTimeout:     time.Second,
		ReadTimeout:     time.Second,
		DisableIdentity: true,
	}
	Guard(o)
	c := redis.NewClusterClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}

func TestGuardStopsOnlyUnsafeRetries(t *testing.T) {
	n := newFakeNode(t)
	c := guardedClient(t, n.addr)
	cases := []struct {
		script   []string
		outcome  Outcome
		attempts int
	}{
		{[]string{"1"}, OK, 1},
		// Refused before running: go-redis retries, and the reply counts.
		{[]string{"-CLUSTERDOWN The cluster is down", "1"}, OK, 2},
		{[]string{"-LOADING delayd is loading the dataset in memory", "1"}, OK, 2},
		{[]string{"-MOVED 1234 " + n.addr, "1"}, OK, 2},
		// May have run: no second attempt, the call is Unknown.
		{[]string{"-TRYAGAIN the write may not have been committed", "1"}, Unknown, 1},
		{[]string{"close", "1"}, Unknown, 1},
		{[]string{"-CLUSTERDOWN The cluster is down", "close", "1"}, Unknown, 2},
		// A plain refusal is not retried by go-redis at all.
		{[]string{"-ERR syntax error"}, Fail, 1},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.script, ","), func(t *testing.T) {
			n.run(tc.script...)
			cmd := redis.NewCmd(context.Background(), "DELAY.CANCEL", "q", "j1")
			ctx, call := Track(context.Background(), cmd)
			err := c.Process(ctx, cmd)
			if got := call.Outcome(err); got != tc.outcome {
				t.Fatalf("outcome %v (err %v), want %v", got, err, tc.outcome)
			}
			if tc.outcome == OK && cmd.Val() != int64(1) {
				t.Fatalf("reply %v, want 1", cmd.Val())
			}
			if n.sent() != tc.attempts || call.Attempts() != tc.attempts {
				t.Fatalf("server saw %d attempts, the call counted %d, want %d (err %v)",
					n.sent(), call.Attempts(), tc.attempts, err)
			}
		})
	}

	// Without Track the guard is out of the way, and go-redis resends
	// after TRYAGAIN: what the guard exists to stop.
	n.run("-TRYAGAIN the write may not have been committed", "1")
	if err := c.Do(context.Background(), "DELAY.CANCEL", "q", "j1").Err(); err != nil || n.sent() != 2 {
		t.Fatalf("untracked call: %v after %d attempts", err, n.sent())
	}
}

func TestGuardDeadNodeIsFail(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	c := guardedClient(t, dead)
	cmd, got := Do(context.Background(), c, "DELAY.CANCEL", "q", "j1")
	if got != Fail {
		t.Fatalf("outcome %v for %v, want fail: nothing was ever sent", got, cmd.Err())
	}
}

type redisErr string

func (e redisErr) Error() string { return string(e) }
func (redisErr) RedisError()     {}

func TestClassify(t *testing.T) {
	for err, want := range map[error]Outcome{
		nil:                                 OK,
		redis.Nil:                           OK,
		redisErr("MOVED 12 127.0.0.1:7000"): Fail,
		redisErr("CLUSTERDOWN The cluster is down"):                               Fail,
		redisErr("UNBLOCKED force unblock from blocking operation"):               Fail,
		redisErr("TRYAGAIN Multiple keys request during rehashing"):               Unknown,
		redisErr("ERR the write may not have been committed: leadership changed"): Unknown,
		&net.OpError{Op: "dial", Err: errors.New("connection refused")}:           Fail,
		&net.OpError{Op: "read", Err: errors.New("connection reset by peer")}:     Unknown,
		io.EOF:                                   Unknown,
		context.DeadlineExceeded:                 Unknown,
		redis.ErrClosed:                          Fail,
		fmt.Errorf("wrapped: %w", ErrNotRetried): Unknown,
	} {
		if got := Classify(err); got != want {
			t.Errorf("Classify(%v) = %v, want %v", err, got, want)
		}
	}
}
