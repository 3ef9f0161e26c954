package commands

import (
	"strings"
	"sync"
	"testing"

	"github.com/delayd/delayd/engine"
)

// textWriter is a Writer that records replies as text, for tests.
type textWriter struct {
	sb    strings.Builder
	proto int
	errs  uint64
}

func (w *textWriter) ErrorCount() *uint64 { return &w.errs }

func (w *textWriter) Status(s string)     { w.sb.WriteString("+" + s + "\n") }
func (w *textWriter) Error(s string)      { w.errs++; w.sb.WriteString("-" + s + "\n") }
func (w *textWriter) Int(n int64)         { w.sb.WriteString(":int\n") }
func (w *textWriter) Bulk(b []byte)       { w.sb.WriteString("$" + string(b) + "\n") }
func (w *textWriter) BulkString(s string) { w.sb.WriteString("$" + s + "\n") }
func (w *textWriter) Null()               { w.sb.WriteString("null\n") }
func (w *textWriter) NullArray()          { w.sb.WriteString("nullarray\n") }
func (w *textWriter) Array(n int)         { w.sb.WriteString("*\n") }
func (w *textWriter) Map(n int)           { w.sb.WriteString("%\n") }
func (w *textWriter) Verbatim(s string)   { w.sb.WriteString("=" + s + "\n") }
func (w *textWriter) Push(n int)          { w.sb.WriteString(">\n") }
func (w *textWriter) Proto() int          { return w.proto }
func (w *textWriter) SetProto(p int)      { w.proto = p }

func args(s ...string) [][]byte {
	out := make([][]byte, len(s))
	for i, a := range s {
		out[i] = []byte(a)
	}
	return out
}

// CLIENT LIST reads other connections' state while their goroutines change
// it: under -race this fails if any of it is read bare.
func TestClientListWhileOthersChangeTheirState(t *testing.T) {
	eng, err := engine.New(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	d := New(Options{Engine: eng, Config: map[string]string{}})
	a := d.NewClient(&textWriter{proto: 2}, "a")
	b := d.NewClient(&textWriter{proto: 2}, "b")
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 500 {
			d.Exec(a, args("CLIENT", "SETNAME", "worker"))
			d.Exec(a, args("CLIENT", "SETINFO", "LIB-NAME", "go-redis"))
			d.Exec(a, args("HELLO", "3"))
			d.Exec(a, args("PING"))
		}
	})
	wg.Go(func() {
		for range 500 {
			d.Exec(b, args("CLIENT", "LIST"))
		}
	})
	wg.Wait()
	b.W.(*textWriter).sb.Reset()
	d.Exec(b, args("CLIENT", "LIST"))
	out := b.W.(*textWriter).sb.String()
	if !strings.Contains(out, "name=worker") || !strings.Contains(out, "lib-name=go-redis") || !strings.Contains(out, "resp=3") {
		t.Fatalf("CLIENT LIST: %q", out)
	}
}

// CLIENT LIST and INFO name a container's subcommand as Redis 7 does
// (cmd=client|list), the container alone for a subcommand it lacks.
func TestClientListSubcommandName(t *testing.T) {
	d := aclDispatcher(t, Options{})
	a := d.NewClient(&textWriter{proto: 2}, "a")
	b := d.NewClient(&textWriter{proto: 2}, "b")
	if got := exec(d, a, args("CLIENT", "INFO")); !strings.Contains(got, " cmd=client|info ") {
		t.Fatalf("CLIENT INFO: %q", got)
	}
	for _, tc := range []struct {
		run  []string
		want string
	}{
		{[]string{"CONFIG", "GET", "port"}, " cmd=config|get "},
		{[]string{"client", "setname", "x"}, " cmd=client|setname "},
		{[]string{"CLIENT", "NOSUCH"}, " cmd=client "},
		{[]string{"LLEN", "k"}, " cmd=llen "},
	} {
		exec(d, b, args(tc.run...))
		if got := d.clientLine(b); !strings.Contains(got+" ", tc.want) {
			t.Errorf("after %v: %q", tc.run, got)
		}
	}
}
