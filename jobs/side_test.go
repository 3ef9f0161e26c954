package jobs

import (
	"bytes"
	"testing"
)

// TestRequeueTakesTheOriginsOptions: a dead letter goes back to its origin
// with the origin's options, or to another queue; a job with no origin
// goes only where it is told, with its own options; once requeued it has
// no origin and the options it was given.
func TestRequeueTakesTheOriginsOptions(t *testing.T) {
	tb := newTable(t)
	run := tb.NewRun()
	plain := add(tb, &run, 0, []byte("p"), 0, nil)
	tb.At(plain).AckTimeout, tb.At(plain).Retry = 500, 2
	if _, _, _, _, ok := tb.Requeue(plain, nil); ok {
		t.Fatal("a job with no origin and no target was requeued")
	}
	if dst, ack, retry, dl, ok := tb.Requeue(plain, []byte("x")); !ok || string(dst) != "x" || ack != 500 || retry != 2 || dl != nil {
		t.Fatalf("plain to x: %q %d %d %q %v", dst, ack, retry, dl, ok)
	}
	dead := add(tb, &run, 0, []byte("d"), 0, nil)
	tb.SetOrigin(dead, &Origin{Queue: []byte("work"), AckTimeout: 1000, Retry: 3, DeadLetter: []byte("dlq")})
	dst, ack, retry, dl, ok := tb.Requeue(dead, nil)
	if !ok || string(dst) != "work" || ack != 1000 || retry != 3 || string(dl) != "dlq" {
		t.Fatalf("dead to origin: %q %d %d %q %v", dst, ack, retry, dl, ok)
	}
	tb.Requeued(dead, ack, retry, dl)
	j := tb.At(dead)
	if j.Flags&FlagOrigin != 0 || tb.Origins[dead] != nil {
		t.Fatal("the origin was kept")
	}
	if j.AckTimeout != 1000 || j.Retry != 3 || j.Flags&FlagDL == 0 || !bytes.Equal(tb.DeadLetters[dead], []byte("dlq")) {
		t.Fatalf("options %d %d %q", j.AckTimeout, j.Retry, tb.DeadLetters[dead])
	}
	tb.Requeued(dead, -5, -9, nil)
	if j.AckTimeout != 0 || j.Retry != -1 || j.Flags&FlagDL != 0 || tb.DeadLetters[dead] != nil {
		t.Fatal("options not clamped, or the dead-letter queue kept")
	}
}
