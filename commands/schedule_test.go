package commands

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/delayd/delayd/engine"
)

// schedWriter records replies with their values, one per line.
type schedWriter struct{ textWriter }

func (w *schedWriter) Int(n int64) { fmt.Fprintf(&w.sb, ":%d\n", n) }

func schedDispatcher(t *testing.T) (*Dispatcher, *Client, func(a ...string) string) {
	t.Helper()
	eng, err := engine.New(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	d := New(Options{Engine: eng, Config: map[string]string{}})
	w := &schedWriter{textWriter{proto: 2}}
	c := d.NewClient(w, "test")
	run := func(a ...string) string {
		w.sb.Reset()
		d.Exec(c, args(a...))
		return w.sb.String()
	}
	return d, c, run
}

func TestScheduleCommandReplies(t *testing.T) {
	_, _, run := schedDispatcher(t)
	for _, tc := range []struct {
		cmd  []string
		want string // a prefix of the reply
	}{
		{[]string{"DELAY.SCHEDULE", "q", "hourly", "CRON", "0 * * * *", "payload"}, "+OK"},
		{[]string{"DELAY.SCHEDULE", "q", "berlin", "cron", "30 2 * * *", "TZ", "Europe/Berlin", "p", "MISFIRE", "once", "ACKTIMEOUT", "5000", "RETRY", "3", "DEADLETTER", "dlq"}, "+OK"},
		{[]string{"DELAY.SCHEDULE", "q", "tz-payload", "CRON", "0 * * * *", "TZ"}, "+OK"}, // "TZ" is the payload
		{[]string{"DELAY.SCHEDULE", "r", "fast", "EVERY", "1500", "p", "START", "4102444800000", "END", "4102444900000", "MISFIRE", "ALL"}, "+OK"},
		{[]string{"DELAY.SCHEDULE", "r", "sub", "CRON", "@every 1500ms", "p"}, "+OK"},
		{[]string{"DELAY.SCHEDULE", "q", "x", "WHEN", "0 * * * *", "p"}, "-ERR syntax error: expected CRON or EVERY, got 'WHEN'"},
		{[]string{"DELAY.SCHEDULE", "q", "x", "CRON", "0 * * * *"}, "-ERR wrong number of arguments for 'delay.schedule' command"},
		{[]string{"DELAY.SCHEDULE", "q", "x", "CRON", "0 * * * *", "TZ", "Mars/Base", "p"}, `-ERR invalid schedule: unknown time zone "Mars/Base"`},
		{[]string{"DELAY.SCHEDULE", "q", "x", "CRON", "61 * * * *", "p"}, "-ERR invalid schedule: invalid cron expression"},
		{[]string{"DELAY.SCHEDULE", "q", "x", "CRON", "0 0 30 2 *", "p"}, "-ERR invalid schedule: the cron expression matches no time"},
		{[]string{"DELAY.SCHEDULE", "q", "x", "EVERY", "0", "p"}, "-" + errEvery},
		{[]string{"DELAY.SCHEDULE", "q", "x", "EVERY", "1s", "p"}, "-" + errEvery},
		{[]string{"DELAY.SCHEDULE", "q", "x", "EVERY", "10", "p", "MISFIRE", "sometimes"}, "-" + errMisfire},
		{[]string{"DELAY.SCHEDULE", "q", "x", "EVERY", "10", "p", "RETRY"}, "-ERR syntax error: option 'RETRY' needs a value"},
		{[]string{"DELAY.SCHEDULE", "q", "x", "EVERY", "10", "p", "START", "-1"}, "-ERR START must be a unix time in ms, 0 or more"},
		{[]string{"DELAY.SCHEDULE", "q", "x", "EVERY", "10", "p", "START", "200", "END", "100"}, "-ERR invalid schedule: END is before START"},
		{[]string{"DELAY.SCHEDULE", "q", strings.Repeat("n", 201), "EVERY", "10", "p"}, "-ERR invalid schedule: a schedule name is 1 to 200 bytes"},
		{[]string{"DELAY.UNSCHEDULE", "q", "tz-payload"}, ":1"},
		{[]string{"DELAY.UNSCHEDULE", "q", "tz-payload"}, ":0"},
		{[]string{"DELAY.SCHEDULES", "a", "b"}, "-ERR wrong number of arguments for 'delay.schedules' command"},
		{[]string{"DELAY.SCHEDULES", "none"}, "*\n"},
	} {
		if got := run(tc.cmd...); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%q: %q, want %q...", tc.cmd, got, tc.want)
		}
	}
	got := run("DELAY.SCHEDULES")
	want := "*\n" +
		"%\n$queue\n$q\n$name\n$berlin\n$spec\n$CRON 30 2 * * * TZ Europe/Berlin\n$next\n:%s$last\n:-1\n$fired\n:0\n$misfire\n$once\n$start\n:0\n$end\n:0\n" +
		"%\n$queue\n$q\n$name\n$hourly\n$spec\n$CRON 0 * * * *\n$next\n:%s$last\n:-1\n$fired\n:0\n$misfire\n$skip\n$start\n:0\n$end\n:0\n" +
		"%\n$queue\n$r\n$name\n$fast\n$spec\n$EVERY 1500\n$next\n:4102444800000\n$last\n:-1\n$fired\n:0\n$misfire\n$all\n$start\n:4102444800000\n$end\n:4102444900000\n" +
		"%\n$queue\n$r\n$name\n$sub\n$spec\n$CRON @every 1500ms\n$next\n:%s$last\n:-1\n$fired\n:0\n$misfire\n$skip\n$start\n:0\n$end\n:0\n"
	// Next fire times depend on the clock: compare the rest.
	mask := func(s string) string {
		lines := strings.Split(s, "\n")
		for i := range lines {
			if i > 0 && lines[i-1] == "$next" && !strings.HasPrefix(lines[i], ":41024") {
				lines[i] = ":%s"
			}
		}
		return strings.ReplaceAll(strings.Join(lines, "\n"), ":%s\n", ":%s")
	}
	if mask(got) != want {
		t.Errorf("DELAY.SCHEDULES:\n%s\nwant\n%s", mask(got), want)
	}
	if got := run("DELAY.SCHEDULES", "r"); strings.Count(got, "%\n") != 2 {
		t.Errorf("DELAY.SCHEDULES r: %q", got)
	}
}

func TestScheduleSynopsisAndKeys(t *testing.T) {
	want := "DELAY.SCHEDULE key name (CRON expr [TZ zone]|EVERY ms) payload [ACKTIMEOUT ms] [RETRY n] [DEADLETTER dlq] " +
		"[MISFIRE SKIP|ONCE|ALL] [START unix-ms] [END unix-ms]"
	var cmd *Command
	for _, c := range Table() {
		if c.Name == "delay.schedule" {
			cmd = c
		}
	}
	if cmd == nil || cmd.Synopsis() != want {
		t.Fatalf("synopsis %q, want %q", cmd.Synopsis(), want)
	}
	// The dead-letter queue is a key, wherever the spec's words put it; a
	// payload that reads DEADLETTER is a payload.
	for _, tc := range []struct {
		args []string
		keys []string
	}{
		{[]string{"DELAY.SCHEDULE", "q", "n", "EVERY", "10", "p", "DEADLETTER", "dlq"}, []string{"q", "dlq"}},
		{[]string{"DELAY.SCHEDULE", "q", "n", "CRON", "* * * * *", "p", "RETRY", "1", "DEADLETTER", "dlq"}, []string{"q", "dlq"}},
		{[]string{"DELAY.SCHEDULE", "q", "n", "CRON", "* * * * *", "TZ", "UTC", "p", "DEADLETTER", "dlq"}, []string{"q", "dlq"}},
		{[]string{"DELAY.SCHEDULE", "q", "n", "EVERY", "10", "DEADLETTER", "x"}, []string{"q"}},
		{[]string{"DELAY.SCHEDULES"}, nil},
		{[]string{"DELAY.SCHEDULES", "q"}, []string{"q"}},
	} {
		var c *Command
		for _, cc := range Table() {
			if strings.EqualFold(cc.Name, tc.args[0]) {
				c = cc
			}
		}
		var got []string
		for _, k := range commandKeys(c, args(tc.args...)) {
			got = append(got, string(k))
		}
		if !slices.Equal(got, tc.keys) {
			t.Errorf("%q: keys %q, want %q", tc.args, got, tc.keys)
		}
	}
}
