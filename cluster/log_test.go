package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/rs/zerolog"
)

// logLines runs f against newHclog over a JSON zerolog logger at level and
// returns the lines it wrote, decoded.
func logLines(t *testing.T, level zerolog.Level, f func(h hclog.Logger)) []map[string]any {
	t.Helper()
	var buf bytes.Buffer
	f(newHclog(zerolog.New(&buf).Level(level).With().Timestamp().Str("node", "abcd1234").Logger()))
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		if strings.Count(line, `"node":`) > 1 {
			t.Errorf("a key twice in %s", line)
		}
		m := map[string]any{}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not one JSON object: %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func TestHclogIsZerologEvents(t *testing.T) {
	lines := logLines(t, zerolog.DebugLevel, func(h hclog.Logger) {
		h.Warn("failed to contact", "server-id", raft.ServerID("n2"), "time", 1500*time.Millisecond)
		h.Error("failed to appendEntries to", "peer", raft.Server{ID: "n2"}, "error", errors.New("connection reset"))
		h.Info("entering follower state", "node", "Node at 127.0.0.1:17001 [Follower]", "term", uint64(3))
		h.Debug("pre-vote granted", "tally", 1, "odd")
		h.Trace("too fine") // below debug: dropped
		h.Named("net").With("remote", "127.0.0.1:9").Info("accepted connection", "n", hclog.Fmt("%d of %d", 1, 2))
	})
	want := []map[string]any{
		{"level": "warn", "node": "abcd1234", "component": "raft", "server_id": "n2", "time_ms": 1500.0, "message": "failed to contact"},
		{"level": "error", "component": "raft", "peer": fmt.Sprint(raft.Server{ID: "n2"}), "error": "connection reset", "message": "failed to appendEntries to"},
		{"level": "info", "node": "abcd1234", "raft_node": "Node at 127.0.0.1:17001 [Follower]", "term": 3.0, "message": "entering follower state"},
		{"level": "debug", "tally": 1.0, "EXTRA_VALUE_AT_END": "odd", "message": "pre-vote granted"},
		{"level": "info", "component": "raft.net", "remote": "127.0.0.1:9", "n": "1 of 2", "message": "accepted connection"},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d: %v", len(lines), len(want), lines)
	}
	for i, w := range want {
		for k, v := range w {
			if lines[i][k] != v {
				t.Errorf("line %d: %s = %#v, want %#v (line %v)", i, k, lines[i][k], v, lines[i])
			}
		}
		if _, ok := lines[i]["time"].(string); !ok {
			t.Errorf("line %d: no zerolog timestamp: %v", i, lines[i])
		}
	}
}

// TestHclogHealthyStartIsNotWarned: the messages a bootstrap, a join and
// the catch-up of a new follower bring are below WARN; the same messages
// meaning trouble (a known leader lost) stay WARN.
func TestHclogHealthyStartIsNotWarned(t *testing.T) {
	cases := []struct {
		msg  string
		args []any
		want string
	}{
		{"heartbeat timeout reached, starting election", []any{"last-leader-addr", raft.ServerAddress(""), "last-leader-id", raft.ServerID("")}, "info"},
		{"heartbeat timeout reached, starting election", []any{"last-leader-addr", raft.ServerAddress("127.0.0.1:17001"), "last-leader-id", raft.ServerID("n1")}, "warn"},
		{"no known peers, aborting election", nil, "info"},
		{"not part of stable configuration, aborting election", nil, "info"},
		{"heartbeat timeout reached, not part of a stable configuration or a non-voter, not triggering a leader election", nil, "info"},
		{"appendEntries rejected, sending older logs", []any{"peer", "n2", "next", uint64(1)}, "debug"},
		{"failed to get previous log", []any{"previous-index", uint64(7), "last-index", uint64(0), "error", raft.ErrLogNotFound}, "debug"},
		{"rejecting vote request since we have a leader", []any{"from", "127.0.0.1:17003"}, "debug"},
		{"rejecting pre-vote request since our last term is greater", []any{"candidate", "127.0.0.1:17001", "last-term", uint64(3)}, "debug"},
		{"failed to decode incoming command", []any{"error", raft.ErrTransportShutdown}, "debug"},
		{"failed to decode incoming command", []any{"error", errors.New("unexpected EOF")}, "error"},
		{"failed to contact quorum of nodes, stepping down", nil, "warn"},
		{"Election timeout reached, restarting election", nil, "warn"},
	}
	for _, c := range cases {
		lines := logLines(t, zerolog.DebugLevel, func(h hclog.Logger) {
			level := hclog.Warn
			if c.want == "error" {
				level = hclog.Error
			}
			h.Log(level, c.msg, c.args...)
		})
		if len(lines) != 1 || lines[0]["level"] != c.want {
			t.Errorf("%q %v: %v, want one %s line", c.msg, c.args, lines, c.want)
		}
	}
}

func TestHclogLevels(t *testing.T) {
	var buf bytes.Buffer
	h := newHclog(zerolog.New(&buf).Level(zerolog.InfoLevel))
	if h.IsDebug() || !h.IsInfo() || h.GetLevel() != hclog.Info {
		t.Fatalf("over an info zerolog: IsDebug %v IsInfo %v level %v", h.IsDebug(), h.IsInfo(), h.GetLevel())
	}
	// SetLevel is shared with the loggers made from it, as hclog's are.
	sub := h.Named("snapshot").With("k", "v")
	h.SetLevel(hclog.Error)
	sub.Warn("dropped")
	if buf.Len() != 0 || sub.IsWarn() {
		t.Fatalf("after SetLevel(Error): %q, IsWarn %v", buf.String(), sub.IsWarn())
	}
	if got := sub.ImpliedArgs(); len(got) != 2 || got[0] != "k" {
		t.Errorf("ImpliedArgs %v", got)
	}
	if sub.Name() != "raft.snapshot" || sub.ResetNamed("x").Name() != "x" {
		t.Errorf("names %q %q", sub.Name(), sub.ResetNamed("x").Name())
	}
	// A standard logger's "[WARN]" line is a warn event.
	h.SetLevel(hclog.Info)
	h.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}).Print("[WARN] disk slow")
	if s := buf.String(); !strings.Contains(s, `"level":"warn"`) || !strings.Contains(s, `"message":"disk slow"`) {
		t.Errorf("standard logger line: %s", s)
	}
}

// TestHclogRepeatsAboutADownPeer: while a peer is down Raft says so on
// every heartbeat backoff; the log has the first line, then one every
// repeatEvery with the count left out, per peer.
func TestHclogRepeatsAboutADownPeer(t *testing.T) {
	var buf bytes.Buffer
	h := newHclog(zerolog.New(&buf)).(*hclogger)
	now := time.Unix(1000, 0)
	h.rep.now = func() time.Time { return now }
	down := errors.New("connection refused")
	for i := 0; i < 25; i++ { // 12.5 s of attempts 500 ms apart, to two peers
		h.Error("failed to heartbeat to", "peer", raft.ServerAddress("127.0.0.1:17002"), "error", down)
		if i < 3 {
			h.Error("failed to heartbeat to", "peer", raft.ServerAddress("127.0.0.1:17003"), "error", down)
		}
		h.Info("entering follower state") // not per peer: never held back
		now = now.Add(500 * time.Millisecond)
	}
	var heartbeats []map[string]any
	follower := 0
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		m := map[string]any{}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		if m["message"] == "failed to heartbeat to" {
			heartbeats = append(heartbeats, m)
		} else {
			follower++
		}
	}
	if follower != 25 {
		t.Errorf("%d other lines, want all 25", follower)
	}
	// 17002 at 0 s and 10 s (19 left out between), 17003 at 0 s.
	want := []struct {
		peer       string
		suppressed any
	}{{"127.0.0.1:17002", nil}, {"127.0.0.1:17003", nil}, {"127.0.0.1:17002", 19.0}}
	if len(heartbeats) != len(want) {
		t.Fatalf("%d heartbeat lines, want %d: %v", len(heartbeats), len(want), heartbeats)
	}
	for i, w := range want {
		if heartbeats[i]["peer"] != w.peer || heartbeats[i]["suppressed"] != w.suppressed {
			t.Errorf("line %d: %v, want peer %s suppressed %v", i, heartbeats[i], w.peer, w.suppressed)
		}
	}
}
