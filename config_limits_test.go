package main

import (
	"io"
	"testing"
	"time"

	"github.com/delayd/delayd/resp"
)

func TestConfigConnLimits(t *testing.T) {
	c, err := loadConfig(nil, nil, io.Discard)
	if err != nil || !c.ProtectedMode || c.Timeout != 0 || c.OutputLimit != (resp.OutputLimit{}) {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	c, err = loadConfig([]string{"--protected-mode", "no", "--timeout", "300"},
		[]string{"DELAYD_CLIENT_OUTPUT_BUFFER_LIMIT=normal 64mb 16mb 60"}, io.Discard)
	if err != nil || c.ProtectedMode || c.Timeout != 300 ||
		c.OutputLimit != (resp.OutputLimit{Hard: 64 << 20, Soft: 16 << 20, SoftFor: time.Minute}) {
		t.Fatalf("set: %+v, %v", c, err)
	}
	if v := c.view(); v["protected-mode"] != "no" || v["timeout"] != "300" ||
		v["client-output-buffer-limit"] != "normal 67108864 16777216 60 slave 268435456 67108864 60 pubsub 33554432 8388608 60" {
		t.Errorf("CONFIG GET view: %q %q %q", v["protected-mode"], v["timeout"], v["client-output-buffer-limit"])
	}
	for _, bad := range [][]string{{"--timeout", "-1"}, {"--protected-mode", "maybe"}, {"--client-output-buffer-limit", "normal 1mb"}} {
		if _, err := loadConfig(bad, nil, io.Discard); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
