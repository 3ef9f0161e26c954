package commands

import (
	"strings"
	"testing"
	"time"

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

// infoField is one field of an INFO reply, or "".
func infoField(info, name string) string {
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, name+":"); ok {
			return v
		}
	}
	return ""
}

// Redis's error counts, which redis_exporter reads: commandstats'
// rejected_calls (refused before running: arity, ACL, ...) and
// failed_calls (ran and answered an error), total_error_replies (every
// error, unknown commands too), acl_access_denied_* and INFO cpu.
func TestInfoErrorCounts(t *testing.T) {
	d := aclDispatcher(t, Options{})
	c := d.NewClient(&textWriter{proto: 2}, "a")
	must(t, d, c, "-ERR wrong number of arguments for 'lpop' command\n", "LPOP")
	must(t, d, c, "-"+errNotInteger+"\n", "LRANGE", "k", "a", "b")
	must(t, d, c, "*\n", "LRANGE", "k", "0", "1")
	exec(d, c, args("NOSUCH"))
	must(t, d, c, "+OK\n", "ACL", "SETUSER", "u", "on", ">p", "~k*", "+lrange", "+auth")
	exec(d, c, args("AUTH", "u", "wrong"))
	must(t, d, c, "+OK\n", "AUTH", "u", "p")
	must(t, d, c, noperm("u", "llen"), "LLEN", "k")
	must(t, d, c, nopermKeys, "LRANGE", "x", "0", "1")
	must(t, d, c, "+OK\n", "AUTH", "default", "x")
	got := exec(d, c, args("INFO", "commandstats"))
	for _, want := range []string{
		"\r\ncmdstat_lpop:calls=0,usec=0,usec_per_call=0.00,rejected_calls=1,failed_calls=0\r\n",
		",rejected_calls=1,failed_calls=1\r\n", // lrange: one of each, and a call that succeeded
		"\r\ncmdstat_llen:calls=0,usec=0,usec_per_call=0.00,rejected_calls=1,failed_calls=0\r\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("INFO commandstats lacks %q: %q", want, got)
		}
	}
	if v := infoField(got, "cmdstat_lrange"); !strings.HasPrefix(v, "calls=2,") {
		t.Errorf("cmdstat_lrange: %q", v)
	}
	got = exec(d, c, args("INFO", "stats"))
	for field, want := range map[string]string{"total_error_replies": "6", "acl_access_denied_auth": "1",
		"acl_access_denied_cmd": "1", "acl_access_denied_key": "1", "acl_access_denied_channel": "0"} {
		if v := infoField(got, field); v != want {
			t.Errorf("%s: %q, want %s", field, v, want)
		}
	}
	if infoField(got, "instantaneous_ops_per_sec") == "" {
		t.Errorf("no instantaneous_ops_per_sec: %q", got)
	}
	got = exec(d, c, args("INFO", "cpu"))
	for _, f := range []string{"used_cpu_sys", "used_cpu_user", "used_cpu_sys_children", "used_cpu_user_children"} {
		v := infoField(got, f)
		if i := strings.IndexByte(v, '.'); i < 1 || len(v)-i != 7 {
			t.Errorf("INFO cpu %s: %q", f, v)
		}
	}
	if !strings.Contains(exec(d, c, args("INFO")), "# CPU\r\nused_cpu_sys:") {
		t.Error("INFO without a section has no CPU section")
	}
}

// instantaneous_ops_per_sec is the rate over the last 1.6 s of samples, and
// about 0 on a server idle since its last sample.
func TestOpsSampler(t *testing.T) {
	var o opsSampler
	ms := time.Millisecond
	if r := o.rate(0, 0); r != 0 {
		t.Fatalf("no samples: %d", r)
	}
	for i := int64(0); i < 40; i++ { // 1,000 commands a second for 4 s
		o.sample(time.Duration(i)*100*ms, i*100)
		o.sample(time.Duration(i)*100*ms+ms, i*100+1) // too soon: no sample
	}
	if r := o.rate(3950*ms, 3950); r != 1000 {
		t.Fatalf("steady: %d, want 1000", r)
	}
	if r := o.rate(3950*ms+time.Hour, 3951); r != 0 {
		t.Fatalf("idle an hour: %d, want 0", r)
	}
}

// A cluster redirect is a rejected call, counted once, as Redis counts it.
func TestRedirectIsRejectedCall(t *testing.T) {
	n := newNode(t, newFake(idA, idL))
	c := n.client()
	if got := n.do(c, "RPUSH", "foo", "x"); got != movedFoo {
		t.Fatalf("RPUSH on a follower: %q", got)
	}
	for _, s := range n.d.CommandStats() {
		if s.Name == "rpush" {
			if s.Calls != 0 || s.Rejected != 1 || s.Failed != 0 {
				t.Fatalf("rpush: %+v", s)
			}
			return
		}
	}
	t.Fatal("no rpush in CommandStats")
}

// CONFIG RESETSTAT zeroes what Redis's does, as its tests expect before
// reading commandstats.
func TestConfigResetstat(t *testing.T) {
	d := aclDispatcher(t, Options{})
	c := d.NewClient(&textWriter{proto: 2}, "c")
	exec(d, c, args("LPOP"))
	exec(d, c, args("LLEN", "k"))
	exec(d, c, args("AUTH", "nobody", "x"))
	must(t, d, c, "+OK\n", "CONFIG", "RESETSTAT")
	got := exec(d, c, args("INFO", "all"))
	for _, f := range []string{"total_error_replies", "acl_access_denied_auth"} {
		if v := infoField(got, f); v != "0" {
			t.Errorf("%s:%s after RESETSTAT", f, v)
		}
	}
	if v := infoField(got, "total_commands_processed"); v != "1" { // INFO itself
		t.Errorf("total_commands_processed:%s", v)
	}
	if strings.Contains(got, "cmdstat_lpop") || strings.Contains(got, "cmdstat_llen") {
		t.Errorf("commandstats kept after RESETSTAT: %q", got)
	}
}
