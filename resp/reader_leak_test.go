package resp

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/delayd/delayd/engine"
)

// A connection that blocked keeps a reader goroutine across pops; it must
// end with the connection. Workers park, each gets a job, sends another
// command (answered through the reader's read), and leaves; the server is
// then back to the goroutines it had before they came.
func TestBlockingConnectionsLeaveNoGoroutine(t *testing.T) {
	_, dial := inProcess(t, engine.Options{}, 4096)
	producer, pr := dial()
	ping(t, producer, pr)
	before := runtime.NumGoroutine()

	const workers = 16
	for i := range workers {
		w, wr := dial()
		if _, err := w.Write([]byte("*3\r\n$9\r\nDELAY.POP\r\n$1\r\nq\r\n$1\r\n0\r\n")); err != nil {
			t.Fatal(err)
		}
		// The add serves the parked pop (or one still on its way finds
		// the job ready: either way this worker gets it).
		job := fmt.Sprintf("j%02d", i)
		if _, err := producer.Write([]byte("*4\r\n$9\r\nDELAY.ADD\r\n$1\r\nq\r\n$1\r\n0\r\n$3\r\n" + job + "\r\n")); err != nil {
			t.Fatal(err)
		}
		if _, err := pr.ReadString('\n'); err != nil { // the id
			t.Fatal(err)
		}
		if _, err := pr.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		var got string
		for range 7 { // *3, key, id, payload
			line, err := wr.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			got = line
		}
		if got != job+"\r\n" {
			t.Fatalf("worker %d got %q, want %s", i, got, job)
		}
		ping(t, w, wr)
		w.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines after the workers left, %d before\n%s",
				runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}
