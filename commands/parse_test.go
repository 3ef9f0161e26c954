package commands

import (
	"strings"
	"testing"
	"time"
)

func TestParseInt(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"42", 42, true}, {"-7", -7, true}, {"000000012345", 12345, true},
		{"9223372036854775807", 1<<63 - 1, true}, {"-9223372036854775808", -1 << 63, true},
		{"9223372036854775808", 0, false}, {"", 0, false}, {"-", 0, false}, {"+1", 0, false},
		{" 1", 0, false}, {"1 ", 0, false}, {"1.5", 0, false}, {"abc", 0, false},
		{"99999999999999999999999", 0, false},
	} {
		got, ok := parseInt([]byte(tc.in))
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("parseInt(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseTimeout(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"0", 0, ""}, {"1", time.Second, ""}, {"0.25", 250 * time.Millisecond, ""},
		{"-1", 0, errNegTimeout}, {"abc", 0, errNotFloat}, {"", 0, errNotFloat}, {" 1", 0, errNotFloat},
		{"NaN", 0, errNotFloat},
		// Redis 7.2 (timeout.c, string2ld): strtold's syntax, rounded up to
		// a millisecond, out of range past int64 milliseconds.
		{"1e-12", time.Millisecond, ""}, {"1e-400", time.Millisecond, ""}, {"0.0001", time.Millisecond, ""},
		{"-0.0001", 0, ""}, {"-0", 0, ""}, {"1.", time.Second, ""}, {".5", 500 * time.Millisecond, ""},
		{"+1", time.Second, ""}, {"0x10", 16 * time.Second, ""}, {"0X1.8", 1500 * time.Millisecond, ""},
		{"0x1p-3", 125 * time.Millisecond, ""}, {"-0x1", 0, errNegTimeout},
		{"1e300", 0, errTimeoutRange}, {"1e3000", 0, errTimeoutRange}, {"9223372036854775807", 0, errTimeoutRange},
		{"9223372036854775", 0, errTimeoutRange}, {"inf", 0, errTimeoutRange}, {"+Infinity", 0, errTimeoutRange},
		{"INF", 0, errTimeoutRange}, {"-inf", 0, errNegTimeout}, {"-1e3000", 0, errNegTimeout},
		{"9223372036854", 0, ""}, // 292,000 years: within range, beyond a Duration: forever
		{"0x", 0, errNotFloat}, {"1 ", 0, errNotFloat}, {"1_0", 0, errNotFloat}, {"0x_1", 0, errNotFloat},
		{"0b1", 0, errNotFloat}, {"nan", 0, errNotFloat}, {"1\x00", 0, errNotFloat}, {"1e", 0, errNotFloat},
		{"0x1p", 0, errNotFloat}, {"--1", 0, errNotFloat},
	} {
		got, err := parseTimeout([]byte(tc.in))
		if err != tc.err || (err == "" && got != tc.want) {
			t.Errorf("parseTimeout(%q) = %v, %q; want %v, %q", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestSynopsisFromTable(t *testing.T) {
	want := map[string]string{
		"delay.add":    "DELAY.ADD key delay-ms payload [ID id] [REPLACE] [ACKTIMEOUT ms] [RETRY n] [DEADLETTER dead-letter-key] [UNIQUE ttl-ms] [DEBOUNCE max-wait-ms] [GROUP group] [PRIORITY priority]",
		"delay.cancel": "DELAY.CANCEL key id [id ...]",
		"delay.pop":    "DELAY.POP key [key ...] timeout",
		"shutdown":     "SHUTDOWN [NOSAVE|SAVE]",
	}
	for _, cmd := range Table() {
		if w, ok := want[cmd.Name]; ok && cmd.Synopsis() != w {
			t.Errorf("%s synopsis %q, want %q", cmd.Name, cmd.Synopsis(), w)
		}
	}
}

// Every blocking command reads its timeout as Redis does (issue 30: 1e300,
// int64's largest and inf blocked forever; hex was refused).
func TestBlockingTimeoutsOutOfRange(t *testing.T) {
	d := aclDispatcher(t, Options{})
	c := d.NewClient(&textWriter{proto: 2}, "c")
	for _, cmd := range [][]string{
		{"BLPOP", "k", "T"}, {"BRPOP", "k", "T"}, {"BLMOVE", "k", "d", "LEFT", "LEFT", "T"}, {"BRPOPLPUSH", "k", "d", "T"},
		{"DELAY.POP", "k", "T"}, {"DELAY.MPOP", "T", "1", "k"},
	} {
		for _, tc := range []struct{ timeout, want string }{
			{"1e300", "-" + errTimeoutRange + "\n"}, {"9223372036854775807", "-" + errTimeoutRange + "\n"},
			{"inf", "-" + errTimeoutRange + "\n"}, {"1_0", "-" + errNotFloat + "\n"}, {"0x1p-10", "nullarray\n"},
		} {
			a := append([]string(nil), cmd...)
			for i := range a {
				if a[i] == "T" {
					a[i] = tc.timeout
				}
			}
			got := exec(d, c, args(a...))
			if c.Block != nil { // parked for the timeout (0x1p-10 s: 1 ms, rounded up)
				if c.Block.Timeout != time.Millisecond {
					t.Errorf("%v: parked for %v", a, c.Block.Timeout)
				}
				c.Block.TimedOut(c)
				got = c.W.(*textWriter).sb.String()
				c.Block = nil
			}
			if got != tc.want {
				t.Errorf("%v: %q, want %q", a, got, tc.want)
			}
		}
	}
}

// Every DELAY.* option parser names the word it could not use, refuses an
// option given twice, and gives each value its own message with its range.
func TestDelayOptionErrorsNameTheWord(t *testing.T) {
	n := newNode(t, nil)
	c := n.client()
	for _, tc := range []struct {
		cmd  []string
		want string
	}{
		// DELAY.ADD and DELAY.ADDAT
		{[]string{"DELAY.ADD", "q", "10", "x", "ACKTIMOUT", "5000"}, "-ERR syntax error: unknown option 'ACKTIMOUT'"},
		{[]string{"DELAY.ADDAT", "q", "10", "x", "BAR", "1"}, "-ERR syntax error: unknown option 'BAR'"},
		{[]string{"DELAY.ADD", "q", "10", "x", "ID", "a", "ID", "b"}, "-ERR syntax error: option 'ID' given twice"},
		{[]string{"DELAY.ADD", "q", "10", "x", "id", "a", "Id", "b"}, "-ERR syntax error: option 'ID' given twice"},
		{[]string{"DELAY.ADD", "q", "10", "x", "REPLACE", "ID", "a", "REPLACE"}, "-ERR syntax error: option 'REPLACE' given twice"},
		{[]string{"DELAY.ADD", "q", "10", "x", "ID"}, "-ERR syntax error: option 'ID' needs a value"},
		{[]string{"DELAY.ADD", "q", "10", "x", "REPLACE"}, "-" + errReplaceID},
		{[]string{"DELAY.ADD", "q", "10", "x", "UNIQUE", "100"}, "-" + errIdentID},
		{[]string{"DELAY.ADD", "q", "10", "x", "ID", ""}, "-" + errBadID},
		{[]string{"DELAY.ADD", "q", "10", "x", "ACKTIMEOUT", "-1"}, "-" + errAckTimeout},
		{[]string{"DELAY.ADD", "q", "10", "x", "ACKTIMEOUT", "4294967296"}, "-" + errAckTimeout},
		{[]string{"DELAY.ADD", "q", "10", "x", "ACKTIMEOUT", "5s"}, "-" + errAckTimeout},
		{[]string{"DELAY.ADD", "q", "10", "x", "RETRY", "-1"}, "-" + errRetry},
		{[]string{"DELAY.ADD", "q", "10", "x", "ID", "a", "UNIQUE", "0"}, "-" + errUnique},
		{[]string{"DELAY.ADD", "q", "10", "x", "ID", "a", "DEBOUNCE", "x"}, "-" + errDebounce},
		{[]string{"DELAY.ADD", "q", "10", "x", "GROUP", ""}, "-" + errGroup},
		{[]string{"DELAY.ADD", "q", "10", "x", "PRIORITY", "10"}, "-" + errPriority},
		{[]string{"DELAY.ADD", "q", "-1", "x"}, "-" + errNotInteger}, // the delay keeps Redis's wording
		{[]string{"DELAY.ADD", "q", "10", "x", "ID", "a", "REPLACE", "ACKTIMEOUT", "0", "RETRY", "3"}, "$a"},

		// DELAY.NACK key id [delay-ms], exactly
		{[]string{"DELAY.NACK", "q", "id", "60000", "BOGUS", "x"}, "-ERR syntax error: unknown option 'BOGUS'"},
		{[]string{"DELAY.NACK", "q", "a", "b", "x"}, "-ERR syntax error: unknown option 'b'"},
		{[]string{"DELAY.NACK", "q", "a", "-5"}, "-" + errNotInteger},
		{[]string{"DELAY.NACK", "q", "a", "1.5"}, "-" + errNotInteger},
		{[]string{"DELAY.NACK", "q", "a", "100"}, ":0"},
		{[]string{"DELAY.NACK", "q", "a", "ERROR", "x"}, ":0"},
		{[]string{"DELAY.NACK", "q", "a", "100", "ERROR", "x"}, ":0"},
		{[]string{"DELAY.NACK", "q", "a", "ERROR"}, "-ERR syntax error: option 'ERROR' needs a value"},
		{[]string{"DELAY.NACK", "q", "a", "ERROR", "x", "ERROR", "y"}, "-ERR syntax error: option 'ERROR' given twice"},
		{[]string{"DELAY.NACK", "q", "a", "ERROR", "x", "100"}, "-ERR syntax error: unknown option '100'"},
		{[]string{"DELAY.NACK", "q", "a", "ERROR", ""}, "-" + errReason},
		{[]string{"DELAY.NACK", "q", "a", "ERROR", strings.Repeat("x", 1025)}, "-" + errReason},

		// DELAY.SCHEDULE
		{[]string{"DELAY.SCHEDULE", "q", "s", "EVRY", "1000", "p"}, "-ERR syntax error: expected CRON or EVERY, got 'EVRY'"},
		{[]string{"DELAY.SCHEDULE", "q", "s", "EVERY", "0", "p"}, "-" + errEvery},
		{[]string{"DELAY.SCHEDULE", "q", "s", "EVERY", "1s", "p"}, "-" + errEvery},
		{[]string{"DELAY.SCHEDULE", "q", "s", "EVERY", "10", "p", "RETRY"}, "-ERR syntax error: option 'RETRY' needs a value"},
		{[]string{"DELAY.SCHEDULE", "q", "s", "EVERY", "10", "p", "RETRY", "1", "RETRY", "2"}, "-ERR syntax error: option 'RETRY' given twice"},
		{[]string{"DELAY.SCHEDULE", "q", "s", "EVERY", "10", "p", "ACKTIMOUT", "5"}, "-ERR syntax error: unknown option 'ACKTIMOUT'"},
		{[]string{"DELAY.SCHEDULE", "q", "s", "EVERY", "10", "p", "MISFIRE", "sometimes"}, "-" + errMisfire},
		{[]string{"DELAY.SCHEDULE", "q", "s", "EVERY", "10", "p", "START", "-1"}, "-ERR START must be a unix time in ms, 0 or more"},

		// DELAY.LIMIT
		{[]string{"DELAY.LIMIT", "q", "SPEED", "10"}, "-ERR syntax error: unknown option 'SPEED'"},
		{[]string{"DELAY.LIMIT", "q", "RATE", "10"}, "-ERR syntax error: option 'RATE' needs 2 values"},
		{[]string{"DELAY.LIMIT", "q", "OFF", "CONCURRENCY", "1"}, "-ERR syntax error: OFF takes no other option"},
		{[]string{"DELAY.LIMIT", "q", "CONCURRENCY", "1", "CONCURRENCY", "2"}, "-ERR syntax error: option 'CONCURRENCY' given twice"},
		{[]string{"DELAY.LIMIT", "q", "CONCURRENCY", "0"}, "-ERR CONCURRENCY must be an integer from 1 to 2147483647"},
		{[]string{"DELAY.LIMIT", "q", "RATE", "1", "x"}, "-ERR RATE's n and per-ms must be integers from 1 to 2147483647"},

		// the rest
		{[]string{"DELAY.MPOP", "0", "1", "q", "COUNT", "1", "COUNT", "2"}, "-ERR syntax error: option 'COUNT' given twice"},
		{[]string{"DELAY.MPOP", "0", "1", "q", "FOO"}, "-ERR syntax error: unknown option 'FOO'"},
		{[]string{"DELAY.PEEK", "q", "1", "FOO"}, "-ERR syntax error: unknown option 'FOO'"},
		{[]string{"DELAY.REQUEUE", "dlq", "a", "b", "c"}, "-ERR syntax error: unknown option 'c'"},
	} {
		if got := n.do(c, tc.cmd...); got != tc.want {
			t.Errorf("%q: %s, want %s", tc.cmd, got, tc.want)
		}
	}
}

// DELAY.NACK ... ERROR text gives the job a failure reason that DELAY.GET
// shows as error, through a retry and into the dead-letter queue.
func TestNackErrorShownByGet(t *testing.T) {
	n := newNode(t, nil)
	c := n.client()
	for _, tc := range []struct{ cmd, want string }{
		{"DELAY.ADD q 0 p ID j ACKTIMEOUT 60000 RETRY 1 DEADLETTER dlq", "$j"},
		{"DELAY.GET q j", "*12 $id $j $queue $q $state $ready $due :…"}, // no error field
		{"DELAY.POP q 0", "*3 $q $j $p"},
		{"DELAY.NACK q j 0 ERROR first", ":1"},
		{"DELAY.GET q j", "…$deliveries :1 $error $first"},
		{"DELAY.POP q 0", "*3 $q $j $p"},
		{"DELAY.NACK q j ERROR second", ":1"},
		{"DELAY.GET dlq j", "…$origin $q $error $second"},
	} {
		got := n.do(c, strings.Fields(tc.cmd)...)
		want, pre := strings.CutSuffix(tc.want, "…")
		want, suf := strings.CutPrefix(want, "…")
		if (pre && !strings.HasPrefix(got, want)) || (suf && !strings.HasSuffix(got, want)) || (!pre && !suf && got != want) {
			t.Errorf("%s: %s, want %s", tc.cmd, got, tc.want)
		}
	}
}
