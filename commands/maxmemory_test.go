package commands

import (
	"testing"

	"github.com/delayd/delayd/engine"
)

func TestParseMemory(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "1234": 1234, "100mb": 100 << 20, "1gb": 1 << 30, "1GB": 1 << 30, "2k": 2000, "2kb": 2048,
		"3m": 3_000_000, "1g": 1_000_000_000, "10b": 10, " 5mb ": 5 << 20,
	} {
		if got, err := ParseMemory(in); err != nil || got != want {
			t.Errorf("ParseMemory(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "mb", "1tb", "1.5gb", "x", "99999999999gb"} {
		if got, err := ParseMemory(in); err == nil {
			t.Errorf("ParseMemory(%q) = %d, want an error", in, got)
		}
	}
}

// Above --maxmemory, adds get Redis's OOM error (in MULTI too, which then
// aborts); pops, acks, cancels, DEL and reads go on.
func TestMaxMemoryRefusesAddsOnly(t *testing.T) {
	eng, err := engine.New(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	n := &node{t: t, eng: eng, d: New(Options{Engine: eng, Config: map[string]string{}, Port: 7001, MaxMemory: 1 << 40})}
	c := n.client()
	for _, cmd := range [][]string{
		{"RPUSH", "q", "a", "b"}, {"DELAY.ADD", "w", "0", "x", "ID", "j", "ACKTIMEOUT", "60000"}, {"DELAY.ADD", "d", "60000", "y", "ID", "k"},
	} {
		if got := n.do(c, cmd...); got[0] == '-' {
			t.Fatalf("%v under the limit: %s", cmd, got)
		}
	}
	n.d.opts.MaxMemory = 1 // any heap is above it
	oom := "-" + errOOM
	for _, tc := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"DELAY.ADD", "q", "0", "x"}, oom},
		{[]string{"DELAY.ADDAT", "q", "4102444800000", "x"}, oom},
		{[]string{"RPUSH", "q", "c"}, oom},
		{[]string{"LPUSH", "q", "c"}, oom},
		{[]string{"DELAY.SCHEDULE", "q", "s", "EVERY", "1000", "p"}, oom},
		{[]string{"LLEN", "q"}, ":2"},
		{[]string{"LPOP", "q"}, "$a"},
		{[]string{"DELAY.POP", "w", "0"}, "*3 $w $j $x"},
		{[]string{"DELAY.ACK", "w", "j"}, ":1"},
		{[]string{"DELAY.CANCEL", "d", "k"}, ":1"},
		{[]string{"DEL", "q"}, ":1"},
		{[]string{"MULTI"}, "+OK"},
		{[]string{"DELAY.ADD", "q", "0", "x"}, oom},
		{[]string{"EXEC"}, "-EXECABORT Transaction discarded because of previous errors."},
	} {
		if got := n.do(c, tc.cmd...); got != tc.want {
			t.Errorf("%v above maxmemory: %q, want %q", tc.cmd, got, tc.want)
		}
	}
}
