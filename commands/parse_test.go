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
		{"0", 0, ""}, {"1", time.Second, ""}, {"0.25", 250 * time.Millisecond, ""}, {"1e-12", 1, ""},
		{"-1", 0, errNegTimeout}, {"abc", 0, errNotFloat}, {"", 0, errNotFloat}, {" 1", 0, errNotFloat},
		{"NaN", 0, errNotFloat},
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
