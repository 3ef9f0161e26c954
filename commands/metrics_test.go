package commands

import (
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/delayd/delayd/engine"
)

// TestInfoLatenessAndCommandstats: INFO lateness shows the lateness
// histogram as le_<ms> lines (cumulative), le_inf, count and sum_ms; like
// Redis's commandstats it and INFO commandstats are left out of INFO and
// INFO default, and in INFO all and everything.
func TestInfoLatenessAndCommandstats(t *testing.T) {
	eng, err := engine.New(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	d := New(Options{Engine: eng, Log: zerolog.Nop()})
	c := d.NewClient(&textWriter{proto: 2}, "a")
	for _, cmd := range []string{"DELAY.ADD q 0 a", "DELAY.ADD q 0 b", "DELAY.POP q 1", "DELAY.POP q 1"} {
		exec(d, c, args(strings.Fields(cmd)...))
	}
	got := exec(d, c, args("INFO", "lateness"))
	lines := strings.Split(strings.TrimSuffix(got[strings.Index(got, "# Lateness"):], "\r\n\n"), "\r\n")
	bounds := []string{"1", "2", "5", "10", "20", "50", "100", "200", "500", "1000", "2000", "5000", "10000", "30000", "60000", "300000", "3600000", "inf"}
	if len(lines) != 1+len(bounds)+2 {
		t.Fatalf("INFO lateness: %q", got)
	}
	prev := "0"
	for i, b := range bounds {
		// Two pops of jobs due now: within a second, in every bucket from
		// le_1000 on; cumulative below.
		name, n, _ := strings.Cut(lines[1+i], ":")
		if name != "le_"+b || n < prev || i >= 9 && n != "2" {
			t.Errorf("line %d: %q, want le_%s, cumulative, 2 from le_1000 on", i+1, lines[1+i], b)
		}
		prev = n
	}
	if lines[len(lines)-2] != "count:2" || !strings.HasPrefix(lines[len(lines)-1], "sum_ms:") {
		t.Errorf("INFO lateness ends %q", lines[len(lines)-2:])
	}
	for _, tc := range []struct {
		args []string
		in   bool
	}{
		{[]string{"INFO"}, false},
		{[]string{"INFO", "default"}, false},
		{[]string{"INFO", "server"}, false},
		{[]string{"INFO", "all"}, true},
		{[]string{"INFO", "everything"}, true},
		{[]string{"INFO", "commandstats", "lateness"}, true},
	} {
		got := exec(d, c, args(tc.args...))
		for _, s := range []string{"# Lateness\r\nle_1:", "# Commandstats\r\ncmdstat_"} {
			if strings.Contains(got, s) != tc.in {
				t.Errorf("%v: has %q = %v, want %v", tc.args, s, !tc.in, tc.in)
			}
		}
	}
	got = exec(d, c, args("INFO", "commandstats"))
	if !strings.Contains(got, "\r\ncmdstat_delay.add:calls=2,usec=") || !strings.Contains(got, "\r\ncmdstat_delay.pop:calls=2,") ||
		!strings.Contains(got, "\r\ncmdstat_info:calls=") {
		t.Errorf("INFO commandstats: %q", got)
	}
	var calls uint64
	for _, s := range d.CommandStats() {
		if s.Name == "delay.add" {
			calls = s.Calls
		}
	}
	if calls != 2 || d.Engine() != eng {
		t.Errorf("CommandStats: delay.add %d calls, want 2", calls)
	}

	// While the log loads: the same lines, zeros.
	var l engine.Loading
	d = New(Options{Loading: &l})
	got = exec(d, d.NewClient(&textWriter{proto: 2}, "a"), args("INFO", "lateness"))
	if !strings.Contains(got, "# Lateness\r\nle_1:0\r\n") || !strings.Contains(got, "\r\nle_inf:0\r\ncount:0\r\nsum_ms:0\r\n") {
		t.Errorf("INFO lateness while loading: %q", got)
	}
}
