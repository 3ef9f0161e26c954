package commands

import (
	"strings"
	"testing"

	"github.com/delayd/delayd/engine"
)

// minimal returns name plus filler arguments enough for cmd's arity.
func minimal(cmd *Command, extra ...string) [][]byte {
	n := cmd.Arity - 1
	if cmd.Arity < 0 {
		n = -cmd.Arity - 1
	}
	a := []string{strings.ToUpper(cmd.Name)}
	a = append(a, extra...)
	for len(a) < n+1 {
		a = append(a, "x")
	}
	return args(a...)
}

// exec runs one command on c and returns its replies as text.
func exec(d *Dispatcher, c *Client, a [][]byte) string {
	w := c.W.(*textWriter)
	w.sb.Reset()
	d.Exec(c, a)
	return w.sb.String()
}

const loadingReply = "-LOADING delayd is loading the dataset in memory\n"

// TestLoadingGate: while the engine is not published, every command not
// flagged Loading gets the LOADING error and runs nothing; the flagged ones
// run (INFO with the loading fields); auth and arity are checked first, as
// Redis does; once SetEngine publishes the engine, everything runs.
func TestLoadingGate(t *testing.T) {
	var l engine.Loading
	d := New(Options{Loading: &l, Config: map[string]string{"max-jobs": "0"}})
	c := d.NewClient(&textWriter{proto: 2}, "a")
	if d.Ready() {
		t.Fatal("Ready() before SetEngine")
	}
	flagged := 0
	for _, cmd := range Table() {
		// A client of its own for each: MULTI (flagged loading) would
		// otherwise queue the commands after it.
		got := exec(d, d.NewClient(&textWriter{proto: 2}, "a"), minimal(cmd))
		if cmd.Flags&Loading != 0 {
			flagged++
			if got == loadingReply {
				t.Errorf("%s is flagged loading but got LOADING", cmd.Name)
			}
			continue
		}
		if got != loadingReply {
			t.Errorf("%s while loading: %q, want %q", cmd.Name, got, loadingReply)
		}
	}
	if flagged < 5 {
		t.Fatalf("only %d commands flagged loading", flagged)
	}
	// Redis's choices: PING and ECHO wait; the handshake and INFO do not.
	for _, tc := range []struct{ cmd, want string }{
		{"PING", loadingReply},
		{"ECHO hi", loadingReply},
		{"DBSIZE", loadingReply},
		{"DELAY.ADD q 0 p", loadingReply},
		{"SELECT 0", "+OK\n"},
		{"TIME", "*\n$"},
		{"CLIENT SETNAME w", "+OK\n"},
		{"HELLO 2", "%\n$server\n"},
		{"CONFIG GET max-jobs", "%\n$max-jobs\n$0\n"},
		{"INFO persistence", "=# Persistence\r\nloading:1\r\nasync_loading:0\r\n"},
		{"QUIT", "+OK\n"},
	} {
		if got := exec(d, c, args(strings.Fields(tc.cmd)...)); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s while loading: %q, want it to begin %q", tc.cmd, got, tc.want)
		}
	}
	info := exec(d, c, args("INFO"))
	for _, f := range []string{"loading_loaded_perc:", "loading_loaded_records:", "loading_eta_seconds:", "# Queues\r\n"} {
		if !strings.Contains(info, f) {
			t.Errorf("INFO while loading has no %q:\n%s", f, info)
		}
	}

	// arity first
	if got := exec(d, c, args("DELAY.ADD", "q")); !strings.HasPrefix(got, "-ERR wrong number of arguments") {
		t.Errorf("DELAY.ADD q while loading: %q, want the arity error", got)
	}
	// auth first
	dp := New(Options{Loading: &l, RequirePass: "pw", Config: map[string]string{}})
	cp := dp.NewClient(&textWriter{proto: 2}, "b")
	if got := exec(dp, cp, args("PING")); !strings.HasPrefix(got, "-NOAUTH") {
		t.Errorf("PING without AUTH while loading: %q, want NOAUTH", got)
	}
	if got := exec(dp, cp, args("AUTH", "pw")); got != "+OK\n" {
		t.Errorf("AUTH while loading: %q", got)
	}
	if got := exec(dp, cp, args("PING")); got != loadingReply {
		t.Errorf("PING after AUTH while loading: %q", got)
	}

	eng, err := engine.New(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	d.SetEngine(eng)
	if !d.Ready() {
		t.Fatal("not Ready() after SetEngine")
	}
	for _, tc := range []struct{ cmd, want string }{
		{"PING", "+PONG\n"},
		{"DELAY.ADD q 0 p", "$"},
		{"LLEN q", ":int\n"},
		{"INFO persistence", "=# Persistence\r\nloading:0\r\n"},
	} {
		if got := exec(d, c, args(strings.Fields(tc.cmd)...)); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s once loaded: %q, want it to begin %q", tc.cmd, got, tc.want)
		}
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("a second SetEngine did not panic")
			}
		}()
		d.SetEngine(eng)
	}()
}

// TestLoadingFlaggedRunWithoutEngine: every command flagged Loading runs
// while engineFor is nil, for each subcommand tried, without reaching it.
func TestLoadingFlaggedRunWithoutEngine(t *testing.T) {
	d := New(Options{Loading: &engine.Loading{}, Config: map[string]string{}})
	subs := []string{"", "list", "info", "id", "getname", "help", "get", "docs", "count", "everything", "all", "persistence"}
	for _, cmd := range Table() {
		if cmd.Flags&Loading == 0 || cmd.Name == "shutdown" {
			continue
		}
		for _, sub := range subs {
			a := minimal(cmd)
			if sub != "" {
				a = minimal(cmd, sub)
			}
			c := d.NewClient(&textWriter{proto: 2}, "a")
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%q while loading panicked: %v", a, r)
					}
				}()
				exec(d, c, a)
			}()
		}
	}
}
