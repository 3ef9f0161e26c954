package commands

import (
	"strconv"
	"testing"

	"github.com/rs/zerolog"

	"github.com/delayd/delayd/cluster"
	"github.com/delayd/delayd/engine"
)

// BenchmarkExecDelayAddCluster is BenchmarkExecDelayAdd on the leader of a
// cluster's group: one group (Groups nil), and group 1 of three, whose
// routing also looks for a slot's move and a MIGRATE's fence and holds the
// client's running lock (migrate.go).
func BenchmarkExecDelayAddCluster(b *testing.B) {
	for _, groups := range []bool{false, true} {
		name := "one-group"
		if groups {
			name = "group-1-of-3"
		}
		b.Run(name, func(b *testing.B) {
			eng, err := engine.New(engine.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer eng.Close()
			gs := &fakeGroups{m: cluster.EvenSlots(3), views: []*fakeCluster{newGroupFake(0, 1), newGroupFake(1, 0), newGroupFake(2, 2)}}
			opts := Options{Engine: eng, Log: zerolog.Nop(), Cluster: gs.views[1]}
			if groups {
				opts.Groups, opts.Group = gs, 1
			}
			d := New(opts)
			c := d.NewClient(&textWriter{proto: 2}, "a")
			argv := [][]byte{[]byte("DELAY.ADD"), []byte(keyOf(gs.m, 1)), nil, []byte("payload")}
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
		})
	}
}
