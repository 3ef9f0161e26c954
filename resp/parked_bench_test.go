package resp

import (
	"bufio"
	"testing"

	"github.com/delayd/delayd/engine"
)

// BenchmarkParkedPop is one cycle of a worker that waits for each job, over
// loopback TCP with the server in this process: the worker's DELAY.POP
// parks (PING before it is answered only once it has: replies before a
// blocking pop are flushed when it parks), a producer adds a job, and the
// parked pop is served. It is the path of the rivals race's spread and
// steady cases (the reader's read while the pop waits, the wake, the
// reply), without the race's noise: compare builds with -count,
// interleaved.
//
//	go test ./resp -run '^$' -bench ParkedPop -count 5
func BenchmarkParkedPop(b *testing.B) {
	_, dial := inProcess(b, engine.Options{}, 4096)
	worker, wr := dial()
	producer, pr := dial()
	// RESP arrays, as client libraries send (inline commands take
	// another parser).
	park := []byte("*1\r\n$4\r\nPING\r\n*3\r\n$9\r\nDELAY.POP\r\n$1\r\nq\r\n$1\r\n0\r\n")
	add := []byte("*4\r\n$9\r\nDELAY.ADD\r\n$1\r\nq\r\n$1\r\n0\r\n$3\r\njob\r\n")
	skip := func(r *bufio.Reader, lines int) {
		for range lines {
			if _, err := r.ReadSlice('\n'); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := worker.Write(park); err != nil {
			b.Fatal(err)
		}
		skip(wr, 1) // +PONG: the pop is parked
		if _, err := producer.Write(add); err != nil {
			b.Fatal(err)
		}
		skip(pr, 2) // the id
		skip(wr, 7) // *3, key, id, payload
	}
}
