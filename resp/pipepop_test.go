package resp

import (
	"bufio"
	"strings"
	"testing"

	"github.com/delayd/delayd/engine"
)

// TestAckRepliedBeforePipelinedPopBlocks: a batch worker sends the ACK of
// the job it finished in one write with its next DELAY.POP. The ACK's reply
// must reach it while the pop waits (it is when the worker knows the job is
// done), and the pop must then be served by the next add. Several rounds on
// one connection: every round parks the pop, and the read the reader
// goroutine was asked for while it waited brings the next round.
func TestAckRepliedBeforePipelinedPopBlocks(t *testing.T) {
	eng, dial := inProcess(t, engine.Options{}, 4096)
	worker, wr := dial()
	producer, pr := dial()
	line := func(r *bufio.Reader) string {
		s, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimRight(s, "\r\n")
	}
	add := func(payload string) string {
		if _, err := producer.Write([]byte("DELAY.ADD q 0 " + payload + " ACKTIMEOUT 30000\r\n")); err != nil {
			t.Fatal(err)
		}
		line(pr) // $len
		return line(pr)
	}
	// popped reads a DELAY.POP reply [q, id, payload] and returns id, payload.
	popped := func() (string, string) {
		if h := line(wr); h != "*3" {
			t.Fatalf("DELAY.POP reply header %q", h)
		}
		line(wr)
		line(wr) // q
		line(wr)
		id := line(wr)
		line(wr)
		return id, line(wr)
	}
	id0 := add("job0")
	if _, err := worker.Write([]byte("DELAY.POP q 0\r\n")); err != nil {
		t.Fatal(err)
	}
	if id, p := popped(); id != id0 || p != "job0" {
		t.Fatalf("first pop: %s %s, want %s job0", id, p, id0)
	}
	prev := id0
	for round := 1; round <= 3; round++ {
		// The queue is empty: the pop parks after the ACK.
		if _, err := worker.Write([]byte("DELAY.ACK q " + prev + "\r\nDELAY.POP q 0\r\n")); err != nil {
			t.Fatal(err)
		}
		if r := line(wr); r != ":1" {
			t.Fatalf("round %d: ACK replied %q", round, r)
		}
		// The pop is parked (the reply above came before it); a job serves it.
		next := add("job" + string(rune('0'+round)))
		id, p := popped()
		if id != next || p != "job"+string(rune('0'+round)) {
			t.Fatalf("round %d: popped %s %s, want %s", round, id, p, next)
		}
		prev = id
	}
	if s := eng.Info(); s.Acked != 3 {
		t.Fatalf("%d acks, want 3", s.Acked)
	}
}
