package commands

import (
	"strconv"
	"testing"

	"github.com/rs/zerolog"

	"github.com/delayd/delayd/engine"
)

// BenchmarkExecDelayAdd is one DELAY.ADD through the dispatcher, as a
// connection runs it (no network, no log): what the observe hook and the
// engine's counters add to every command shows here.
func BenchmarkExecDelayAdd(b *testing.B) {
	eng, err := engine.New(engine.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	d := New(Options{Engine: eng, Log: zerolog.Nop()})
	c := d.NewClient(&textWriter{proto: 2}, "a")
	argv := [][]byte{[]byte("DELAY.ADD"), []byte("q"), nil, []byte("payload")}
	delays := make([][]byte, 100000)
	for i := range delays {
		delays[i] = []byte(strconv.Itoa(i))
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		argv[2] = delays[i%len(delays)]
		c.W.(*textWriter).sb.Reset()
		d.Exec(c, argv)
	}
}

// BenchmarkLookup finds a command by name as clients send it: capitals
// (redis-benchmark), lower case, and mixed case, which alone still folds.
func BenchmarkLookup(b *testing.B) {
	d := New(Options{Log: zerolog.Nop()})
	for _, name := range []string{"RPUSH", "rpush", "RPush"} {
		b.Run(name, func(b *testing.B) {
			n := []byte(name)
			for b.Loop() {
				if d.lookup(n) == nil {
					b.Fatal("no command")
				}
			}
		})
	}
}
