package record

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"reflect"
	"testing"
)

// BenchmarkDecodeAdd is the record a DELAY.ADD with a server id writes, the
// one a cluster follower and a restart's replay decode most.
func BenchmarkDecodeAdd(b *testing.B) {
	p := (&Rec{Op: Add, Time: 1764470000123, Queue: []byte("orders"), SID: 0x19ad4c3b2e1f0007, Due: 1764470030123, Seq: 1234567,
		Payload: []byte("p:0123456789"), AckTimeout: 30000, Retry: -1}).Encode(nil)
	var r Rec
	b.SetBytes(int64(len(p)))
	for range b.N {
		if err := r.Decode(p); err != nil {
			b.Fatal(err)
		}
	}
}

// The varint reads give what encoding/binary gives, on every length, on
// overlong forms, on varints cut short and on ten-byte overflows.
func TestVarintsReadAsBinary(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(b []byte, i int) {
		t.Helper()
		want, n := binary.Uvarint(b[i:])
		got, j := uvarintAt(b, i)
		if n <= 0 {
			if j != -1 {
				t.Fatalf("% x at %d: read %d to %d, binary.Uvarint refuses it (%d)", b, i, got, j, n)
			}
			return
		}
		if got != want || j != i+n {
			t.Fatalf("% x at %d: read %d to %d, want %d to %d", b, i, got, j, want, i+n)
		}
		sw, sn := binary.Varint(b[i:])
		if sg, sj := varintAt(b, i); sg != sw || sj != i+sn {
			t.Fatalf("% x at %d: signed %d to %d, want %d to %d", b, i, sg, sj, sw, i+sn)
		}
	}
	for range 200_000 {
		v := rng.Uint64() >> rng.IntN(64)
		b := binary.AppendUvarint(make([]byte, rng.IntN(3)), v)
		b = append(b, make([]byte, rng.IntN(10))...)
		for i := 0; i <= len(b); i++ {
			check(b, i)
		}
		// Overlong, cut short, overflowing: random bytes with top bits set.
		r := make([]byte, rng.IntN(12))
		for k := range r {
			r[k] = byte(rng.Uint32())
			if rng.IntN(4) != 0 {
				r[k] |= 0x80
			}
		}
		for i := 0; i <= len(r); i++ {
			check(r, i)
		}
	}
	if _, j := uvarintAt([]byte{1}, -1); j != -1 {
		t.Fatal("a failed read does not stay failed")
	}
}

// decodeAdd reads an add record as the general path does, or leaves it to
// it: records of every shape, then each of them damaged one byte at a time.
func TestDecodeAddAsGeneral(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	bs := func(n int) []byte {
		b := make([]byte, rng.IntN(n+1))
		for k := range b {
			b[k] = byte(rng.Uint32())
		}
		return b
	}
	i64 := func() int64 { return int64(rng.Uint64()) >> rng.IntN(64) }
	fast := 0
	for range 20_000 {
		r := Rec{Op: Add, Time: i64(), Queue: bs(20), Due: i64(), Seq: rng.Uint64() >> rng.IntN(64),
			Deliveries: rng.Uint32() >> rng.IntN(32), Flags: byte(rng.IntN(4)), Payload: bs(40), AckTimeout: i64(),
			Retry: i64(), DeadLetter: bs(3), Deadline: i64()}
		if rng.IntN(2) == 0 {
			r.ID = append(bs(10), 'x')
		} else {
			r.SID = rng.Uint64() >> rng.IntN(64)
		}
		if rng.IntN(4) == 0 {
			r.Priority = byte(1 + rng.IntN(9))
		}
		p := r.Encode(nil)
		for k := -1; k < len(p); k++ {
			q := p
			if k >= 0 {
				q = bytes.Clone(p)
				q[k] = byte(rng.Uint32())
			}
			var got, want Rec
			ok := got.decodeAdd(q)
			err := want.decode(q)
			if !ok {
				continue
			}
			fast++
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("% x: fast read\n%+v\ngeneral (%v)\n%+v", q, got, err, want)
			}
		}
	}
	if fast == 0 {
		t.Fatal("the fast path read nothing")
	}
}
