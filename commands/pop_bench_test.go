package commands

import (
	"strconv"
	"testing"

	"github.com/rs/zerolog"

	"github.com/delayd/delayd/engine"
)

// Benchmarks of the consumer path through the dispatcher, as a connection
// runs it (no network, log off): RPUSH, LPOP, BLPOP and DELAY.POP that find
// a job, and DELAY.POP + DELAY.ACK. Every allocation here is one a pop pays
// on the real server. Run with
// `go test ./commands -run '^$' -bench 'Pop|Push|Ack' -benchmem`.

// sinkWriter takes replies without keeping them: what is measured is the
// handler and the engine, not a test writer's strings.
type sinkWriter struct{ n int }

func (w *sinkWriter) Status(s string)     { w.n += len(s) }
func (w *sinkWriter) Error(s string)      { w.n += len(s) }
func (w *sinkWriter) Int(n int64)         { w.n++ }
func (w *sinkWriter) Bulk(b []byte)       { w.n += len(b) }
func (w *sinkWriter) BulkString(s string) { w.n += len(s) }
func (w *sinkWriter) Null()               { w.n++ }
func (w *sinkWriter) NullArray()          { w.n++ }
func (w *sinkWriter) Array(n int)         { w.n++ }
func (w *sinkWriter) Map(n int)           { w.n++ }
func (w *sinkWriter) Verbatim(s string)   { w.n += len(s) }
func (w *sinkWriter) Push(n int)          { w.n++ }
func (w *sinkWriter) Proto() int          { return 2 }
func (w *sinkWriter) SetProto(p int)      {}

func popBench(b *testing.B, opts engine.Options) (*Dispatcher, *Client) {
	eng, err := engine.New(opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { eng.Close() })
	d := New(Options{Engine: eng, Log: zerolog.Nop()})
	return d, d.NewClient(&sinkWriter{}, "a")
}

// fill pushes n jobs onto q, 1000 per RPUSH.
func fill(b *testing.B, d *Dispatcher, c *Client, q string, n int) {
	argv := [][]byte{[]byte("RPUSH"), []byte(q)}
	for range 1000 {
		argv = append(argv, []byte("payload-of-a-job"))
	}
	for ; n > 0; n -= 1000 {
		d.Exec(c, argv[:2+min(n, 1000)])
	}
}

func BenchmarkExecRPush(b *testing.B) {
	d, c := popBench(b, engine.Options{})
	argv := args("RPUSH", "q", "payload-of-a-job")
	b.ReportAllocs()
	for b.Loop() {
		d.Exec(c, argv)
	}
}

func benchPop(b *testing.B, opts engine.Options, cmd ...string) {
	d, c := popBench(b, opts)
	fill(b, d, c, "q", b.N)
	argv := args(cmd...)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		d.Exec(c, argv)
		if c.Block != nil {
			b.Fatal("the list ran out")
		}
	}
}

func BenchmarkExecLPop(b *testing.B)  { benchPop(b, engine.Options{}, "LPOP", "q") }
func BenchmarkExecBLPop(b *testing.B) { benchPop(b, engine.Options{}, "BLPOP", "q", "0") }
func BenchmarkExecDelayPop(b *testing.B) {
	benchPop(b, engine.Options{}, "DELAY.POP", "q", "0")
}

// BenchmarkExecLPopManyKeys pops from 1000 lists in turn, as
// redis-benchmark's random keys do.
func BenchmarkExecLPopManyKeys(b *testing.B) {
	d, c := popBench(b, engine.Options{})
	keys := make([][][]byte, 1000)
	for i := range keys {
		q := "q:" + strconv.Itoa(i)
		fill(b, d, c, q, b.N/len(keys)+1)
		keys[i] = args("LPOP", q)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		d.Exec(c, keys[i%len(keys)])
	}
}

// BenchmarkExecDelayPopAck reserves each job (an ack timeout) and acks it.
func BenchmarkExecDelayPopAck(b *testing.B) {
	d, c := popBench(b, engine.Options{AckTimeout: 30000})
	fill(b, d, c, "q", b.N)
	pop := args("DELAY.POP", "q", "0")
	ack := args("DELAY.ACK", "q", "")
	w := &idWriter{}
	c.W = w
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		w.bulks = 0
		d.Exec(c, pop)
		ack[2] = w.id[:]
		d.Exec(c, ack)
	}
	b.StopTimer()
	if s := d.engineFor(c).Info(); s.Acked != uint64(b.N) {
		b.Fatalf("%d acks of %d pops", s.Acked, b.N)
	}
}

// idWriter keeps the second bulk of a reply: DELAY.POP's id.
type idWriter struct {
	sinkWriter
	bulks int
	id    [16]byte
}

func (w *idWriter) Bulk(b []byte) {
	if w.bulks == 1 {
		copy(w.id[:], b)
	}
	w.bulks++
}
