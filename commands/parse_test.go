package commands

import (
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
