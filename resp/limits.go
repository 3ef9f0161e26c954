package resp

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/delayd/delayd/commands"
)

// The per-connection limits Redis has and a server on a network needs:
// protected mode, the idle timeout, and the cap on a client's pending
// output. (The pre-authentication caps on frame sizes are in reader.go.)

// deniedReply is the protected-mode refusal, the dispatcher's text as a
// RESP error.
var deniedReply = []byte("-" + commands.DeniedText + "\r\n")

// OutputLimit caps what a client may have waiting to be sent: the normal
// class of Redis's client-output-buffer-limit.
type OutputLimit struct {
	Hard    int64         // pending bytes past which the client is closed at once (0: none)
	Soft    int64         // pending bytes it may stay above for at most SoftFor (0: none)
	SoftFor time.Duration // how long above Soft is tolerated
}

// defaultPushCap bounds the pushes waiting for a client when no hard limit
// is set: they come from other goroutines, and nothing else would stop a
// MONITOR nobody reads from growing without end.
const defaultPushCap = 8 << 20

// pushCap is the most push bytes one connection may have waiting.
func (l OutputLimit) pushCap() int {
	if l.Hard > 0 {
		return int(min(l.Hard, 1<<40))
	}
	return defaultPushCap
}

// ParseOutputLimit reads Redis's syntax, "class hard soft seconds" repeated
// (classes normal, replica or slave, pubsub; sizes as 64mb). Only the
// normal class applies: delayd has no replicas, and its one channel
// (__redis__:invalidate, for RESP2 tracking redirection) carries only
// invalidations, which a normal client gets as pushes anyway (a MONITOR
// is a normal client in Redis too). It returns the limit and the
// setting as CONFIG GET shows it, in Redis's form with every class.
func ParseOutputLimit(s string) (OutputLimit, string, error) {
	f := strings.Fields(s)
	if len(f)%4 != 0 {
		return OutputLimit{}, "", fmt.Errorf("%q: expected 'class hard soft seconds' groups, e.g. 'normal 64mb 16mb 60'", s)
	}
	classes := map[string][3]int64{
		"normal":  {0, 0, 0},
		"replica": {256 << 20, 64 << 20, 60},
		"pubsub":  {32 << 20, 8 << 20, 60},
	}
	for i := 0; i < len(f); i += 4 {
		class := strings.ToLower(f[i])
		if class == "slave" {
			class = "replica"
		}
		if _, ok := classes[class]; !ok {
			return OutputLimit{}, "", fmt.Errorf("%q: unknown class %q (normal, replica, pubsub)", s, f[i])
		}
		hard, err := commands.ParseMemory(f[i+1])
		if err != nil {
			return OutputLimit{}, "", err
		}
		soft, err := commands.ParseMemory(f[i+2])
		if err != nil {
			return OutputLimit{}, "", err
		}
		secs, err := strconv.ParseInt(f[i+3], 10, 64)
		if err != nil || secs < 0 || secs > 1<<31 {
			return OutputLimit{}, "", fmt.Errorf("%q: %q is not a number of seconds", s, f[i+3])
		}
		classes[class] = [3]int64{hard, soft, secs}
	}
	var b strings.Builder
	for i, class := range []string{"normal", "slave", "pubsub"} {
		key := class
		if key == "slave" {
			key = "replica"
		}
		v := classes[key]
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s %d %d %d", class, v[0], v[1], v[2])
	}
	n := classes["normal"]
	return OutputLimit{Hard: n[0], Soft: n[1], SoftFor: time.Duration(n[2]) * time.Second}, b.String(), nil
}

// denied refuses a client from another host while protected mode is on and
// the default user needs no password, as Redis does on accept; the
// dispatcher decides (Refuses), for the HTTP side too. Unix sockets and
// loopback addresses are always let in.
func (s *Server) denied(nc net.Conn) bool {
	ta, ok := nc.RemoteAddr().(*net.TCPAddr)
	if !ok || !s.d.Refuses(ta.AddrPort().Addr()) {
		return false
	}
	s.d.Rejected.Add(1)
	nc.SetWriteDeadline(time.Now().Add(time.Second))
	nc.Write(deniedReply)
	return true
}

// armIdle starts the idle clock before the connection waits for a command:
// the read returns a timeout once --timeout passes. A MONITOR is never idle
// (Redis spares it too); a blocked pop does not come here.
func (cn *conn) armIdle(c *commands.Client) {
	d := cn.s.opts.IdleTimeout
	if d <= 0 {
		return
	}
	if c.Monitoring() {
		cn.disarmIdle()
		return
	}
	cn.nc.SetReadDeadline(time.Now().Add(d))
	cn.idleArmed = true
	cn.rewake()
}

// disarmIdle clears the idle deadline (before a blocked pop's reader
// reads, which must see only Close's and kill's deadlines).
func (cn *conn) disarmIdle() {
	if !cn.idleArmed {
		return
	}
	cn.idleArmed = false
	cn.nc.SetReadDeadline(time.Time{})
	cn.rewake()
}

// rewake restores the "now" deadline Server.Close or a kill may have set
// just before ours replaced it: both set their flag first, then the
// deadline, so one of us sees the other.
func (cn *conn) rewake() {
	if cn.closing.Load() || cn.killed.Load() {
		cn.nc.SetReadDeadline(time.Now())
	}
}

// idleExpired reports whether err is the idle deadline passing, not a
// close or kill waking the reader.
func (cn *conn) idleExpired(err error) bool {
	return cn.idleArmed && isTimeout(err) && !cn.closing.Load() && !cn.killed.Load()
}

// overLimit reports whether the replies buffered now pass the hard limit;
// the caller drops them and closes the connection, as Redis does.
func (cn *conn) overLimit() bool {
	h := cn.s.opts.OutputLimit.Hard
	if h <= 0 || int64(len(cn.w.buf)) <= h {
		return false
	}
	cn.s.log.Warn().Str("addr", cn.nc.RemoteAddr().String()).Int("pending", len(cn.w.buf)).Int64("limit", h).
		Msg("client closed for overcoming of output buffer limits")
	cn.w.buf = nil
	return true
}

// write sends a batch of replies. Above the soft limit the client gets
// SoftFor to take them, and is closed if it does not: a reader that stalls
// holds its replies' memory no longer than that.
func (cn *conn) write(b []byte) error {
	cn.writing.Store(int64(len(b)))
	defer cn.writing.Store(0)
	l := cn.s.opts.OutputLimit
	if l.Soft <= 0 || int64(len(b)) <= l.Soft {
		_, err := cn.nc.Write(b)
		return err
	}
	cn.nc.SetWriteDeadline(time.Now().Add(max(l.SoftFor, time.Second)))
	_, err := cn.nc.Write(b)
	if !cn.killed.Load() {
		cn.nc.SetWriteDeadline(time.Time{})
	}
	if err != nil && isTimeout(err) && !cn.killed.Load() {
		cn.s.log.Warn().Str("addr", cn.nc.RemoteAddr().String()).Int("pending", len(b)).Int64("soft_limit", l.Soft).
			Dur("for_ms", l.SoftFor).Msg("client closed for overcoming of output buffer limits")
	}
	return err
}

// overflowing reports whether the pushes waiting, with those being
// written, pass the hard limit, or have stayed above the soft one too
// long. Called with mu held, on every push.
func (ob *outbox) overflowing() bool {
	n := len(ob.buf) + ob.inflight
	if n > ob.max {
		return true
	}
	if ob.lim.Soft <= 0 || int64(n) <= ob.lim.Soft {
		ob.softSince = time.Time{}
		return false
	}
	now := time.Now()
	if ob.softSince.IsZero() {
		ob.softSince = now
		return false
	}
	return now.Sub(ob.softSince) > ob.lim.SoftFor
}
