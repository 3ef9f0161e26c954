package commands

import (
	"strings"
	"testing"
)

// SPEC: nothing shows a password or a payload. MONITOR and SLOWLOG show
// arguments through shown.
func TestShownRedactsPasswordsAndPayloads(t *testing.T) {
	d := New(Options{Config: map[string]string{}})
	cases := []struct{ in, want string }{
		{"AUTH pw", "AUTH (redacted)"},
		{"AUTH default pw", "AUTH (redacted) (redacted)"},
		{"HELLO 3 AUTH default pw SETNAME me", "HELLO 3 AUTH (redacted) (redacted) SETNAME me"},
		{"DELAY.ADD q 100 secret ID x", "DELAY.ADD q 100 (redacted) ID x"},
		{"DELAY.ADDAT q 100 secret", "DELAY.ADDAT q 100 (redacted)"},
		{"RPUSH q a b c", "RPUSH q (redacted) (redacted) (redacted)"},
		{"LPUSH q a", "LPUSH q (redacted)"},
		{"DELAY.SCHEDULE q s EVERY 1000 secret RETRY 1", "DELAY.SCHEDULE q s EVERY 1000 (redacted) RETRY 1"},
		{"DELAY.SCHEDULE q s CRON @daily secret", "DELAY.SCHEDULE q s CRON @daily (redacted)"},
		{"DELAY.SCHEDULE q s CRON @daily TZ UTC secret", "DELAY.SCHEDULE q s CRON @daily TZ UTC (redacted)"},
		{"DELAY.SCHEDULE q s CRON @daily TZ UTC", "DELAY.SCHEDULE q s CRON @daily (redacted) UTC"}, // a payload "TZ", as cmdSchedule reads it
		{"DELAY.CANCEL q a b", "DELAY.CANCEL q a b"},
		{"PING hello", "PING hello"},
	}
	for _, c := range cases {
		a := args(strings.Fields(c.in)...)
		got := strings.Join(shown(d.lookup(a[0]), a), " ")
		if got != c.want {
			t.Errorf("%s: shown %q, want %q", c.in, got, c.want)
		}
	}
}

func TestAppendReprQuotesAsRedis(t *testing.T) {
	got := string(appendRepr(nil, "a\"b\\c\n\r\t\x00\xffé"))
	want := `"a\"b\\c\n\r\t\x00\xff\xc3\xa9"`
	if got != want {
		t.Errorf("appendRepr: %s, want %s", got, want)
	}
}
