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

// TestDeadLetterKeepsTheOrigin: a job out of deliveries with a dead-letter
// queue becomes a plain job that remembers where it came from; one with
// none is left as it was.
func TestDeadLetterKeepsTheOrigin(t *testing.T) {
	tb := newTable(t)
	run := tb.NewRun()
	none := add(tb, &run, 0, []byte("n"), 0, nil)
	if _, ok := tb.DeadLetter(none, []byte("work")); ok {
		t.Fatal("a job with no dead-letter queue was dead-lettered")
	}
	s := add(tb, &run, 0, []byte("d"), 0, nil)
	j := tb.At(s)
	j.AckTimeout, j.Retry, j.Flags = 700, 4, j.Flags|FlagDL
	tb.DeadLetters[s] = []byte("dlq")
	tb.SetIdent(s, 1000, 0)
	dl, ok := tb.DeadLetter(s, []byte("work"))
	if !ok || string(dl) != "dlq" {
		t.Fatalf("dead letter %q %v", dl, ok)
	}
	o := tb.Origins[s]
	if o == nil || string(o.Queue) != "work" || o.AckTimeout != 700 || o.Retry != 4 || string(o.DeadLetter) != "dlq" {
		t.Fatalf("origin %+v", o)
	}
	if j.AckTimeout != 0 || j.Retry != -1 || j.Flags&(FlagDL|FlagUnique|FlagDebounce) != 0 || tb.DeadLetters[s] != nil {
		t.Fatalf("options left: %d %d flags %b", j.AckTimeout, j.Retry, j.Flags)
	}
}

// TestFreeSIDSkipsClientIDs: a client id that reads as the next server id
// makes the server take the one after it.
func TestFreeSIDSkipsClientIDs(t *testing.T) {
	tb := newTable(t)
	run := tb.NewRun()
	var buf [SIDLen]byte
	add(tb, &run, 0, append([]byte(nil), RenderSID(&buf, 5)...), 0, nil)
	tb.SIDLike = true
	if got := tb.FreeSID(&run, 0, 5); got != 6 {
		t.Fatalf("FreeSID from 5 = %d, want 6", got)
	}
	if got := tb.FreeSID(&run, 1, 5); got != 5 {
		t.Fatalf("in another queue: %d, want 5", got)
	}
}
