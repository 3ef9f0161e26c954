package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/rs/zerolog"
)

// Raft's logging, as the node's own events. hashicorp/raft logs through
// hclog, with a message and key/value pairs: `Warn("failed to contact",
// "server-id", id, "time", d)`. hclogger turns each call into one zerolog
// event at the matching level, the pairs as fields and the message as the
// message, so a JSON line reads
//
//	{"level":"warn","node":"3f2a...","component":"raft","server_id":"...","time_ms":512.3,"message":"failed to contact"}
//
// rather than a formatted hclog line (with its own timestamp and level)
// nested in a zerolog string at a level of its own. Keys are written with
// underscores for hclog's dashes (server-id -> server_id), as the rest of
// delayd's fields are; a duration's key gets the unit, as main's do.
//
// A few messages Raft logs at WARN are what a healthy group says at start
// or on a join; raftLevel lists them and the level they get here, so that
// a WARN in delayd's log is something to look at.

// newHclog is the hclog.Logger Raft, its transport and its snapshot store
// write to: the node's logger under component "raft".
func newHclog(l zerolog.Logger) hclog.Logger {
	lv := new(atomic.Int32)
	lv.Store(int32(hclogLevel(l.GetLevel())))
	return &hclogger{z: l, name: "raft", level: lv, rep: &repeats{now: time.Now, last: map[string]*repeat{}}}
}

// hclogger is hclog.Logger over a zerolog.Logger. Loggers made by With and
// Named share their parent's level, as hclog's own do.
type hclogger struct {
	z       zerolog.Logger
	name    string
	implied []any // With's pairs, for ImpliedArgs
	level   *atomic.Int32
	rep     *repeats
}

// repeatEvery is how often a message about one unreachable peer is logged
// while Raft goes on repeating it.
const repeatEvery = 10 * time.Second

// repeats keeps the log from flooding while a peer is down: the leader
// tries it on every heartbeat backoff (at most 500 ms apart) and logs
// "failed to heartbeat to", "failed to appendEntries to" and "failed to
// contact" each time, hours of lines for one stopped node. The first is
// logged; then one every repeatEvery, with the number left out since.
type repeats struct {
	now  func() time.Time
	mu   sync.Mutex
	last map[string]*repeat // message + peer; bounded by messages x peers
}

type repeat struct {
	at         time.Time
	suppressed int
}

// perPeer names, for each message Raft repeats about a peer, the key that
// says which peer.
var perPeer = map[string]string{
	"failed to heartbeat to":            "peer",
	"failed to appendEntries to":        "peer",
	"failed to pipeline appendEntries":  "peer",
	"failed to contact":                 "server-id",
	"failed to make requestVote RPC":    "target",
	"failed to make requestPreVote RPC": "target",
}

// allow reports whether to log msg now, and how many like it were left out
// since the last one logged.
func (r *repeats) allow(msg string, args []any) (bool, int) {
	key, ok := perPeer[msg]
	if !ok {
		return true, 0
	}
	k := msg + "\x00" + argValue(args, key)
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.last[k]
	if p == nil {
		r.last[k] = &repeat{at: now}
		return true, 0
	}
	if now.Sub(p.at) < repeatEvery {
		p.suppressed++
		return false, 0
	}
	n := p.suppressed
	p.at, p.suppressed = now, 0
	return true, n
}

var _ hclog.Logger = (*hclogger)(nil)

// raftLevel is the level a Raft message is logged at: Raft's own, except
// for these, which a healthy group logs in the normal course.
func raftLevel(msg string, args []any, level hclog.Level) hclog.Level {
	switch msg {
	case "heartbeat timeout reached, starting election":
		// A node that never heard a leader (a bootstrapping node's first
		// election, a restart) starts one: that is how a group forms.
		// Having lost a known leader is news, and stays a warning.
		if argValue(args, "last-leader-id") == "" && argValue(args, "last-leader-addr") == "" {
			return hclog.Info
		}
	case "no known peers, aborting election",
		"not part of stable configuration, aborting election",
		"heartbeat timeout reached, not part of a stable configuration or a non-voter, not triggering a leader election":
		// A node started to join (or waiting for CLUSTER MEET) has no
		// configuration until the leader adds it: it must not elect itself.
		return hclog.Info
	case "appendEntries rejected, sending older logs", // the leader, to a follower behind
		"failed to get previous log": // that follower: the entry it was sent does not follow its log
		// A joining or restarted follower is caught up this way: its log
		// ends before the leader's next entry, the leader walks back to
		// where they meet.
		return hclog.Debug
	case "rejecting vote request since we have a leader",
		"rejecting pre-vote request since we have a leader",
		"rejecting vote request since our last term is greater",
		"rejecting pre-vote request since our last term is greater",
		"rejecting vote request since our last index is greater",
		"rejecting pre-vote request since our last index is greater",
		"duplicate requestVote from":
		// A vote refused is the election working: a node that just joined
		// or restarted with a stale log asks, and the up-to-date say no.
		return hclog.Debug
	case "peer has newer term, stopping replication":
		// The leader learns a follower moved to a newer term: after a
		// hand-over (CLUSTER FAILOVER, a graceful stop) that is the plan;
		// an election the leader missed is told by the nodes that held it.
		return hclog.Info
	case "failed to decode incoming command":
		// The bus read loop ends so when this node stops its transport.
		if e, ok := argOf(args, "error").(error); ok && errors.Is(e, raft.ErrTransportShutdown) {
			return hclog.Debug
		}
	}
	return level
}

// argValue is the value of key among hclog's key/value pairs as a string,
// "" if absent.
func argValue(args []any, key string) string {
	if v := argOf(args, key); v != nil {
		return fmt.Sprint(v)
	}
	return ""
}

// argOf is the value of key among hclog's key/value pairs, nil if absent.
func argOf(args []any, key string) any {
	for i := 0; i+1 < len(args); i += 2 {
		if k, ok := args[i].(string); ok && k == key {
			return args[i+1]
		}
	}
	return nil
}

func (h *hclogger) Log(level hclog.Level, msg string, args ...any) {
	level = raftLevel(msg, args, level)
	if !h.enabled(level) {
		return
	}
	ok, suppressed := h.rep.allow(msg, args)
	if !ok {
		return
	}
	var ev *zerolog.Event
	switch level {
	case hclog.Trace:
		ev = h.z.Trace()
	case hclog.Debug:
		ev = h.z.Debug()
	case hclog.Info:
		ev = h.z.Info()
	case hclog.Warn:
		ev = h.z.Warn()
	case hclog.Error:
		ev = h.z.Error()
	default: // hclog.Off, NoLevel
		return
	}
	if ev == nil { // below zerolog's level
		return
	}
	ev.Str("component", h.name)
	if suppressed > 0 {
		ev.Int("suppressed", suppressed)
	}
	addPairs(ev, h.implied)
	addPairs(ev, args)
	ev.Msg(msg)
}

// addPairs adds hclog's key/value pairs to ev as fields.
func addPairs(ev *zerolog.Event, args []any) {
	for i := 0; i < len(args); i += 2 {
		if i+1 == len(args) { // as hclog names an unpaired value
			addField(ev, "EXTRA_VALUE_AT_END", args[i])
			break
		}
		addField(ev, fieldName(args[i], args[i+1]), args[i+1])
	}
}

// fieldName is hclog's key k of value v as delayd names fields:
// "last-leader-addr" -> "last_leader_addr", and a duration's with its
// unit ("time" -> "time_ms"; main sets zerolog's unit to ms). A key the
// event already has (Raft's "node" is its own description, "Node at ...
// [Candidate]", where delayd's is the node id) gets a raft_ prefix: JSON
// with a key twice is read differently by every parser.
func fieldName(k, v any) string {
	name := strings.NewReplacer("-", "_", " ", "_").Replace(fmt.Sprint(k))
	if _, ok := v.(time.Duration); ok {
		name += "_ms"
	}
	switch name {
	case "node", "component", zerolog.LevelFieldName, zerolog.TimestampFieldName, zerolog.MessageFieldName:
		return "raft_" + name
	}
	return name
}

func addField(ev *zerolog.Event, key string, v any) {
	switch v := v.(type) {
	case nil:
		ev.Interface(key, nil)
	case error:
		ev.AnErr(key, v)
	case time.Duration:
		ev.Dur(key, v)
	case time.Time:
		ev.Time(key, v)
	case hclog.Format: // hclog.Fmt("%d of %d", a, b)
		if len(v) > 0 {
			if f, ok := v[0].(string); ok {
				ev.Str(key, fmt.Sprintf(f, v[1:]...))
				return
			}
		}
		ev.Str(key, fmt.Sprint([]any(v)...))
	case string:
		ev.Str(key, v)
	case bool:
		ev.Bool(key, v)
	case fmt.Stringer:
		ev.Stringer(key, v)
	default:
		switch reflect.ValueOf(v).Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
			reflect.Float32, reflect.Float64:
			ev.Interface(key, v)
		default: // raft.ServerID, raft.ServerAddress and the like: strings
			ev.Str(key, fmt.Sprintf("%v", v))
		}
	}
}

func (h *hclogger) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *hclogger) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *hclogger) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hclogger) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hclogger) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *hclogger) IsTrace() bool { return h.enabled(hclog.Trace) }
func (h *hclogger) IsDebug() bool { return h.enabled(hclog.Debug) }
func (h *hclogger) IsInfo() bool  { return h.enabled(hclog.Info) }
func (h *hclogger) IsWarn() bool  { return h.enabled(hclog.Warn) }
func (h *hclogger) IsError() bool { return h.enabled(hclog.Error) }

// enabled: both hclog's level (SetLevel) and zerolog's let level through.
func (h *hclogger) enabled(level hclog.Level) bool {
	return level >= hclog.Level(h.level.Load()) && level >= hclogLevel(h.z.GetLevel())
}

func (h *hclogger) ImpliedArgs() []any { return append([]any(nil), h.implied...) }

func (h *hclogger) With(args ...any) hclog.Logger {
	c := *h
	c.implied = append(append([]any(nil), h.implied...), args...)
	return &c
}

func (h *hclogger) Name() string { return h.name }

func (h *hclogger) Named(name string) hclog.Logger {
	if h.name != "" {
		name = h.name + "." + name
	}
	return h.ResetNamed(name)
}

func (h *hclogger) ResetNamed(name string) hclog.Logger {
	c := *h
	c.name = name
	return &c
}

func (h *hclogger) SetLevel(level hclog.Level) { h.level.Store(int32(level)) }
func (h *hclogger) GetLevel() hclog.Level      { return hclog.Level(h.level.Load()) }

func (h *hclogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}

// StandardWriter is for libraries that take a *log.Logger: each line is an
// event at opts.ForceLevel, or at the level its "[WARN] " prefix names
// with InferLevels, else at info.
func (h *hclogger) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	if opts == nil {
		opts = &hclog.StandardLoggerOptions{}
	}
	return stdWriter{h: h, opts: *opts}
}

type stdWriter struct {
	h    *hclogger
	opts hclog.StandardLoggerOptions
}

func (w stdWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		msg, level := string(bytes.TrimSpace(line)), hclog.Info
		if w.opts.InferLevels || w.opts.InferLevelsWithTimestamp {
			level, msg = inferLevel(msg)
		}
		if w.opts.ForceLevel != hclog.NoLevel {
			level = w.opts.ForceLevel
		}
		w.h.Log(level, msg)
	}
	return len(p), nil
}

// inferLevel reads a standard-log line's "[LEVEL]" prefix, as hclog does.
func inferLevel(s string) (hclog.Level, string) {
	if i := strings.Index(s, "["); i >= 0 {
		if j := strings.Index(s[i:], "]"); j > 0 {
			var l hclog.Level
			switch s[i+1 : i+j] {
			case "TRACE":
				l = hclog.Trace
			case "DEBUG":
				l = hclog.Debug
			case "INFO":
				l = hclog.Info
			case "WARN":
				l = hclog.Warn
			case "ERR", "ERROR":
				l = hclog.Error
			}
			if l != hclog.NoLevel {
				return l, strings.TrimSpace(s[i+j+1:])
			}
		}
	}
	return hclog.Info, s
}

// hclogLevel is zerolog's level as hclog's.
func hclogLevel(l zerolog.Level) hclog.Level {
	switch {
	case l <= zerolog.TraceLevel:
		return hclog.Trace
	case l == zerolog.DebugLevel:
		return hclog.Debug
	case l == zerolog.InfoLevel:
		return hclog.Info
	case l == zerolog.WarnLevel:
		return hclog.Warn
	case l == zerolog.ErrorLevel:
		return hclog.Error
	}
	return hclog.Off
}
