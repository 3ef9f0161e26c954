package commands

import (
	"strings"
	"syscall"
	"testing"

	"github.com/delayd/delayd/aof"
	"github.com/delayd/delayd/engine"
)

// A full disk and a failed fsync are refused with Redis's MISCONF line
// naming the cause; reads and pops go on.
func TestFaultsMisconfReply(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault aof.Fault
		cause string
	}{
		{"disk full", aof.Fault{Op: aof.OpWrite, Err: syscall.ENOSPC, Sticky: true}, "no space left on device"},
		{"fsync EIO", aof.Fault{Op: aof.OpSync, Err: syscall.EIO, Sticky: true}, "input/output error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := aof.NewMemFS()
			eng, err := engine.New(engine.Options{AppendOnly: true, Dir: "/data", FS: fs, Fsync: engine.FsyncAlways})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { eng.Close() })
			n := &node{t: t, d: New(Options{Engine: eng, Config: map[string]string{}, Port: 7001}), eng: eng}
			c := n.client()
			// As the connection does: a logged write's reply is replaced
			// by its log error.
			write := func(a ...string) string {
				c.Ticket = 0
				got := n.do(c, a...)
				if err := n.d.Durable(c.Ticket); err != nil {
					return "-" + ErrorLine(err)
				}
				return got
			}
			if got := write("RPUSH", "q", "a"); got != ":1" {
				t.Fatalf("RPUSH: %s", got)
			}
			fs.Inject(tc.fault)
			want := "-MISCONF Errors writing to the AOF file: "
			for range 2 { // the write in flight, then a write refused outright
				if got := write("DELAY.ADD", "q", "0", "x"); !strings.HasPrefix(got, want) || !strings.HasSuffix(got, tc.cause) {
					t.Fatalf("DELAY.ADD on a failing disk: %q, want %q…%s", got, want, tc.cause)
				}
			}
			if got := n.do(c, "LPOP", "q"); got != "$a" {
				t.Fatalf("LPOP on a failing disk: %s", got)
			}
			if got := n.do(c, "INFO", "persistence"); !strings.Contains(got, "aof_last_write_status:err") {
				t.Fatalf("INFO persistence: %s", got)
			}
		})
	}
}
