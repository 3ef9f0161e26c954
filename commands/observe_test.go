package commands

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayd/delayd/engine"
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
		{"DELAY.NACK q id ERROR why", "DELAY.NACK q id ERROR (redacted)"},
		{"DELAY.NACK q id 500 error why", "DELAY.NACK q id 500 error (redacted)"},
		{"DELAY.NACK ERROR ERROR", "DELAY.NACK ERROR ERROR"}, // queue and id named ERROR
		{"DELAY.NACK q id 500", "DELAY.NACK q id 500"},
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

// Within a pipelined batch one clock read times each command: its end is
// the next command's start. The chain starts at Seen, and a blocked
// command breaks it (its wait is nobody's time), as does a command run
// outside a batch (web), which never starts one.
func TestCommandTimingChainsWithinABatch(t *testing.T) {
	d := New(Options{Config: map[string]string{}})
	c := d.NewClient(&textWriter{proto: 2}, "a")
	ping := d.lookup([]byte("ping"))

	// No batch: every command reads the clock at its start, and leaves
	// nothing behind for a later one to start from.
	d.afterExec(c, ping, nil, d.beforeExec(c, ping, nil))
	if c.clk != 0 {
		t.Fatalf("outside a batch a command left clk %v", c.clk)
	}

	c.Seen()
	first := c.clk
	if first == 0 {
		t.Fatal("Seen did not start the batch's clock")
	}
	if got := d.beforeExec(c, ping, nil); got != first {
		t.Fatalf("the first command started at %v, not the batch's reading %v", got, first)
	}
	d.afterExec(c, ping, nil, first)
	end := c.clk
	if end < first {
		t.Fatalf("the first command ended at %v, before it started (%v)", end, first)
	}
	if got := d.beforeExec(c, ping, nil); got != end {
		t.Fatalf("the second command started at %v, not the first one's end %v", got, end)
	}

	c.Block = &Block{} // the command parks the client: its wait must not be charged
	d.afterExec(c, ping, nil, end)
	c.Block = nil
	if c.clk != 0 {
		t.Fatalf("after a blocked command clk is %v: the next command would count the wait", c.clk)
	}
}

// A name in capitals, lower case or mixed case finds the same command, as
// in Redis; capitals and lower case without folding (dispatch.go, asSent).
func TestLookupAnyCase(t *testing.T) {
	d := New(Options{Config: map[string]string{}})
	for _, name := range []string{"RPUSH", "rpush", "RpUsH", "DELAY.ADD", "delay.add", "Delay.Add"} {
		cmd := d.lookup([]byte(name))
		if cmd == nil || !strings.EqualFold(cmd.Name, name) {
			t.Errorf("lookup(%q) = %v", name, cmd)
		}
	}
	if d.lookup([]byte("RPUSHX2")) != nil {
		t.Error("an unknown name found a command")
	}
}

// DELAY.ADD's reply id lives in the client's scratch until its next
// command: an add through the dispatcher allocates nothing.
func TestDelayAddAllocatesNothing(t *testing.T) {
	_, d, c, w := newAddClient(t)
	argv := args("DELAY.ADD", "q", "1000", "payload")
	d.Exec(c, argv) // the queue and the scratch's first buffer
	first := string(w.last)
	if n := testing.AllocsPerRun(1000, func() { d.Exec(c, argv) }); n != 0 {
		t.Errorf("DELAY.ADD allocates %v times", n)
	}
	if string(w.last) <= first {
		t.Errorf("ids %q then %q: not rising, or the scratch was overwritten", first, w.last)
	}
}

// newAddClient is a dispatcher on a fresh engine and a client whose bulk
// replies (DELAY.ADD's ids) w keeps. The engine closes with the test.
func newAddClient(t *testing.T) (*engine.Engine, *Dispatcher, *Client, *lastBulkWriter) {
	t.Helper()
	d := aclDispatcher(t, Options{})
	w := &lastBulkWriter{}
	return d.eng.Load(), d, d.NewClient(w, "a"), w
}

// lastBulkWriter keeps the last bulk reply (a copy, as a connection's buffer does).
type lastBulkWriter struct {
	sinkWriter
	last []byte
}

func (w *lastBulkWriter) Bulk(b []byte) { w.last = append(w.last[:0], b...) }

// DELAY.ADD counts its delay from the command's start, the batch's clock
// reading (Client.Seen) chained through the batch, which the engine takes
// instead of reading the clock again; a command outside a batch reads the
// clock at its start. Between commands the client holds no start, so
// nothing can hand the engine a stale one.
func TestDelayAddCountsFromTheCommandsStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng, d, c, w := newAddClient(t)
		due := func() int64 {
			t.Helper()
			info, ok := eng.Get([]byte("q"), w.last)
			if !ok {
				t.Fatalf("job %q not found", w.last)
			}
			return info.Due
		}

		c.Seen()
		seen := eng.Now()
		time.Sleep(5 * time.Millisecond) // the batch's command runs later
		d.Exec(c, args("DELAY.ADD", "q", "10", "x"))
		if got := due(); got != seen+10 {
			t.Fatalf("in a batch: due %d, want the batch's reading %d + 10", got, seen)
		}
		if c.arrived() != 0 {
			t.Fatal("a command's start outlived it")
		}

		c.clk = 0 // no batch (as after a blocked command, or web's commands)
		time.Sleep(5 * time.Millisecond)
		now := eng.Now()
		d.Exec(c, args("DELAY.ADD", "q", "10", "y"))
		if got := due(); got != now+10 {
			t.Fatalf("outside a batch: due %d, want the command's own reading %d + 10", got, now)
		}
	})
}
