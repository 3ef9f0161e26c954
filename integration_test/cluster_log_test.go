package integration

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// Issue 30: Raft's messages are delayd's own JSON events (their level, the
// key/value pairs as fields), and a healthy start logs no WARN: a bootstrap,
// two joins, the first election and the new followers' catch-up.
func TestClusterHealthyStartLogsNoWarn(t *testing.T) {
	t.Parallel()
	cc := clStart(t, 3) // --log-format json --log-level info
	leader := cc.waitFormed(t, 20*time.Second)
	if _, err := leader.do(leader.client(), "DELAY.ADD", "q", 0, "x"); err != nil {
		t.Fatalf("DELAY.ADD: %v", err)
	}
	cc.waitCaughtUp(t, 20*time.Second, leader, cc.followers(leader)...)

	raftEvents := 0
	for _, n := range cc.nodes {
		for _, line := range strings.Split(n.Output(), "\n") {
			if !strings.HasPrefix(line, "{") {
				continue
			}
			var ev map[string]any
			if err := json.Unmarshal([]byte(line), &ev); err != nil {
				t.Errorf("%v: not a JSON event: %q", n, line)
				continue
			}
			if lv := ev["level"]; lv != "info" && lv != "debug" {
				t.Errorf("%v logged %v during a healthy start: %s", n, lv, line)
			}
			if ev["component"] == "raft" {
				raftEvents++
				if msg, _ := ev["message"].(string); strings.Contains(msg, "[INFO]") || strings.Contains(msg, "[WARN]") ||
					strings.Contains(msg, "[ERROR]") || strings.Contains(msg, "raft: ") {
					t.Errorf("%v: a formatted hclog line nested in the message: %s", n, line)
				}
			}
		}
	}
	// "entering follower state" on each node, "election won" on the first.
	if raftEvents < 4 {
		t.Errorf("%d Raft events at info in the nodes' logs, want Raft's own messages as events", raftEvents)
	}
}
