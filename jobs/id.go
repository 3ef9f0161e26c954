package jobs

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// Server-made ids are 16 lowercase hex digits of a 64-bit number whose top 48
// bits are the unix millisecond the id was made and whose low 16 bits count
// within that millisecond. Fixed width hex makes byte order equal numeric
// order, so ids sort by creation time in any client, and the engine can keep
// them as a uint64 (8 bytes) instead of 16 bytes in the arena.
//
// The generator never goes backwards: next = max(last+1, now<<16). If the
// clock steps back, or more than 65536 ids are made in one millisecond, ids
// borrow from the future and stay strictly increasing. The log replays the
// last id made, so ids stay unique across restarts even if the clock moved.

// SIDLen is the length of a rendered server id.
const SIDLen = 16

const hexDigits = "0123456789abcdef"

// NextSID is the server id to make after last at nowMs.
func NextSID(last uint64, nowMs int64) uint64 {
	n := uint64(nowMs) << 16
	if n <= last {
		n = last + 1
	}
	return n
}

// RenderSID writes sid into dst and returns it.
func RenderSID(dst *[SIDLen]byte, sid uint64) []byte {
	for i := SIDLen - 1; i >= 0; i-- {
		dst[i] = hexDigits[sid&0xf]
		sid >>= 4
	}
	return dst[:]
}

// ParseSID reports whether b is the rendering of a server id; client ids that
// look like one are allowed and compared by bytes like any other id.
func ParseSID(b []byte) (uint64, bool) {
	if len(b) != SIDLen {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			n = n<<4 | uint64(c-'0')
		case c >= 'a' && c <= 'f':
			n = n<<4 | uint64(c-'a'+10)
		default:
			return 0, false
		}
	}
	return n, true
}

// FreeSID returns the first server id from sid on that no job of queue q
// (run: its push run) has as its id: a client may have chosen that very
// string as its own. O(1) unless one did.
func (t *Table) FreeSID(run *PushRun, q uint32, sid uint64) uint64 {
	var buf [SIDLen]byte
	for {
		if _, taken := t.Lookup(run, q, RenderSID(&buf, sid)); !taken {
			return sid
		}
		sid++
	}
}

// FarKeyBit marks a far key (FarKey): no server id has it (a server id's top
// 48 bits are a unix millisecond), so a key and a server id never meet in
// the far-future buckets' index, which files both.
const FarKeyBit = 1 << 63

// FarKey is the key under which a job with the client id id in the queue
// named queue is filed in the far-future buckets (docs/decisions/
// far-future-ids.md): a hash of both, the same on every start (runs keep
// it), with FarKeyBit set. Two (queue, id) pairs may share one: the owner
// confirms a hit against the job's head, and a job whose key is taken stays
// in memory.
func FarKey(queue string, id []byte) uint64 {
	var d xxhash.Digest
	d.Reset()
	var n [binary.MaxVarintLen64]byte
	d.Write(n[:binary.PutUvarint(n[:], uint64(len(queue)))])
	d.WriteString(queue)
	d.Write(id)
	return d.Sum64() | FarKeyBit
}
