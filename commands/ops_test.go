package commands

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// DELAY.UPCOMING, DELAY.REQUEUE, DELAY.PAUSE, DELAY.RESUME: arguments,
// errors and reply shapes, inside MULTI too.
func TestOpsCommands(t *testing.T) {
	n := newNode(t, nil)
	c := n.client()
	for _, tc := range []struct {
		cmd  string
		want string
	}{
		{"DELAY.UPCOMING", "-ERR wrong number of arguments for 'delay.upcoming' command"},
		{"DELAY.UPCOMING q x", "-" + errNotInteger},
		{"DELAY.UPCOMING q 0", "-" + errUpcomingCnt},
		{"DELAY.UPCOMING q -1", "-" + errUpcomingCnt},
		{"DELAY.UPCOMING q 1001", "-" + errUpcomingCnt},
		{"DELAY.UPCOMING q 1 2", "-ERR syntax error: unknown option '2'"},
		{"DELAY.UPCOMING q", "*0"},
		{"DELAY.ADDAT q 4102444800000 late ID b", "$b"},
		{"DELAY.ADDAT q 4102444800000 same ID c", "$c"},
		{"DELAY.ADDAT q 4000000000000 early ID a", "$a"},
		{"DELAY.ADD q 0 ready ID r", "$r"},
		{"DELAY.UPCOMING q", "*3 *3 $a :4000000000000 $early *3 $b :4102444800000 $late *3 $c :4102444800000 $same"},
		{"DELAY.UPCOMING q 1000", "*3 *3 $a :4000000000000 $early *3 $b :4102444800000 $late *3 $c :4102444800000 $same"},
		{"DELAY.UPCOMING q 2", "*2 *3 $a :4000000000000 $early *3 $b :4102444800000 $late"},

		{"DELAY.RESERVED", "-ERR wrong number of arguments for 'delay.reserved' command"},
		{"DELAY.RESERVED q 0", "-" + errUpcomingCnt},
		{"DELAY.RESERVED q 1 2", "-ERR syntax error: unknown option '2'"},
		{"DELAY.RESERVED q", "*0"},
		{"DELAY.ADD held 0 work ID h ACKTIMEOUT 4000000000", "$h"},
		{"DELAY.POP held 0", "*3 $held $h $work"},
		{"DELAY.RESERVED held", "*1 *4 $h :…"},

		{"DELAY.PAUSE", "-ERR wrong number of arguments for 'delay.pause' command"},
		{"DELAY.PAUSE q x", "-ERR wrong number of arguments for 'delay.pause' command"},
		{"DELAY.RESUME", "-ERR wrong number of arguments for 'delay.resume' command"},
		// paused is DELAY.STATS's last field, also for a name with no job.
		{"DELAY.STATS p", "…$dead_lettered :0 $paused :0"},
		{"DELAY.PAUSE p", "+OK"},
		{"DELAY.PAUSE p", "+OK"},
		{"DELAY.STATS p", "…$dead_lettered :0 $paused :1"},
		{"RPUSH p x", ":1"},
		{"LPOP p", "_"},
		{"LMOVE p o LEFT RIGHT", "_"},
		{"LLEN p", ":1"},
		{"DELAY.STATS p", "…$paused :1"},
		{"DELAY.LIMIT p", "_"}, // a pause is no limit
		{"DELAY.RESUME p", "+OK"},
		{"DELAY.RESUME p", "+OK"},
		{"DELAY.STATS p", "…$paused :0"},
		{"LPOP p", "$x"},

		{"DELAY.REQUEUE dlq", "-ERR wrong number of arguments for 'delay.requeue' command"},
		{"DELAY.REQUEUE dlq a b c", "-ERR syntax error: unknown option 'c'"},
		{"DELAY.REQUEUE dlq ALL", ":0"},
		{"DELAY.ADD w 0 job ID j RETRY 0 ACKTIMEOUT 60000 DEADLETTER dlq", "$j"},
		{"DELAY.POP w 0", "*3 $w $j $job"},
		{"DELAY.NACK w j", ":1"},
		{"DELAY.GET dlq j", "*14 $id $j $queue $dlq $state $ready $due :…"},
		{"DELAY.ADD dlq 0 plain ID k", "$k"},
		{"DELAY.REQUEUE dlq nosuch", ":0"},
		{"DELAY.REQUEUE dlq k", ":0"}, // no origin, no to-key
		{"DELAY.REQUEUE dlq all", ":1"},
		{"DELAY.REQUEUE dlq ALL", ":0"},
		{"DELAY.GET w j", "*12 $id $j $queue $w $state $ready $due :…"},
		{"DELAY.REQUEUE dlq k other", ":1"},
		{"LRANGE other 0 -1", "*1 $plain"},

		// In MULTI: queued, run, and replied in order.
		{"MULTI", "+OK"},
		{"DELAY.PAUSE m", "+QUEUED"},
		{"RPUSH m a", "+QUEUED"},
		{"LPOP m", "+QUEUED"},
		{"DELAY.UPCOMING q 1", "+QUEUED"},
		{"DELAY.REQUEUE other ALL m", "+QUEUED"},
		{"DELAY.RESUME m", "+QUEUED"},
		{"LPOP m", "+QUEUED"},
		{"EXEC", "*7 +OK :1 _ *1 *3 $a :4000000000000 $early :1 +OK $a"},
		{"LRANGE m 0 -1", "*1 $plain"},

		{"COMMAND GETKEYS DELAY.REQUEUE dlq ALL", "*1 $dlq"},
		{"COMMAND GETKEYS DELAY.REQUEUE dlq id to", "*2 $dlq $to"},
		{"COMMAND GETKEYS DELAY.UPCOMING q 5", "*1 $q"},
	} {
		// "…" stands for any text: a prefix, a suffix, or both ends.
		got := n.do(c, strings.Fields(tc.cmd)...)
		pre, post, cut := strings.Cut(tc.want, "…")
		if (cut && (!strings.HasPrefix(got, pre) || !strings.HasSuffix(got, post))) || (!cut && got != tc.want) {
			t.Errorf("%s: %s, want %s", tc.cmd, got, tc.want)
		}
	}
}

// In cluster mode DELAY.REQUEUE with a to-key names two keys: one slot, or
// CROSSSLOT, as LMOVE; the others route by their key.
func TestOpsRouting(t *testing.T) {
	fc := newFake(idL, idL)
	fc.writable = true
	n := newNode(t, fc)
	c := n.client()
	for _, tc := range []struct{ cmd, want string }{
		{"DELAY.REQUEUE dlq ALL q", cross},
		{"DELAY.REQUEUE {q}dlq ALL {q}x", ":0"},
		{"DELAY.REQUEUE dlq ALL", ":0"},
		{"DELAY.PAUSE q", "+OK"},
		{"DELAY.UPCOMING q", "*0"},
	} {
		if got := n.do(c, strings.Fields(tc.cmd)...); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.cmd, got, tc.want)
		}
	}
	f := newNode(t, newFake(idA, idL))
	fcl := f.client()
	for _, cmd := range []string{"DELAY.PAUSE foo", "DELAY.RESUME foo", "DELAY.UPCOMING foo", "DELAY.REQUEUE foo ALL"} {
		if got := f.do(fcl, strings.Fields(cmd)...); got != movedFoo {
			t.Errorf("on a follower, %s: %s, want %s", cmd, got, movedFoo)
		}
	}
}

// DELAY.STATS latency and INFO queues' latency lines: ms since the oldest
// ready job's due time, the oldest queue first, names escaped so each line
// stays one key:value.
func TestLatencyInStatsAndInfo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNode(t, nil)
		c := n.client()
		n.do(c, "DELAY.ADD", "jobs:mail", "0", "p")
		time.Sleep(1500 * time.Millisecond)
		n.do(c, "DELAY.ADD", "b", "0", "p")
		n.do(c, "DELAY.ADD", "b", "0", "p")
		time.Sleep(500 * time.Millisecond)
		n.do(c, "DELAY.ADD", "idle", "60000", "p")
		if got := n.do(c, "DELAY.STATS", "jobs:mail"); !strings.HasPrefix(got, "*") ||
			!strings.Contains(got, "$reserved :0 $latency :2000 $added") {
			t.Fatalf("DELAY.STATS: %s", got)
		}
		if got := n.do(c, "DELAY.STATS", "idle"); !strings.Contains(got, "$latency :0 ") {
			t.Fatalf("DELAY.STATS of a queue with no ready job: %s", got)
		}
		info := n.do(c, "INFO", "queues")
		for _, line := range []string{"latency_max_ms:2000\r\n", "queue_jobs\\x3amail:ready=1,latency_ms=2000\r\nqueue_b:ready=2,latency_ms=500\r\n"} {
			if !strings.Contains(info, line) {
				t.Errorf("INFO queues lacks %q:\n%s", line, info)
			}
		}
		if strings.Contains(info, "queue_idle") {
			t.Errorf("INFO queues lists a queue with no ready job:\n%s", info)
		}
	})
}

func TestInfoNameEscapes(t *testing.T) {
	for in, want := range map[string]string{
		"plain": "plain", "a:b": `a\x3ab`, "a,b=c": `a\x2cb\x3dc`, "sp ace\r\n": `sp\x20ace\x0d\x0a`,
		`back\slash`: `back\x5cslash`, "\xff": `\xff`, "{tag}.x-y/z": "{tag}.x-y/z",
	} {
		if got := infoName(in); got != want {
			t.Errorf("infoName(%q) = %q, want %q", in, got, want)
		}
	}
}

// DELAY.UPCOMING and DELAY.RESERVED take AFTER time id (the last job of
// the page before), with or without a count; the old forms still work.
func TestUpcomingAndReservedAfter(t *testing.T) {
	n := newNode(t, nil)
	c := n.client()
	for _, tc := range []struct{ cmd, want string }{
		{"DELAY.ADDAT q 4000000000000 pa ID a", "$a"},
		{"DELAY.ADDAT q 4000000000000 pb ID b", "$b"},
		{"DELAY.ADDAT q 4100000000000 pc ID c", "$c"},
		{"DELAY.UPCOMING q 2", "*2 *3 $a :4000000000000 $pa *3 $b :4000000000000 $pb"},
		{"DELAY.UPCOMING q 2 AFTER 4000000000000 b", "*1 *3 $c :4100000000000 $pc"},
		{"DELAY.UPCOMING q AFTER 4000000000000 a", "*2 *3 $b :4000000000000 $pb *3 $c :4100000000000 $pc"},
		{"DELAY.UPCOMING q after 4100000000000 c", "*0"},
		// The cursor's job gone: from its millisecond again.
		{"DELAY.UPCOMING q 5 AFTER 4000000000000 gone", "*3 *3 $a :4000000000000 $pa *3 $b :4000000000000 $pb *3 $c :4100000000000 $pc"},
		{"DELAY.UPCOMING q 5 AFTER 4000000000001 gone", "*1 *3 $c :4100000000000 $pc"},
		{"DELAY.UPCOMING q 5 AFTER x a", "-" + errAfterTime},
		{"DELAY.UPCOMING q 5 AFTER 1", "-ERR syntax error: option 'AFTER' needs 2 values"},
		{"DELAY.UPCOMING q 5 AFTER 1 a AFTER 2 b", "-ERR syntax error: option 'AFTER' given twice"},
		{"DELAY.UPCOMING q 5 BEFORE 1 a", "-ERR syntax error: unknown option 'BEFORE'"},
		{"DELAY.RESERVED q 5 AFTER 1 a", "*0"},
		{"DELAY.RESERVED q AFTER 1", "-ERR syntax error: option 'AFTER' needs 2 values"},
	} {
		if got := n.do(c, strings.Fields(tc.cmd)...); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.cmd, got, tc.want)
		}
	}
}
