package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// What a reply should be, for expect and chain:
//
//	nil            a null reply (go-redis: redis.Nil)
//	"text"         a simple or bulk string equal to text
//	int, int64     an integer reply
//	[]any          an array whose elements match one by one
//	errIs("...")   an error reply equal to the text (without the leading '-')
//	errPrefix("")  an error reply starting with the text
//	anyReply{}     any reply that is not an error
//	check(func)    a custom check returning "" when the reply is right
type (
	errIs     string
	errPrefix string
	anyReply  struct{}
	check     func(reply any) string
)

// anyErr matches any error reply.
var anyErr = errPrefix("")

// opTimeout bounds every command the helpers send.
const opTimeout = 5 * time.Second

// ctxT returns a context cancelled after d or at the end of the test.
func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// expect sends args and checks the reply against want; it returns the reply.
func expect(t testing.TB, c *redis.Client, want any, args ...any) any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	got, err := c.Do(ctx, args...).Result()
	if msg := match(want, got, err); msg != "" {
		t.Errorf("%s: %s", showCmd(args), msg)
	}
	return got
}

// step is one command of a chain and the reply it should get.
type step struct {
	args []any
	want any
}

// cmd builds a step: cmd(want, args...).
func cmd(want any, args ...any) step { return step{args: args, want: want} }

// chain runs steps in order on one client.
func chain(t testing.TB, c *redis.Client, steps ...step) {
	t.Helper()
	for _, s := range steps {
		expect(t, c, s.want, s.args...)
	}
}

// do sends args and fails the test on an error reply (redis.Nil included).
func do(t testing.TB, c *redis.Client, args ...any) any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	got, err := c.Do(ctx, args...).Result()
	if err != nil {
		t.Fatalf("%s: unexpected error %v", showCmd(args), err)
	}
	return got
}

// match compares a go-redis result with want and describes the difference.
func match(want, got any, err error) string {
	switch w := want.(type) {
	case errIs:
		if err == nil || errors.Is(err, redis.Nil) {
			return fmt.Sprintf("want error %q, got %s", string(w), show(got, err))
		}
		if err.Error() != string(w) {
			return fmt.Sprintf("want error %q, got error %q", string(w), err.Error())
		}
		return ""
	case errPrefix:
		if err == nil || errors.Is(err, redis.Nil) {
			return fmt.Sprintf("want an error starting %q, got %s", string(w), show(got, err))
		}
		if !strings.HasPrefix(err.Error(), string(w)) {
			return fmt.Sprintf("want an error starting %q, got error %q", string(w), err.Error())
		}
		return ""
	case nil:
		if errors.Is(err, redis.Nil) {
			return ""
		}
		return "want a null reply, got " + show(got, err)
	}
	if err != nil {
		return fmt.Sprintf("want %s, got %s", showValue(want), show(got, err))
	}
	if msg := matchValue(want, got); msg != "" {
		return fmt.Sprintf("want %s, got %s (%s)", showValue(want), showValue(got), msg)
	}
	return ""
}

// matchValue compares a non-error value (elements of arrays may be nil).
func matchValue(want, got any) string {
	switch w := want.(type) {
	case anyReply:
		return ""
	case check:
		return w(got)
	case nil:
		if got != nil {
			return "want null, got " + showValue(got)
		}
		return ""
	case string:
		g, ok := got.(string)
		if !ok {
			return fmt.Sprintf("want string %q, got %T", w, got)
		}
		if g != w {
			return fmt.Sprintf("want %s, got %s", showValue(w), showValue(g))
		}
		return ""
	case int:
		return matchValue(int64(w), got)
	case int64:
		g, ok := got.(int64)
		if !ok {
			return fmt.Sprintf("want integer %d, got %T %s", w, got, showValue(got))
		}
		if g != w {
			return fmt.Sprintf("want %d, got %d", w, g)
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok {
			return fmt.Sprintf("want an array, got %T", got)
		}
		if len(g) != len(w) {
			return fmt.Sprintf("want %d elements, got %d", len(w), len(g))
		}
		for i := range w {
			if msg := matchValue(w[i], g[i]); msg != "" {
				return fmt.Sprintf("element %d: %s", i, msg)
			}
		}
		return ""
	}
	if !reflect.DeepEqual(want, got) {
		return "values differ"
	}
	return ""
}

// show describes a result for a failure message.
func show(got any, err error) string {
	if errors.Is(err, redis.Nil) {
		return "a null reply"
	}
	if err != nil {
		return fmt.Sprintf("error %q", err.Error())
	}
	return showValue(got)
}

// showValue prints a reply, shortening long strings.
func showValue(v any) string {
	switch x := v.(type) {
	case string:
		if len(x) > 60 {
			return fmt.Sprintf("%q...(%d bytes)", x[:40], len(x))
		}
		return strconv.Quote(x)
	case []byte:
		return showValue(string(x))
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = showValue(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case nil:
		return "nil"
	case anyReply:
		return "any reply"
	case check:
		return "a reply passing its check"
	}
	return fmt.Sprintf("%v", v)
}

// showCmd prints a command line for a failure message.
func showCmd(args []any) string {
	parts := make([]string, len(args))
	for i, a := range args {
		switch x := a.(type) {
		case string:
			if len(x) > 40 || strings.ContainsAny(x, " \r\n\t\"") || x == "" || !isPrint(x) {
				parts[i] = showValue(x)
			} else {
				parts[i] = x
			}
		case []byte:
			parts[i] = showValue(string(x))
		default:
			parts[i] = fmt.Sprint(a)
		}
	}
	return strings.Join(parts, " ")
}

func isPrint(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// fields turns a field/value reply (a flat array in RESP2, a map in RESP3)
// into a map keyed by field name.
func fields(t testing.TB, what string, v any) map[string]any {
	t.Helper()
	m := map[string]any{}
	switch x := v.(type) {
	case []any:
		if len(x)%2 != 0 {
			t.Fatalf("%s: want a field/value array, got %d elements: %s", what, len(x), showValue(x))
		}
		for i := 0; i < len(x); i += 2 {
			k, ok := x[i].(string)
			if !ok {
				t.Fatalf("%s: field %d is %T, want a string: %s", what, i/2, x[i], showValue(x))
			}
			m[k] = x[i+1]
		}
	case map[any]any:
		for k, val := range x {
			m[fmt.Sprint(k)] = val
		}
	case map[string]any:
		for k, val := range x {
			m[k] = val
		}
	default:
		t.Fatalf("%s: want a field/value reply, got %T %s", what, v, showValue(v))
	}
	return m
}

// asInt reads an integer reply, also accepting an integer written as a
// string (a field value in a flat array may be either).
func asInt(t testing.TB, what string, v any) int64 {
	t.Helper()
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		if err == nil {
			return n
		}
	}
	t.Fatalf("%s: want an integer, got %T %s", what, v, showValue(v))
	return 0
}

// stats returns DELAY.STATS key as counts.
func stats(t testing.TB, c *redis.Client, key string) (delayed, ready, reserved int64) {
	t.Helper()
	m := fields(t, "DELAY.STATS "+key, do(t, c, "DELAY.STATS", key))
	for _, f := range []string{"delayed", "ready", "reserved"} {
		if _, ok := m[f]; !ok {
			t.Fatalf("DELAY.STATS %s: no field %q in %v", key, f, m)
		}
	}
	return asInt(t, "delayed", m["delayed"]), asInt(t, "ready", m["ready"]), asInt(t, "reserved", m["reserved"])
}

// expectStats checks DELAY.STATS key.
func expectStats(t testing.TB, c *redis.Client, key string, delayed, ready, reserved int64) {
	t.Helper()
	d, r, res := stats(t, c, key)
	if d != delayed || r != ready || res != reserved {
		t.Errorf("DELAY.STATS %s: want delayed=%d ready=%d reserved=%d, got delayed=%d ready=%d reserved=%d",
			key, delayed, ready, reserved, d, r, res)
	}
}

// popResult is the outcome of a DELAY.POP sent from another goroutine.
type popResult struct {
	reply []any
	err   error
	at    time.Time
}

// popAsync sends DELAY.POP args... on c from a goroutine and delivers the
// result (bounded by limit) on the returned channel.
func popAsync(c *redis.Client, limit time.Duration, args ...any) <-chan popResult {
	ch := make(chan popResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		defer cancel()
		v, err := c.Do(ctx, append([]any{"DELAY.POP"}, args...)...).Result()
		r := popResult{err: err, at: time.Now()}
		if err == nil {
			if a, ok := v.([]any); ok {
				r.reply = a
			} else {
				r.err = fmt.Errorf("DELAY.POP replied %T %s, want an array", v, showValue(v))
			}
		}
		ch <- r
	}()
	return ch
}

// waitPop receives a popResult or fails after limit.
func waitPop(t testing.TB, ch <-chan popResult, limit time.Duration) popResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(limit):
		t.Fatalf("DELAY.POP gave no reply within %v", limit)
		return popResult{}
	}
}

// popTriple checks that r is [key, id, payload] with the given key and
// payload (and id, unless id is "") and returns the id.
func popTriple(t testing.TB, r popResult, key, id, payload string) string {
	t.Helper()
	if r.err != nil {
		t.Fatalf("DELAY.POP: want [%q, id, %q], got %s", key, payload, show(nil, r.err))
	}
	want := []any{key, anyReply{}, payload}
	if id != "" {
		want[1] = id
	}
	if msg := matchValue(want, r.reply); msg != "" {
		t.Fatalf("DELAY.POP: want %s, got %s (%s)", showValue(want), showValue(r.reply), msg)
	}
	got, _ := r.reply[1].(string)
	return got
}

// sortedKeys is for stable failure messages.
func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// ---- raw RESP over TCP ----

// rawConn is a bare TCP connection for what a client library hides: inline
// commands, malformed frames, the exact bytes of a reply.
type rawConn struct {
	t testing.TB
	c net.Conn
	r *bufio.Reader
}

func (s *server) dialRaw(t testing.TB) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", s.Addr(), 2*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", s.Addr(), err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, r: bufio.NewReader(c)}
}

// write sends raw bytes.
func (rc *rawConn) write(s string) {
	rc.t.Helper()
	_ = rc.c.SetWriteDeadline(time.Now().Add(opTimeout))
	if _, err := io.WriteString(rc.c, s); err != nil {
		rc.t.Fatalf("write %q: %v", s, err)
	}
}

// send sends args as a RESP array of bulk strings.
func (rc *rawConn) send(args ...string) {
	rc.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	rc.write(b.String())
}

// readLine reads one CRLF-terminated line (CRLF removed).
func (rc *rawConn) readLine() string {
	rc.t.Helper()
	_ = rc.c.SetReadDeadline(time.Now().Add(opTimeout))
	line, err := rc.r.ReadString('\n')
	if err != nil {
		rc.t.Fatalf("read a reply line: %v (read so far %q)", err, line)
	}
	return strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
}

// tryReadLine is readLine returning the error instead of failing.
func (rc *rawConn) tryReadLine() (string, error) {
	_ = rc.c.SetReadDeadline(time.Now().Add(opTimeout))
	line, err := rc.r.ReadString('\n')
	return strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r"), err
}

// read reads one reply of any RESP2/RESP3 type.
func (rc *rawConn) read() resp {
	rc.t.Helper()
	_ = rc.c.SetReadDeadline(time.Now().Add(opTimeout))
	v, err := readResp(rc.r)
	if err != nil {
		rc.t.Fatalf("read a reply: %v", err)
	}
	return v
}

// expectClosed checks that the server closes the connection within limit
// (reading nothing more than an optional trailing reply).
func (rc *rawConn) expectClosed(limit time.Duration) {
	rc.t.Helper()
	_ = rc.c.SetReadDeadline(time.Now().Add(limit))
	rest, err := io.ReadAll(rc.r)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		rc.t.Fatalf("connection still open %v later (then read %q)", limit, rest)
	}
	if len(rest) > 0 {
		rc.t.Errorf("read %q before the close, want nothing", rest)
	}
}

// resp is one parsed reply.
type resp struct {
	kind  byte // '+', '-', ':', '$', '*', '%', '_', '~', '>', ',', '#', '(', '=', '!', '|'
	str   string
	n     int64
	null  bool
	elems []resp // arrays; maps as key, value, key, value...
}

func (r resp) String() string {
	switch {
	case r.null:
		return "(null)"
	case r.kind == ':':
		return strconv.FormatInt(r.n, 10)
	case r.kind == '*' || r.kind == '%' || r.kind == '~' || r.kind == '>' || r.kind == '|':
		parts := make([]string, len(r.elems))
		for i, e := range r.elems {
			parts[i] = e.String()
		}
		return string(r.kind) + "[" + strings.Join(parts, " ") + "]"
	}
	return string(r.kind) + strconv.Quote(r.str)
}

// mapOf returns a RESP3 map (or flat RESP2 array) as field -> value.
func (r resp) mapOf() map[string]resp {
	m := map[string]resp{}
	for i := 0; i+1 < len(r.elems); i += 2 {
		m[r.elems[i].str] = r.elems[i+1]
	}
	return m
}

func readResp(r *bufio.Reader) (resp, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return resp{}, fmt.Errorf("%w (partial %q)", err, line)
	}
	if len(line) < 3 || !strings.HasSuffix(line, "\r\n") {
		return resp{}, fmt.Errorf("bad reply line %q", line)
	}
	kind, body := line[0], line[1:len(line)-2]
	v := resp{kind: kind}
	switch kind {
	case '+', '-', ',', '#', '(':
		v.str = body
	case ':':
		v.n, err = strconv.ParseInt(body, 10, 64)
	case '_':
		v.null = true
	case '$', '=', '!':
		n, err := strconv.Atoi(body)
		if err != nil {
			return v, fmt.Errorf("bad length in %q", line)
		}
		if n < 0 {
			v.null = true
			return v, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return v, err
		}
		v.str = string(buf[:n])
	case '*', '~', '>', '%', '|':
		n, err := strconv.Atoi(body)
		if err != nil {
			return v, fmt.Errorf("bad length in %q", line)
		}
		if n < 0 {
			v.null = true
			return v, nil
		}
		if kind == '%' || kind == '|' {
			n *= 2
		}
		for i := 0; i < n; i++ {
			e, err := readResp(r)
			if err != nil {
				return v, err
			}
			v.elems = append(v.elems, e)
		}
	default:
		return v, fmt.Errorf("unknown reply type in %q", line)
	}
	return v, err
}
