package record

import (
	"errors"
	"testing"
)

// A record a newer delayd wrote (a kind, or a tail bit, this version does
// not know) is told from damage: ErrNewer, which is an ErrBad too.
func TestDecodeNewerIsNotDamage(t *testing.T) {
	add := (&Rec{Op: Add, Time: 1, Queue: []byte("q"), ID: []byte("a"), Payload: []byte("p"), Retry: -1, UniqueTTL: 5}).Encode(nil)
	move := (&Rec{Op: Move, Time: 1, Queue: []byte("q"), ID: []byte("a"), Reason: []byte("r")}).Encode(nil)
	// The tail's bits are its last uvarint before its fields: set one
	// above every bit this version knows.
	addNewer := append((&Rec{Op: Add, Time: 1, Queue: []byte("q"), ID: []byte("a"), Payload: []byte("p"), Retry: -1}).Encode(nil), 1<<6)
	moveNewer := append((&Rec{Op: Move, Time: 1, Queue: []byte("q"), ID: []byte("a")}).Encode(nil), 1<<1)
	for _, c := range []struct {
		name  string
		b     []byte
		newer bool
	}{
		{"a kind past the last", []byte{Requeue + 1, 2, 1, 'q'}, true},
		{"op 255", []byte{255}, true},
		{"an add tail bit past the last", addNewer, true},
		{"a move tail bit past the last", moveNewer, true},
		{"a cut add", add[:len(add)-1], false},
		{"a move tail of no bits", append(move[:len(move)-3], 0), false},
	} {
		var r Rec
		err := r.Decode(c.b)
		if !errors.Is(err, ErrBad) || errors.Is(err, ErrNewer) != c.newer {
			t.Errorf("%s (%x): %v; want ErrBad, and ErrNewer %v", c.name, c.b, err, c.newer)
		}
	}
}
