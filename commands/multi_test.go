package commands

import (
	"testing"

	"github.com/delayd/delayd/engine"
)

// A connection that closes drops its watches: the engine's registry must
// not keep (and keep counting changes for) names nobody watches any more.
func TestClosedConnectionUnwatches(t *testing.T) {
	eng, err := engine.New(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	d := New(Options{Engine: eng, Config: map[string]string{}})
	w := &textWriter{proto: 2}
	c := d.NewClient(w, "a")
	d.Exec(c, args("WATCH", "q"))
	d.Exec(c, args("MULTI"))
	d.Exec(c, args("RPUSH", "q", "never"))
	d.CloseClient(c)
	if _, err := eng.Add(engine.AddArgs{Queue: []byte("q"), Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if v := eng.Watch([]byte("q")); v != 0 {
		t.Fatalf("the closed connection's WATCH is still registered (version %d after a change)", v)
	}
	if n := eng.Len([]byte("q")); n != 1 {
		t.Fatalf("a command queued by a connection that closed ran: length %d", n)
	}
	if got, want := w.sb.String(), "+OK\n+OK\n+QUEUED\n"; got != want {
		t.Fatalf("replies %q, want %q", got, want)
	}
}
